"""A real ASGI server (uvicorn) serving ``config.asgi:application`` in a thread, on a free port.

Tests that need Colony as agents reach it (MCP at /mcp, REST, hooks, curl) use it with the
transactional database, like pytest-django's ``live_server`` but through the production ASGI
application, lifespan included.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def recording_proxy():
    """A stand-in HTTP proxy on 127.0.0.1: yields its URL and the request lines it got; answers 502."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.requestline)
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def proxy_env(proxy_url: str) -> dict:
    """What an agent sandbox or a company machine sets: every http(s) URL through the proxy, no exceptions."""
    return {"http_proxy": proxy_url, "HTTP_PROXY": proxy_url, "https_proxy": proxy_url, "no_proxy": "", "NO_PROXY": ""}


class AsgiServer:
    def __init__(self, *, port: int | None = None, lifespan: str = "on"):
        import uvicorn

        from config.asgi import django_application, make_application
        from runtime.serve import HTTP_PROTOCOL

        # A fresh application per server: the MCP session manager runs once per instance.
        application = make_application(django_application)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            application,
            host="127.0.0.1",
            port=self.port,
            lifespan=lifespan,
            log_config=None,
            access_log=True,
            http=HTTP_PROTOCOL,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> AsgiServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
