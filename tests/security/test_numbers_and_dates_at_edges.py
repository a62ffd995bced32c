"""Numbers and dates at their edges, on every door: the settings an operator sets, the management commands'
options, the MCP tools' arguments, the REST query strings and JSON bodies (lists, memory, import, a task's
DNA). Each must be a clear refusal (a 4xx envelope, a CommandError, a start that stops naming the variable)
or a documented clamp, never a 500, a hang or a nonsense value the code runs with; and it changes nothing.

The basic wrong kinds are covered elsewhere (tests/test_api_strict_input.py: strings, NaN/Infinity/1e400,
20-digit query numbers; test_operator_side_holds.py: rate and cool-off settings; test_mcp_tools_hold.py:
NaN and out-of-range tool numbers; test_reads_and_mcp_hold.py: paging cursors at the calendar's edges).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import OperationalError, connection

from brain.models import QueryLog, Thought
from brain.selectors.lineage import MAX_MAX_DEPTH
from tasks.models import Task
from tests.security.test_mcp_tools_hold import raw_post, tool_answer, tool_call
from tests.tasks_helpers import make_project, make_task

ROOT = Path(__file__).resolve().parents[2]
STATEMENT = "The deploy pipeline runs database migrations before it restarts the web workers."


def refused(response, field: str, code: str = "VALIDATION_ERROR") -> str:
    """The 400 envelope's message for ``field`` (checked to be named)."""
    assert response.status_code == 400, response.content[:400]
    error = response.json()["error"]
    assert error["code"] == code, error
    assert field in error.get("fields", {}), error
    return " ".join(error["fields"][field])


# --- settings read at the start ------------------------------------------------------------------------
def _check(**environment) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in environment} | environment
    return subprocess.run(  # noqa: S603 - fixed argv: this Python and manage.py
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("name", "value", "then"),
    [
        (
            "STALE_SNAPSHOT_DAYS",
            "1000000000",
            "every state_snapshot contribution answers 500 (OverflowError in flags.stale_cutoff's timedelta), "
            "and so does the nightly stale-flag job",
        ),
        (
            "TURN_LOG_RETENTION_DAYS",
            "-1",
            "the nightly expiry's cutoff lies in the future: it deletes every turn log, the one made a second ago",
        ),
        (
            "TURN_LOG_RETENTION_DAYS",
            "1000000000",
            "the hourly rollup (rollup_recompute_days) and the nightly expiry die of OverflowError",
        ),
        ("QUERY_LOG_RETENTION_DAYS", "1000000000", "the nightly query-log expiry dies of OverflowError"),
        (
            "IMPORT_RECEIPT_HOURS",
            "-1",
            "every receipt is expired as it is written: a batch retried with its Idempotency-Key is stored twice",
        ),
        (
            "IMPORT_RECEIPT_HOURS",
            "1000000000000",
            "every import sent with an Idempotency-Key answers 500 (OverflowError in the receipt's timedelta)",
        ),
        (
            "MAX_REQUEST_BODY_MB",
            "1e308",
            "the import route's body limit is int(1e308 * 2**20) = int(inf): OverflowError on every import",
        ),
        ("TURN_TEXT_MAX_CHARS", "-1", "every stored turn text silently loses its last character (text[:-1])"),
    ],
    ids=lambda case: case if " " not in str(case) else "then",
)
def test_a_number_setting_the_code_cannot_use_stops_the_start(name, value, then):
    """Attack (an operator's typo, a pasted value): a numeric environment variable that ``config.env.env``
    reads as a valid int or float, but outside any range its setting can mean: a negative retention or
    text bound, a number of days or hours past what ``timedelta`` holds, a body size whose bytes overflow.
    Without the rule the start succeeds and then ``then``. Rule (CONVENTIONS: one typed reader; as
    AXES_COOLOFF_TIME, MAX_REQUEST_BODY_KB and EMBEDDING_THREADS already are): ``manage.py check`` (and so
    every process) stops with a message naming the variable."""
    started = _check(**{name: value})
    assert started.returncode != 0, f"{name}={value} started; then {then}"
    assert name in started.stderr + started.stdout


