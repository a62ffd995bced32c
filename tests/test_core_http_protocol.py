"""runtime.http_protocol: what uvicorn refuses before Colony sees it comes in the API's error envelope."""

from __future__ import annotations

import json
import socket

import pytest

from runtime.http_protocol import MAX_URL_BYTES

pytestmark = pytest.mark.django_db(transaction=True)


def raw_exchange(url: str, request: bytes) -> tuple[int, dict, dict]:
    """Send raw bytes to the server at ``url``; the status, headers and JSON body of its answer."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, json.loads(body)


def test_a_url_over_64_kb_is_a_414_in_the_envelope(asgi_server, agent_factory):
    dev = agent_factory("dev")
    prompt = "%E8%BF%81" * 8000  # 8,000 characters, 72,000 bytes percent-encoded
    path = f"/api/v1/memory?contribute=false&prompt={prompt}"
    assert len(path) > MAX_URL_BYTES
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {dev.token}\r\n\r\n".encode()
    status, headers, body = raw_exchange(asgi_server.url, request)
    assert (status, headers["content-type"]) == (414, "application/json")
    assert body["error"]["code"] == "URL_TOO_LONG"
    assert body["error"]["message"].startswith(f"The request's URL is {len(path):,} bytes; this server reads URLs")
    assert "POST /api/v1/memory" in body["error"]["message"]


def test_a_request_that_is_not_http_is_a_400_in_the_envelope(asgi_server):
    status, headers, body = raw_exchange(asgi_server.url, b"HELLO THERE\x01\r\n\r\n")
    assert (status, headers["content-type"]) == (400, "application/json")
    assert body["error"]["code"] == "BAD_REQUEST"


def test_a_url_just_under_the_limit_still_reaches_colony(asgi_server, agent_factory):
    dev = agent_factory("dev")
    request = (
        f"GET /api/v1/memory?contribute=false&prompt={'x' * 60000} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {dev.token}\r\nConnection: close\r\n\r\n"
    ).encode()
    status, _, body = raw_exchange(asgi_server.url, request)
    assert status == 400 and body["error"]["code"] == "VALIDATION_ERROR"  # Colony's own: over 10,000 characters
    assert "10000 characters" in body["error"]["message"]


def test_a_browser_gets_the_refusal_as_a_page(asgi_server):
    """The brain explorer's search is a GET form: a search of 8,000 CJK characters is over 64 KB."""
    path = "/brain/?q=" + "%E8%BF%81" * 8000
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/html,application/xhtml+xml\r\n\r\n".encode()
    host, port = asgi_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414 ") and b"content-type: text/html; charset=utf-8" in head
    page = body.decode()
    assert "<h1>Address too long</h1>" in page and f"This address is {len(path):,} bytes long" in page


def test_a_prompt_no_url_can_carry_gets_the_documented_414(asgi_server, space, thought_factory):
    """Schemathesis sent a prompt of 10,001 four-byte characters (120 KB percent-encoded) to GET /memory:
    the answer must be a status and body the schema documents, under every check schemathesis has."""
    import requests

    from tests.schemathesis_support import fuzz_fixture_data, open_schema

    token = fuzz_fixture_data(space, thought_factory)
    schema, checks = open_schema(base_url=asgi_server.url, token=token)
    operation = schema["/api/v1/memory"]["GET"]
    assert "414" in operation.definition.raw["responses"]
    with requests.Session() as session:
        for prompt in ("\U0005771e" * 10_000, "\U0005771e" * 10_001):  # within maxLength, then over it
            case = operation.Case(query={"prompt": prompt, "contribute": "false"})
            response = case.call_and_validate(base_url=asgi_server.url, session=session, checks=checks)
            assert response.status_code == 414
            assert response.json()["error"]["code"] == "URL_TOO_LONG"
