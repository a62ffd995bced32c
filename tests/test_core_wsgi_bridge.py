"""runtime.wsgi_bridge: Django's WSGI handler behind the ASGI server (the live-server tests of MCP, hooks
and URL tokens, and tests/integration/test_run_survives.py, go through it end to end)."""

from __future__ import annotations

import asyncio
import gc

from runtime.wsgi_bridge import WsgiBridge, wsgi_environ


def _run(coroutine_function) -> None:
    """asyncio.run in a thread of its own (other tests of the suite may leave a loop running in this one)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coroutine_function()).result()


def _scope(**overrides) -> dict:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/thoughts/é",
        "root_path": "",
        "query_string": b"a=1&b=%C3%A9",
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 51000),
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
            (b"authorization", b"Bearer t"),
            (b"x-many", b"a"),
            (b"x-many", b"b"),
        ],
    }
    return scope | overrides


def test_the_environ_follows_pep_3333():
    environ = wsgi_environ(_scope(), body=None)
    assert environ["PATH_INFO"] == "/api/v1/thoughts/é".encode().decode("latin-1")  # bytes as latin-1
    assert environ["QUERY_STRING"] == "a=1&b=%C3%A9"
    assert environ["CONTENT_TYPE"] == "application/json" and environ["CONTENT_LENGTH"] == "2"
    assert "HTTP_CONTENT_TYPE" not in environ
    assert environ["HTTP_AUTHORIZATION"] == "Bearer t"
    assert environ["HTTP_X_MANY"] == "a,b"  # repeated headers joined, as a WSGI server does
    assert environ["REMOTE_ADDR"] == "127.0.0.1" and environ["SERVER_PORT"] == "8000"


def _serve(
    app,
    *,
    body_parts: list[bytes],
    scope: dict | None = None,
    sent: list | None = None,
    bridge: WsgiBridge | None = None,
) -> list[dict]:
    sent = [] if sent is None else sent

    async def main():
        parts = list(body_parts)

        async def receive():
            chunk = parts.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(parts)}

        async def send(message):
            sent.append(message)

        await (bridge or WsgiBridge(app, threads=2))(scope or _scope(), receive, send)

    _run(main)
    return sent


def test_the_body_arrives_whole_and_a_streamed_response_goes_out_in_parts():
    seen = {}

    def app(environ, start_response):
        seen["body"] = environ["wsgi.input"].read()
        start_response("201 Created", [("Content-Type", "text/plain")])
        return iter([b"one ", b"", b"two"])

    sent = _serve(app, body_parts=[b"{", b"}"])
    assert seen["body"] == b"{}"
    assert sent[0] == {"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"text/plain")]}
    assert [(m["body"], m["more_body"]) for m in sent[1:]] == [(b"one ", True), (b"two", False)]


def test_a_chunked_body_reaches_django_with_its_length():
    """No Content-Length (Transfer-Encoding: chunked): Django reads CONTENT_LENGTH bytes, so it read none."""
    from django.core.handlers.wsgi import WSGIRequest

    seen = {}

    def app(environ, start_response):
        seen["body"] = WSGIRequest(environ).body
        start_response("200 OK", [])
        return [b""]

    chunked = _scope(headers=[(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")])
    _serve(app, body_parts=[b'{"prompt": ', b'"deploys"}'], scope=chunked)
    assert seen["body"] == b'{"prompt": "deploys"}'


def test_a_chunked_request_is_answered_by_colony(asgi_server, agent_factory):
    """End to end: httpx sends an iterator body chunked, as a streaming client does."""
    import httpx

    from quality.models import TurnLog

    dev = agent_factory("dev")
    parts = [b'{"session_id": "s1", "turn_id": "t1", ', b'"user_prompt": "p", "assistant_response": "r"}']
    response = httpx.post(
        f"{asgi_server.url}/api/v1/turns",
        content=iter(parts),
        headers={"Authorization": f"Bearer {dev.token}", "Content-Type": "application/json"},
        timeout=20,
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert response.status_code == 202, response.text
    assert TurnLog.objects.get().turn_id == "t1"


def test_an_empty_response_still_starts_and_ends_and_close_is_called():
    closed = []

    class Result(list):
        def close(self):
            closed.append(True)  # Django's request_finished (connections go back) runs here

    def app(environ, start_response):
        start_response("204 No Content", [])
        return Result()

    sent = _serve(app, body_parts=[b""])
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 204 and sent[1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert closed == [True]


def test_close_runs_once_the_whole_response_is_sent():
    """Work after the response (api.responses.ResponseThenWork: the memory call's reinforcement)
    runs in close(), which must come after the last byte went out, not before."""
    sent: list[dict] = []
    seen_at_close = []

    class Result(list):
        def close(self):
            seen_at_close.append([(m["type"], m.get("more_body")) for m in sent])

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "application/json")])
        return Result([b'{"a":', b"1}"])

    _serve(app, body_parts=[b""], sent=sent)
    assert seen_at_close == [
        [("http.response.start", None), ("http.response.body", True), ("http.response.body", False)]
    ]


def test_a_client_gone_before_the_body_arrived_runs_nothing():
    ran = []

    def app(environ, start_response):
        ran.append(True)

    async def main():
        async def receive():
            return {"type": "http.disconnect"}

        async def send(message):
            raise AssertionError("nothing to send")

        await WsgiBridge(app, threads=1)(_scope(), receive, send)

    _run(main)
    assert ran == []


def test_the_heap_is_collected_and_frozen_once_after_the_configured_requests():
    """A web worker freezes its settled heap (runtime.wsgi_bridge.FREEZE_AFTER) after the response is sent,
    so full collections stop walking it; a bridge made without ``freeze_after`` never does."""
    frozen_at_close = []

    class Result(list):
        def close(self):
            frozen_at_close.append(gc.get_freeze_count())

    def app(environ, start_response):
        start_response("200 OK", [])
        return Result([b"ok"])

    gc.unfreeze()
    try:
        plain = WsgiBridge(app, threads=1)
        for _ in range(3):
            _serve(app, body_parts=[b""], bridge=plain)
        assert gc.get_freeze_count() == 0
        bridge = WsgiBridge(app, threads=1, freeze_after=(2,))
        _serve(app, body_parts=[b""], bridge=bridge)
        assert gc.get_freeze_count() == 0
        _serve(app, body_parts=[b""], bridge=bridge)
        assert frozen_at_close[-1] == 0  # after the response went out and close() ran
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # this process's modules, classes and functions at least
        _serve(app, body_parts=[b""], bridge=bridge)
        assert gc.get_freeze_count() <= frozen  # once: the third request froze nothing more
    finally:
        gc.unfreeze()
