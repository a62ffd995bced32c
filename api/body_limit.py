"""A ceiling on request bodies, per route, in front of everything the ASGI server serves (Django and ``/mcp``).

:func:`body_limit_for` says how many bytes a body to a path may have:

- a route whose view declares a :class:`LargeBody` (its ``body_limit`` attribute) takes what that names:
  ``POST /api/v1/thoughts/import`` takes ``MAX_REQUEST_BODY_MB``, by default sized from the batch:
  ``IMPORT_BATCH_MAX_ITEMS`` x 64 KB (62.5 MB for 1,000). 64 KB is one exported thought: its two
  384-float vectors as JSON (~16 KB), 10,000 characters of content as UTF-8 (at most 40 KB) and its
  other fields. The route is found as Django will route the request (a trailing slash aside, as the
  404's near-miss hint reads it), so the limit follows the view wherever its URL is.
- every other path, ``/mcp`` included (its tools take the REST calls' payloads, and no tool imports):
  ``MAX_REQUEST_BODY_KB`` (256). The largest of those bodies is a memory call: a 10,000-character
  prompt and ~20,000 characters of other text (correct_fact, corrected_fact, alternatives, context,
  tags, names) is ~30,000 characters, 180 KB when a client writes every character as a ``\\uXXXX``
  escape (Python's ``json.dumps`` does for any non-ASCII text), plus four lists of 100 ids (16 KB); the
  prompt alone written as escaped surrogate pairs (12 bytes a character) is 120 KB. A task's DNA is at
  most 100,000 characters (tasks.services.tasks.DNA_MAX_CHARS).

A body over its limit is refused with 413 ``REQUEST_TOO_LARGE`` in the API's error envelope, naming the
limit and the path, before anything behind this layer runs (authentication included): at once when its
``Content-Length`` says so, before a byte of it is read, and for a chunked body as soon as what arrived
passes the limit (the application stops reading; whatever it was about to answer is replaced by the 413).
The connection is closed after the refusal. The WSGI bridge (``runtime.wsgi_bridge``) reads a body whole
before Django sees the request, so without this any client could make the server hold a body of any size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.urls import Resolver404, resolve

from api.errors import asgi_json_send, error_body


@dataclass(frozen=True)
class LargeBody:
    """A view's larger body limit: ``setting`` (a number of megabytes) and what to send instead."""

    setting: str
    advice: str

    def limit(self) -> int:
        return int(getattr(settings, self.setting) * (1 << 20))


def large_body_of(path: str) -> LargeBody | None:
    """The :class:`LargeBody` of the view ``path`` routes to (``body_limit``); None for any other."""
    for candidate in dict.fromkeys((path, path.rstrip("/"))):
        try:
            match = resolve(candidate)
        except Resolver404:
            continue
        view = getattr(match.func, "cls", None) or getattr(match.func, "view_class", None)
        if getattr(view, "body_limit", None) is not None:
            return view.body_limit
    return None


def body_limit_for(path: str) -> int:
    """The most bytes a request body to ``path`` may have (read from the settings on each call)."""
    large = large_body_of(path)
    return large.limit() if large is not None else int(settings.MAX_REQUEST_BODY_KB * 1024)


def refusal_message(path: str, limit: int) -> str:
    """The 413's message: the limit, the setting that sets it and the path, and what to send instead."""
    where = path if len(path) <= 100 else path[:99] + "…"
    large = large_body_of(path)
    if large is not None:
        return (
            f"The request body is larger than {limit / (1 << 20):g} MB ({large.setting}), the limit for {where}; "
            f"nothing was read past it and nothing was changed. {large.advice}"
        )
    return (
        f"The request body is larger than {limit / 1024:g} KB (MAX_REQUEST_BODY_KB), the limit for {where}; "
        "nothing was read past it and nothing was changed. Send less: every field has its own length limit "
        "(the API's schema at /api/schema/ lists them)."
    )


class BodyTooLarge(Exception):
    """Raised from ``receive`` when the body passes the limit (the application stops reading)."""


class BodyLimit:
    """ASGI middleware: an http request whose body passes ``limit_for(path)`` bytes gets a 413."""

    def __init__(self, app, *, limit_for: Callable[[str], int] = body_limit_for) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = self.limit_for(path)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(send, path, limit)
            return
        state = {"received": 0, "over": False, "app_started": False}

        async def limited_receive():
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    state["over"] = True
                    raise BodyTooLarge(f"request body over {limit} bytes")
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
            await self._refuse(send, path, limit)

    async def _refuse(self, send, path: str, limit: int) -> None:
        body = error_body("REQUEST_TOO_LARGE", refusal_message(path, limit), max_bytes=limit)
        await asgi_json_send(send, 413, body, [(b"connection", b"close")])


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses a malformed length itself
    return None
