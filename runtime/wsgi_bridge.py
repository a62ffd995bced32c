"""Django's WSGI handler served to the ASGI server, in a fixed pool of threads.

Colony's views are all synchronous. Behind Django's own ASGI handler every request crosses asgiref's
sync/async bridge several times and gets a thread of its own (a new ``ThreadSensitiveContext`` per
request starts a new executor thread). This bridge does what a WSGI server does, inside the ASGI
server that also serves ``/mcp``: it reads the request body (spooled to disk past 1 MiB), runs the
WSGI application in one of ``threads`` long-lived threads, and sends the response back as the
application yields it (a streamed export or a static file is not held in memory). Measured in
``docs/performance.md`` ("Web server and workers").
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

SPOOL_BYTES = 1 << 20
#: After these requests a web worker's heap has settled (lazy imports, the embedding model, Django's
#: URL resolver and caches): it is collected and frozen (``gc.freeze``), so that the cyclic collector's
#: full collections don't walk its long-lived objects, a pause of tens of milliseconds for the request
#: that triggers one (docs/performance.md, "Web server and workers"). Runs after the response is
#: sent. config.asgi passes it; a bridge made without it never freezes.
FREEZE_AFTER = (1, 100)


def wsgi_environ(scope: dict, body) -> dict:
    """The WSGI environ of an ASGI http ``scope`` (PEP 3333: paths and headers as latin-1 strings)."""
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    environ = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode("utf-8").decode("latin-1"),
        "PATH_INFO": scope["path"].encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] if server[1] is not None else 80),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "REMOTE_ADDR": str(client[0]),
        "REMOTE_PORT": str(client[1]),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name == "CONTENT_TYPE" or name == "CONTENT_LENGTH":
            key = name
        else:
            key = f"HTTP_{name}"
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


class WsgiBridge:
    """An ASGI application (http only) running a WSGI ``app`` in ``threads`` threads."""

    def __init__(self, app, *, threads: int, freeze_after: tuple[int, ...] = ()):
        self.app = app
        self.freeze_after = freeze_after
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="wsgi")
        self._served = 0
        self._served_lock = threading.Lock()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"WsgiBridge serves http only, not {scope['type']!r}")
        body = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        more = True
        try:
            while more:
                message = await receive()  # api.body_limit raises here when the body passes its limit
                if message["type"] == "http.disconnect":
                    body.close()
                    return
                body.write(message.get("body", b""))
                more = message.get("more_body", False)
        except BaseException:
            body.close()
            raise
        size = body.tell()
        body.seek(0)
        environ = wsgi_environ(scope, body)
        if size and "CONTENT_LENGTH" not in environ:
            # A chunked body (Transfer-Encoding: chunked: a streamed upload, Node's fetch with a stream, a
            # proxy) has no Content-Length, and Django reads CONTENT_LENGTH bytes of wsgi.input: without
            # it the body would be dropped and the API would answer "prompt: This field is required." It has been
            # read whole above, so its length is known.
            environ["CONTENT_LENGTH"] = str(size)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, self._run, environ, send, loop)
        finally:
            body.close()

    def _run(self, environ: dict, send, loop) -> None:
        """In a pool thread: call the application and hand each part of the response to the loop."""
        started: dict = {}

        def start_response(status, headers, exc_info=None):
            if exc_info and started.get("sent"):
                raise exc_info[1].with_traceback(exc_info[2])
            started["status"] = int(status.split(" ", 1)[0])
            started["headers"] = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
            return lambda data: None  # the write() callable; Django never uses it

        def deliver(message: dict) -> None:
            asyncio.run_coroutine_threadsafe(send(message), loop).result()

        result = self.app(environ, start_response)
        try:
            pending = None  # one chunk held back, so the last one goes out with more_body False
            for chunk in result:
                if not chunk:
                    continue
                if not started.get("sent"):
                    deliver({"type": "http.response.start", "status": started["status"], "headers": started["headers"]})
                    started["sent"] = True
                if pending is not None:
                    deliver({"type": "http.response.body", "body": pending, "more_body": True})
                pending = bytes(chunk)
            if not started.get("sent"):
                deliver({"type": "http.response.start", "status": started["status"], "headers": started["headers"]})
            deliver({"type": "http.response.body", "body": pending or b"", "more_body": False})
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()  # Django sends request_finished here (database connections go back)
            self._settle()

    def _settle(self) -> None:
        """Count a served request; at ``freeze_after``, collect and freeze the heap (see FREEZE_AFTER)."""
        with self._served_lock:
            self._served += 1
            if self._served not in self.freeze_after:
                return
        gc.collect()
        gc.freeze()
