"""bench-compare's timing client: what it sends on its one keep-alive connection, and a failed call stops
the benchmark with the server's answer instead of timing an error page."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from benchmarks.compare import TimingClient


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Colony's server
    connections: set = set()

    def _answer(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _echo(self, body: dict | None) -> None:
        Echo.connections.add(self.client_address)
        url = urlparse(self.path)
        status = 503 if url.path == "/fail" else 200
        self._answer(
            status,
            {
                "method": self.command,
                "path": url.path,
                "query": parse_qs(url.query),
                "auth": self.headers.get("Authorization"),
                "type": self.headers.get("Content-Type"),
                "body": body,
            },
        )

    def do_GET(self):  # noqa: N802 (http.server's names)
        self._echo(None)

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        self._echo(json.loads(self.rfile.read(length)))

    def log_message(self, *args):
        pass


@pytest.fixture
def echo_port():
    Echo.connections = set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_get_and_post_carry_the_token_and_json_on_one_connection(echo_port):
    client = TimingClient(echo_port, "tok-123")
    got = client.get("/api/v1/memory", {"prompt": "why is the cache slow?", "contribute": "false", "limit": 10})
    assert got["method"] == "GET" and got["path"] == "/api/v1/memory"
    assert got["query"] == {"prompt": ["why is the cache slow?"], "contribute": ["false"], "limit": ["10"]}
    assert got["auth"] == "Bearer tok-123"
    posted = client.post("/api/v1/memory", {"prompt": "the cache needed a restart"})
    assert posted["method"] == "POST" and posted["type"] == "application/json"
    assert posted["body"] == {"prompt": "the cache needed a restart"}
    client.close()
    assert len(Echo.connections) == 1  # keep-alive: both calls on the same connection


def test_a_call_that_fails_stops_the_run_with_the_answer(echo_port):
    client = TimingClient(echo_port, "tok")
    with pytest.raises(SystemExit, match=r"GET /fail\?prompt=x answered 503"):
        client.get("/fail", {"prompt": "x"})
