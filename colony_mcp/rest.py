"""Run one REST operation in-process for an MCP tool call.

A tool is a named REST call: the view, its serializers, the service or selector behind it and the
error envelope are exactly REST's, with no HTTP hop. The caller's ``Authorization`` header is passed
through, so DRF authenticates the token again and ``request.user`` is the same agent as on REST.

A tool call goes through Django's request cycle with ``settings.MIDDLEWARE`` (:class:`ToolCallHandler`):
the host check, the input guard, the throttle (DRF's, on the view), the database-outage 503, the metrics
and every other protection REST requests get, by the same code. The body limit holds before that, on
``/mcp`` itself (``config.asgi``).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlencode

from django.conf import settings
from django.core.handlers.base import BaseHandler
from django.db import close_old_connections
from django.test import RequestFactory
from django.urls import Resolver404, resolve

from api.errors import error_body

logger = logging.getLogger("colony.mcp")

API_PREFIX = "/api/v1/"
_factory = RequestFactory()


@dataclass
class RestResult:
    status: int
    body: Any
    #: With ``rest_call(..., defer_close=True)``: the response's ``close()`` (the work a view runs
    #: after its answer, such as the memory call's reinforcement), for the caller to run once the
    #: result is on its way. None when there is nothing left to run.
    finish: Callable[[], None] | None = None

    @property
    def ok(self) -> bool:
        """A 2xx: a redirect (SECURE_SSL_REDIRECT on a plain-http request) did nothing, as an error does."""
        return 200 <= self.status < 300


def _query(params: dict[str, Any] | None) -> str:
    if not params:
        return ""
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            pairs.append((key, "true" if value else "false"))
        elif isinstance(value, (list, tuple)):
            pairs.extend((key, str(item)) for item in value)
        else:
            pairs.append((key, str(value)))
    return "?" + urlencode(pairs) if pairs else ""


def segment(value: str) -> str:
    """A tool argument as one path segment of a REST path: "fix-ci/transitions" names a task, not an endpoint."""
    return quote(str(value), safe="")


class ToolCallHandler(BaseHandler):
    """Django's request cycle (``settings.MIDDLEWARE`` around the view, process_view and process_exception
    included) for a request whose view :func:`rest_call` has already resolved: a tool's path arguments are
    decoded once, by ``rest_call``, so an encoded "/" can't name another endpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.load_middleware()

    def resolve_request(self, request):
        request.resolver_match = request.colony_tool_match
        return request.colony_tool_match


def tool_call_handler() -> ToolCallHandler:
    """The handler for the middleware configured now (one per configuration, as a server builds one)."""
    return _handler_for(tuple(settings.MIDDLEWARE))


@functools.cache
def _handler_for(middleware: tuple[str, ...]) -> ToolCallHandler:
    return ToolCallHandler()


def rest_call(
    *,
    method: str,
    path: str,
    authorization: str,
    host: str = "127.0.0.1",
    secure: bool = False,
    query: dict[str, Any] | None = None,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    defer_close: bool = False,
) -> RestResult:
    """Call the view behind ``method API_PREFIX+path`` as REST would and return (status, JSON body).

    Synchronous (the views use the ORM): ``colony_mcp.server`` runs it in the worker's request threads.
    Database connections are handled as Django's request cycle handles them (``close_old_connections``
    before and after). The response is closed before this returns (a WSGI server closes it once the
    answer is out), unless ``defer_close``: then ``RestResult.finish`` closes it, so that the tool's
    answer is not kept waiting for the work after it, as a REST client is not. ``headers``: more request
    headers by their HTTP names (``{"Idempotency-Key": "..."}``).
    """
    full_path = API_PREFIX + path
    close_old_connections()
    try:
        try:
            match = resolve(full_path)
        except Resolver404:
            return RestResult(404, error_body("NOT_FOUND", f"No endpoint at {full_path}."))
        meta = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in (headers or {}).items()}
        meta.update({"HTTP_AUTHORIZATION": authorization, "HTTP_HOST": host})
        url = full_path + _query(query)
        if body is None:
            request = _factory.generic(method, url, secure=secure, **meta)
        else:
            request = _factory.generic(
                method, url, json.dumps(body), content_type="application/json", secure=secure, **meta
            )
        # A tool's path arguments arrive quoted (``segment``), so that a "/" in one can't reach another
        # endpoint; the view gets them as REST's views get a decoded path.
        match.kwargs = {key: unquote(value) if isinstance(value, str) else value for key, value in match.kwargs.items()}
        request.colony_tool_match = match
        request.colony_via_mcp = True  # core.metrics counts it as an MCP call
        response = tool_call_handler().get_response(request)  # renders a template response itself
        try:
            payload = json.loads(response.content or b"null")
        except ValueError:
            payload = error_body("INTERNAL_ERROR", "The server answered with something that is not JSON.")
        if defer_close:
            return RestResult(response.status_code, payload, finish=functools.partial(_close, response))
        _close(response)
        return RestResult(response.status_code, payload)
    finally:
        close_old_connections()


def _close(response) -> None:
    """What a WSGI server does once the answer is out: the work after the response runs (its failures are
    logged by ``api.responses``), then ``request_finished`` gives the database connection back."""
    try:
        response.close()
    except Exception:  # noqa: BLE001 - the caller has its answer; nothing to hand the error to
        logger.exception("Closing the response of an MCP tool call failed")
    finally:
        close_old_connections()