# --- MCP tool arguments --------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("tool", "arguments", "argument"),
    [
        ("memory_search", '{"query": "deploy pipeline", "limit": true}', "limit"),
        ("memory_search", '{"query": "deploy pipeline", "min_relevance": true}', "min_relevance"),
        ("memory_search", '{"query": "deploy pipeline", "limit": "5"}', "limit"),
        ("memory_search", '{"query": "deploy pipeline", "limit": "1_0"}', "limit"),
        ("thought_lineage", '{"thought_id": "%(thought)s", "max_depth": true}', "max_depth"),
    ],
    ids=["limit-true", "min-relevance-true", "limit-string", "limit-underscores", "max-depth-true"],
)
def test_mcp_tools_refuse_a_boolean_or_a_string_where_a_number_is_expected(
    asgi_server, agent_factory, thought_factory, tool, arguments, argument
):
    """Attack: an agent's model fills a numeric tool argument with ``true`` or a string (``"5"``,
    ``"1_0"``). The tools' arguments are pydantic-validated in lax mode, which turns ``true`` into 1 (1.0
    for min_relevance) and a numeric string into its number, so the call runs: ``min_relevance: true``
    asks for relevance 1.0 and answers no sources at all (the agent concludes the brain knows nothing),
    ``limit: true`` answers one source. REST refuses the same values in a JSON body ("Expected an integer,
    got bool"). Rule (SPEC 5: a tool is REST's operation and carries REST's errors): a tool error with
    REST's envelope (status 400, VALIDATION_ERROR naming the argument); nothing searched or logged."""
    dev = agent_factory("dev")
    thought = thought_factory(STATEMENT)
    sent = arguments % {"thought": thought.id} if "%(" in arguments else arguments
    is_error, answer = tool_answer(raw_post(asgi_server.url, dev.token, tool_call(tool, sent)))
    assert is_error, f"{tool}({sent}) ran: {str(answer)[:300]}"
    assert (answer["status"], answer["error"]["code"]) == (400, "VALIDATION_ERROR"), answer
    assert argument in answer["error"].get("fields", {}), answer
    assert not QueryLog.objects.exists()


# --- management commands -------------------------------------------------------------------------------
@pytest.mark.django_db
def test_brain_history_max_depth_is_bounded_as_the_apis_is(dev, fake_embedder):
    """Attack: an agent imports two refinements that name each other as sources (the import takes the
    cycle); an operator then runs ``manage.py brain history <id> --max-depth 1000000000`` (the command only
    refuses a negative depth). The lineage walk (brain.selectors.lineage) follows the cycle one level per
    step until max_depth: ~0.5 s per 100,000 levels, so this call holds a database connection for hours.
    Rule (SPEC 2.4 and the API's ``max_depth`` of 0-100; every number bounded): the command refuses a
    depth past MAX_MAX_DEPTH with a CommandError, or clamps it and says so; it never walks for long.
    (Bounded here by a 3 s statement timeout.)"""
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    refinement = {"thought_type": "refinement"}
    response = dev.post(
        "/api/v1/thoughts/import",
        [
            {"id": first, "content": "The cache is warmed at deploy."},
            {**refinement, "id": second, "content": "The cache is warmed at boot.", "source_ids": [first]},
        ],
        format="json",
    )
    assert response.status_code == 201, response.content[:400]
    stored = response.json()["id_map"][first]
    # The import refuses a cycle; an admin edit of source_ids can still close one.
    Thought.objects.filter(pk=stored).update(source_ids=[response.json()["id_map"][second]])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = '3s'")
    try:
        call_command("brain", "history", stored, "--max-depth", "1000000000")
    except CommandError as exc:
        assert str(MAX_MAX_DEPTH) in str(exc), exc  # refused, naming the bound
    except OperationalError as exc:
        pytest.fail(f"brain history --max-depth 1000000000 walked the cycle past the 3 s timeout: {exc}")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args",
    [
        ("agent", "url-token", "dev-1", "--days", "0"),
        ("agent", "url-token", "dev-1", "--days", "99999999999999999999"),
        ("quality", "report", "--days", "99999999999999999999"),
        ("quality", "rollup", "--days", "-3"),
        ("reembed", "--missing", "--batch-size", "99999999999999999999"),
        ("brain", "query", STATEMENT, "--agent", "dev-1", "--limit", "0"),
        ("brain", "query", STATEMENT, "--agent", "dev-1", "--limit", "99999999999999999999"),
        ("brain", "contribute", STATEMENT, "--agent", "dev-1", "--temporal-scope", "2024-02-30"),
        ("brain", "contribute", STATEMENT, "--agent", "dev-1", "--temporal-scope", "9999-12-31"),
    ],
    ids=lambda args: " ".join(args[:2] + args[-2:]),
)
def test_cli_numbers_and_dates_out_of_range_are_command_errors(dev, fake_embedder, args):
    """Holds. Attack: an operator passes a day count, batch size, limit or date no command can use (0,
    negative, 20 digits, February 30th, year 9999). Without the rule: a traceback (OverflowError in a
    timedelta, DataError "bigint out of range") or a nonsense value stored. Rule: a CommandError naming the
    bound; nothing stored."""
    before = (Thought.objects.count(), QueryLog.objects.count())
    with pytest.raises(CommandError):
        call_command(*args)
    assert (Thought.objects.count(), QueryLog.objects.count()) == before


