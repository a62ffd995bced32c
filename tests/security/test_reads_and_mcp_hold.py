"""The agent-facing read paths hold what a caller puts in a query string (SPEC 6: "Bad input gets a 4xx
with the error envelope, never a 500, and changes nothing"; SPEC 2.2: "Never an HTML error page", errors
always ``{"error": {"code", "message"}}``; SPEC 5: MCP "tool errors carry REST's codes").

Each test states the attack and what happens instead.

- A list's ``cursor`` is opaque base64 of JSON, but a client can write one. ``api.paging.decode`` reads its
  time with ``datetime.fromisoformat`` (which takes UTC offsets up to ±23:59:59.999999) and its text keys
  as any string, then hands them to PostgreSQL, which refuses offsets beyond ±15:59:59, offsets with a
  fraction of a second, and lone surrogates (psycopg can't even encode those): a 500 on
  ``GET /api/v1/thoughts``, ``GET /api/v1/tasks`` and the MCP tools ``thought_list`` / ``task_list``,
  unless the cursor is checked first.
- ``GET /api/v1/memory``'s ``source_ref`` is one JSON-encoded query parameter; JSON nested past Python's
  recursion limit raises RecursionError (not a ValueError) out of ``json.loads``: a few kilobytes of ``[``.
- ``/mcp`` authenticates one Authorization header and its tool calls forward one: with two, each could
  read a different one.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from brain.models import QueryLog, Thought
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db

STATEMENT = "The staging cluster is rebuilt every Sunday night from the infrastructure repository main branch."


def cursor_of(values: list) -> str:
    """A cursor as api.paging.encode writes one (base64url of a JSON array, padding stripped)."""
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def assert_envelope_400(response) -> dict:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR", error
    assert "cursor" in error["message"] or "source_ref" in error["message"], error
    return error


# --- list cursors ------------------------------------------------------------------------------------

SOME_ID = str(uuid.UUID(int=1))

#: Times Python reads as aware datetimes but PostgreSQL refuses as timestamptz.
UNSTORABLE_TIMES = {
    "offset_beyond_postgresql_range": "2026-01-01T00:00:00+20:00",
    "offset_with_fractional_seconds": "2026-01-01T00:00:00+00:00:30.500000",
}


@pytest.mark.parametrize("time", UNSTORABLE_TIMES.values(), ids=UNSTORABLE_TIMES.keys())
def test_a_thought_list_cursor_with_a_time_postgresql_refuses_is_a_400(dev, thought_factory, time):
    """Attack: ``GET /api/v1/thoughts?cursor=<base64 of ["2026-01-01T00:00:00+20:00", "<uuid>"]>``.
    ``api.paging._read`` accepts any offset ``datetime.fromisoformat`` takes (up to ±23:59:59.999999) and the
    keyset filter sends it to PostgreSQL, whose timestamptz refuses an offset beyond ±15:59:59 ("time zone
    displacement out of range") or with a fraction of a second: a DataError, so a 500 INTERNAL_ERROR.
    Expected (SPEC 6, bad input is a 4xx in the envelope): 400 VALIDATION_ERROR naming the cursor, as for
    any other cursor the list never gave."""
    thought_factory(STATEMENT)
    response = dev.get("/api/v1/thoughts", {"cursor": cursor_of([time, SOME_ID])})
    assert_envelope_400(response)


def test_a_thought_list_cursor_at_the_edges_of_the_calendar_is_answered(dev, thought_factory):
    """Boundary next to the test above: a far but storable cursor time (year 1 and year 9999, with offsets
    PostgreSQL takes) is a valid keyset position and answers 200 with the page after it."""
    thought = thought_factory(STATEMENT)
    for time, expected in (("0001-01-01T00:00:00+01:00", []), ("9999-12-31T23:59:59-01:00", [str(thought.id)])):
        response = dev.get("/api/v1/thoughts", {"cursor": cursor_of([time, SOME_ID])})
        assert response.status_code == 200, response.content[:300]
        assert [row["thought_id"] for row in response.json()["results"]] == expected


TASK_CURSORS = {
    "offset_beyond_postgresql_range": ["2026-01-01T00:00:00+20:00", "fix-ci", SOME_ID],
    "offset_with_fractional_seconds": ["2026-01-01T00:00:00+00:00:30.500000", "fix-ci", SOME_ID],
    "slug_with_a_lone_surrogate": ["2026-01-01T00:00:00+00:00", "\ud800", SOME_ID],
}


@pytest.mark.parametrize("values", TASK_CURSORS.values(), ids=TASK_CURSORS.keys())
def test_a_task_list_cursor_postgresql_cannot_read_is_a_400(dev, space, values):
    """Attack: ``GET /api/v1/tasks?cursor=...`` with a cursor whose time has an offset PostgreSQL refuses, or
    whose slug is a lone surrogate (``"\\ud800"`` in the cursor's JSON: ``api.paging._read`` only refuses a
    NUL in text keys). The first two are a DataError in PostgreSQL, the third a UnicodeEncodeError in
    psycopg: each a 500 INTERNAL_ERROR. Expected (SPEC 6): 400 VALIDATION_ERROR naming the cursor."""
    make_task(make_project(space), slug="fix-ci", status="ready", role="dev")
    response = dev.get("/api/v1/tasks", {"cursor": cursor_of(values)})
    assert_envelope_400(response)


def test_a_task_list_cursor_with_a_storable_time_and_slug_is_answered(dev, space):
    """Boundary next to the test above: a hand-written cursor PostgreSQL can read (a far past time with an
    in-range offset, a plain slug) answers 200."""
    make_task(make_project(space), slug="fix-ci", status="ready", role="dev")
    response = dev.get("/api/v1/tasks", {"cursor": cursor_of(["0001-01-01T00:00:00+01:00", "fix-ci", SOME_ID])})
    assert response.status_code == 200, response.content[:300]
    assert response.json()["results"] == []


# --- the memory endpoint's GET form ------------------------------------------------------------------


def test_a_memory_get_source_ref_nested_past_the_recursion_limit_is_a_400(dev, fake_embedder):
    """Attack: ``GET /api/v1/memory?prompt=...&contribute=false&source_ref=[[[[...`` (5,000 ``[``: about
    15 KB once URL-encoded, a URL any client sends). ``brain.apis.memory.memory_query_params`` parses
    ``source_ref`` with ``json.loads`` and only catches ValueError; Python's decoder raises RecursionError
    past ~1,000 levels, so the call is a 500 INTERNAL_ERROR (the POST form's parser caps nesting at
    MAX_JSON_DEPTH and answers 400). Expected (SPEC 2.2 and 6): 400 VALIDATION_ERROR naming source_ref,
    and nothing stored or logged."""
    response = dev.get("/api/v1/memory", {"prompt": STATEMENT, "contribute": "false", "source_ref": "[" * 5000})
    assert_envelope_400(response)
    assert not Thought.objects.exists()
    assert not QueryLog.objects.exists()


def test_a_url_tokens_memory_link_with_a_deeply_nested_source_ref_is_a_400(url_token, fake_embedder):
    """The same attack through a read-only URL token (seed 003 layer B: the one operation such a token may
    call, by a client that can only fetch URLs, e.g. a chat app unfurling a pasted link).
    Expected: 400 VALIDATION_ERROR in the envelope, nothing logged."""
    from rest_framework.test import APIClient

    response = APIClient().get("/api/v1/memory", {"prompt": STATEMENT, "token": url_token, "source_ref": "[" * 2000})
    assert_envelope_400(response)
    assert not QueryLog.objects.exists()


def test_a_memory_get_source_ref_nested_within_the_json_depth_limit_is_refused_by_its_shape(dev, fake_embedder):
    """Boundary next to the two tests above: a nested ``source_ref`` Python can parse is refused as the
    wrong shape (400 VALIDATION_ERROR naming source_ref), not a 500."""
    response = dev.get(
        "/api/v1/memory", {"prompt": STATEMENT, "contribute": "false", "source_ref": "[" * 50 + "]" * 50}
    )
    assert_envelope_400(response)


# --- the same cursors through MCP ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_mcp_thought_list_with_a_cursor_postgresql_refuses_is_a_validation_error(asgi_server, agent_factory):
    """Attack over MCP: the ``thought_list`` tool with ``cursor`` = a cursor whose time carries the offset
    +20:00. The tool runs REST's view (colony_mcp.rest), so it gets REST's 500: an error result
    ``{"error": {"code": "INTERNAL_ERROR"}, "status": 500}`` and an ERROR in the server log per call.
    Expected (SPEC 5: tool errors carry REST's codes; SPEC 6): a VALIDATION_ERROR result with status 400."""
    from tests.test_mcp_server import Tools, in_session

    dev = agent_factory("dev")

    async def body(session):
        return await Tools(session).raw("thought_list", cursor=cursor_of(["2026-01-01T00:00:00+20:00", SOME_ID]))

    is_error, answer = in_session(asgi_server.url, dev.token, body)
    assert is_error
    assert (answer.get("status"), answer["error"]["code"]) == (400, "VALIDATION_ERROR"), answer


@pytest.mark.django_db(transaction=True)
def test_an_mcp_request_with_two_authorization_headers_is_refused(asgi_server, agent_factory):
    """Attack: a caller holding two tokens sends both as Authorization headers. /mcp's check read the
    last, the tool call forwarded the first: it passed as one agent and acted as the other (SPEC 6: a
    request can't act as another agent). Instead: 400 in the envelope, before any tool runs."""
    import httpx

    dev, qa = agent_factory("dev"), agent_factory("qa")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx.post(
        f"{asgi_server.url}/mcp",
        json=body,
        headers=[
            ("Authorization", f"Bearer {dev.token}"),
            ("Authorization", f"Bearer {qa.token}"),
            ("Accept", "application/json, text/event-stream"),
        ],
    )
    assert response.status_code == 400, response.text[:300]
    assert response.json()["error"]["code"] == "BAD_REQUEST"
    assert "one Authorization header" in response.json()["error"]["message"]
