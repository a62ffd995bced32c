"""MCP tool calls get REST's protections by the same path: the body limit before anything reads the
body, the throttle, the database-outage 503 (as the tool's error, with REST's code), the metrics and
the log masking. Driven by the official MCP client against the production ASGI application."""

from __future__ import annotations

import http.client
import json
import logging

import psycopg
import pytest
from django.db import utils as db_utils

from tests.test_core_metrics import sample, scrape
from tests.test_mcp_server import Tools, in_session

pytestmark = pytest.mark.django_db(transaction=True)


def call(url: str, token: str, name: str, **arguments) -> tuple[bool, dict]:
    async def body(session):
        return await Tools(session).raw(name, **arguments)

    return in_session(url, token, body)


def test_an_oversized_tool_call_is_refused_before_its_body_is_read(asgi_server, agent_factory, settings):
    dev = agent_factory("dev")
    host, port = asgi_server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.putrequest("POST", "/mcp")
    connection.putheader("Authorization", f"Bearer {dev.token}")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(settings.MAX_REQUEST_BODY_KB * 1024 + 1))
    connection.endheaders()  # not one byte of the body is sent
    response = connection.getresponse()
    assert response.status == 413
    assert json.loads(response.read())["error"]["code"] == "REQUEST_TOO_LARGE"


def test_a_tool_call_with_an_oversized_argument_fails_and_stores_nothing(asgi_server, agent_factory):
    from brain.models import Thought

    dev = agent_factory("dev")
    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 413 as its own transport error
        call(asgi_server.url, dev.token, "memory_contribute", content="x" * 400_000)
    assert not Thought.objects.exists()


def test_the_throttle_counts_tool_calls(asgi_server, agent_factory, settings, fake_embedder):
    # Every message counts: the handshake (initialize, notifications/initialized), the first search, and the
    # tools/list the client sends to check that search's result; the second search is over 4/min.
    settings.API_THROTTLE_RATE = "4/min"
    dev = agent_factory("dev")

    async def body(session):
        tools = Tools(session)
        return [await tools.raw("memory_search", query="what do we know about deploys?") for _ in range(5)]

    results = in_session(asgi_server.url, dev.token, body)
    refused = [answer for is_error, answer in results if is_error]
    assert refused, results
    assert refused[-1]["status"] == 429 and refused[-1]["error"]["code"] == "THROTTLED"


def test_a_database_outage_is_the_tools_503_with_rests_code(asgi_server, agent_factory, monkeypatch):
    dev = agent_factory("dev")

    def down(*args, **kwargs):
        exc = db_utils.OperationalError("connection failed: Connection refused")
        exc.__cause__ = psycopg.OperationalError("connection failed: Connection refused")
        raise exc

    monkeypatch.setattr("brain.apis.memory.memory_run", down)
    is_error, answer = call(asgi_server.url, dev.token, "memory_search", query="what do we know about deploys?")
    assert is_error and answer["status"] == 503
    assert answer["error"]["code"] == "DATABASE_UNAVAILABLE"


def test_tool_calls_are_counted_as_mcp_calls_not_as_http_requests(asgi_server, agent_factory, fake_embedder):
    dev = agent_factory("dev")
    labels = {"method": "GET", "endpoint": "api/v1/memory", "status": "200"}
    before_mcp = sample(scrape(), "colony_mcp_call_duration_seconds_count", **labels) or 0
    before_http = sample(scrape(), "colony_http_request_duration_seconds_count", **labels) or 0
    is_error, _ = call(asgi_server.url, dev.token, "memory_search", query="what do we know about deploys?")
    assert not is_error
    assert sample(scrape(), "colony_mcp_call_duration_seconds_count", **labels) == before_mcp + 1
    assert (sample(scrape(), "colony_http_request_duration_seconds_count", **labels) or 0) == before_http


def test_a_token_sent_to_mcp_in_the_url_is_masked_in_the_access_log(asgi_server, caplog):
    import httpx

    caplog.set_level(logging.INFO, logger="uvicorn.access")
    secret = "colr_" + "q" * 40
    response = httpx.post(f"{asgi_server.url}/mcp?%74oken={secret}", json={})
    assert response.status_code == 403
    text = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    assert "/mcp?" in text and secret not in text