# --- REST query strings and bodies ---------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/thoughts?limit=1_0", "limit"),
        ("/api/v1/tasks?offset=1_000", "offset"),
        ("/api/v1/quality/metrics?days=%D9%A3%D9%A0", "days"),  # "٣٠", Arabic-Indic digits
        ("/api/v1/thoughts/{thought}/lineage?max_depth=%EF%BC%95", "max_depth"),  # "５", a fullwidth digit
        ("/api/v1/agents/dev/in-flight?markers=%D9%A1%D9%A2", "markers"),  # "١٢"
    ],
)
def test_a_query_string_integer_is_ascii_digits(dev, thought_factory, path, field):
    """Attack: a numeric query parameter written with digit separators (``1_000``) or non-ASCII digits
    (Arabic-Indic ``٣٠``, fullwidth ``５``). DRF's IntegerField passes the text to Python's ``int()``,
    which reads all of them, so the API answers as if ``1000``, ``30`` or ``5`` had been sent: a proxy, a
    log reader or a rate rule that reads the parameter as the schema's integer (ASCII digits) sees
    something else than Colony acts on, and the MCP tools refuse ``١٢`` where REST takes it. Rule (the
    schema's ``type: integer``; bad input is a clear 400): VALIDATION_ERROR naming the parameter."""
    thought = thought_factory(STATEMENT)
    refused(dev.get(path.format(thought=thought.id)), field)


