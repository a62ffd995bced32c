"""A ceiling on request bodies, in front of everything the ASGI server serves (Django and ``/mcp``).

Nothing bounded a body before: the WSGI bridge (``core.wsgi_bridge``) read every body whole,
spooling it to a temporary file past 1 MiB, before Django looked at the request, so any client,
without a token, could fill the disk with one long upload; the MCP endpoint read bodies into memory.
Now a body longer than ``MAX_REQUEST_BODY_MB`` (64 by default: an import batch of 1,000 thoughts
with both vectors is ~16 MB) is refused with 413 ``REQUEST_TOO_LARGE`` in the API's error envelope:
at once when its ``Content-Length`` says so, before a byte of it is read, and for a chunked body as
soon as what arrived passes the limit (the application stops reading; whatever it was about to
answer is replaced by the 413). The connection is closed after the refusal.
"""

from __future__ import annotations

from core.errors import asgi_json_send, error_body

MESSAGE = (
    "The request body is larger than {limit} MB (MAX_REQUEST_BODY_MB); nothing was read past it and "
    "nothing was changed. Send less: an import takes at most IMPORT_BATCH_MAX_ITEMS thoughts a request, "
    "manage.py brain import takes a file of any size."
)


class BodyTooLarge(Exception):
    """Raised from ``receive`` when the body passes the limit (the application stops reading)."""


class BodyLimit:
    """ASGI middleware: http requests whose body passes ``max_bytes`` get a 413."""

    def __init__(self, app, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        state = {"received": 0, "over": False, "app_started": False, "refused": False}

        async def limited_receive():
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.max_bytes:
                    state["over"] = True
                    raise BodyTooLarge(f"request body over {self.max_bytes} bytes")
            return message

        async def guarded_send(message):
            if state["over"]:
                return  # the application's answer to a body it could not read: replaced by the 413
            if message["type"] == "http.response.start":
                state["app_started"] = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except BodyTooLarge:
            pass
        except Exception:
            if not state["over"]:
                raise  # the application's own error, not the limit's
        if state["over"] and not state["app_started"]:
            await self._refuse(send)

    async def _refuse(self, send) -> None:
        message = MESSAGE.format(limit=f"{self.max_bytes / (1 << 20):g}")
        await asgi_json_send(send, 413, error_body("REQUEST_TOO_LARGE", message), [(b"connection", b"close")])


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses a malformed length itself
    return None
