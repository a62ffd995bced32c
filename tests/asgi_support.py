"""A real ASGI server (uvicorn) serving ``config.asgi:application`` in a thread, on a free port.

Tests that need Colony as agents reach it (MCP at /mcp, REST, hooks, curl) use it with the
transactional database, like pytest-django's ``live_server`` but through the production ASGI
application, lifespan included.
"""

from __future__ import annotations

import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AsgiServer:
    def __init__(self, *, port: int | None = None, lifespan: str = "on"):
        import uvicorn

        from config.asgi import django_application, make_application
        from core.serve import HTTP_PROTOCOL

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