@pytest.mark.django_db
def test_since_at_the_edges_of_the_calendar(dev, thought_factory):
    """Holds. Attack: ``GET /api/v1/thoughts?since=`` with a time whose offset pushes it past the calendar
    in UTC (year 1 at +01:00, year 9999 at -01:00: Python's ``astimezone`` raises OverflowError), the
    same with the "+" lost to the query string, a date that does not exist (February 30th) and an epoch
    number. Without the rule: a 500 from the conversion. Rule: 400 VALIDATION_ERROR naming ``since``;
    the calendar's own ends (0001-01-01, 9999-12-31T23:59:59) are valid and answer all or nothing."""
    thought_factory(STATEMENT)
    for value in (
        "0001-01-01T00:00:00+01:00",
        "0001-01-01T00:00:00 01:00",
        "9999-12-31T23:59:59-01:00",
        "2024-02-30",
        "1700000000",
    ):
        refused(dev.get("/api/v1/thoughts", {"since": value}), "since")
    assert dev.get("/api/v1/thoughts", {"since": "0001-01-01"}).json()["count"] == 1
    assert dev.get("/api/v1/thoughts", {"since": "9999-12-31T23:59:59"}).json()["count"] == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("created_at", "0001-01-01T00:00:00+01:00"),
        ("last_accessed", "0001-01-01T00:00:00+01:00"),
        ("superseded_at", "9999-12-31T23:59:59-01:00"),
        ("created_at", "9999-12-31T23:59:59"),
        ("created_at", "2024-02-30T00:00:00Z"),
        ("temporal_scope", "2024-02-30"),
        ("created_at", 1700000000),
    ],
)
def test_import_dates_past_the_calendar_are_refused_and_store_nothing(dev, space, field, value):
    """Holds. Attack: an import line dated past what UTC can hold (year 1 at +01:00), in year 9999, on
    February 30th, or as an epoch number. Without the rule: an OverflowError (500) converting to UTC, or a
    thought dated after the moment it is stored. Rule: 400 IMPORT_INVALID naming the line's field; nothing
    of the batch stored."""
    item = {"content": STATEMENT, field: value}
    if field == "superseded_at":
        item["superseded"] = True
    response = dev.post("/api/v1/thoughts/import", [{"content": "A fine first line."}, item], format="json")
    assert response.status_code == 400, response.content[:400]
    error = response.json()["error"]
    assert error["code"] == "IMPORT_INVALID", error
    assert any(line["line"] == 2 and line["field"] == field for line in error["lines"]), error["lines"]
    assert not Thought.objects.filter(space=space).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["true", "5.5", '"5"', "-1", "-0.5"])
@pytest.mark.parametrize("name", ["test_pass_count", "test_total_count"])
def test_dna_test_counts_of_the_wrong_kind_are_refused(dev, space, name, value):
    """Holds. Attack: an agent writes the review gate's counts as a boolean, a fraction, a string or a
    negative number (``test_pass_count: true`` would compare equal to 1). Without the rule the gate
    ``test_pass_count == test_total_count > 0`` reads them as numbers. Rule: 400 INVALID_DNA, DNA
    unchanged; a whole float (5.0) is stored as the integer 5 (the documented clamp)."""
    make_task(make_project(space, "colony"), slug="t1", status="review", role="qa", dna={"keep": 1})
    response = dev.patch("/api/v1/tasks/t1/dna", f'{{"{name}": {value}}}', content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["error"]["code"] == "INVALID_DNA"
    assert Task.objects.get(slug="t1").dna == {"keep": 1}
    whole = dev.patch("/api/v1/tasks/t1/dna", f'{{"{name}": 5.0}}', content_type="application/json")
    assert whole.status_code == 200, whole.content[:300]
    stored = Task.objects.get(slug="t1").dna[name]
    assert stored == 5 and type(stored) is int


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("limit", "true"),
        ("limit", "5.5"),
        ("limit", "-0"),
        ("limit", str(2**63)),
        ("limit", str(-(2**63) - 1)),
        ("min_relevance", "true"),
        ("min_relevance", "1" + "0" * 400),  # an integer past float's range: float() raises OverflowError
        ("min_relevance", "1.0000001"),
        ("min_relevance", "-1e-300"),
    ],
)
def test_memory_numbers_at_their_edges_are_refused(dev, space, field, value):
    """Holds. Attack: ``POST /api/v1/memory`` with a boolean, a fraction, -0, 2**63 or -2**63-1 as
    ``limit``, or ``min_relevance`` as a boolean, an integer of 400 digits (float() of it raises
    OverflowError), or just outside [0, 1]. Without the rule: a 500, or a nonsense bound applied.
    Rule: 400 VALIDATION_ERROR naming the field; no query logged, nothing stored."""
    body = f'{{"prompt": "{STATEMENT}", "{field}": {value}}}'
    refused(dev.post("/api/v1/memory", body, content_type="application/json"), field)
    assert not QueryLog.objects.exists() and not Thought.objects.filter(space=space).exists()
