"""One exception hierarchy and one renderer for every API error.

Every error the API returns is ``{"error": {"code": "...", "message": "..."}}`` (validation errors
add ``"fields"``), whether it was raised by a service, by DRF, by Django's URL resolver or by a bug.
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import math
import re

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger("colony.api")


class ApplicationError(Exception):
    """A refusal the caller can act on. Subclasses fix the HTTP status; ``code`` names the case."""

    status_code = 400
    default_code = "BAD_REQUEST"

    def __init__(self, message: str, *, code: str | None = None, extra: dict | None = None):
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.extra = extra or {}


class ValidationFailed(ApplicationError):
    default_code = "VALIDATION_ERROR"


class NotFound(ApplicationError):
    status_code = 404
    default_code = "NOT_FOUND"


class Forbidden(ApplicationError):
    status_code = 403
    default_code = "FORBIDDEN"


class Conflict(ApplicationError):
    status_code = 409
    default_code = "CONFLICT"


class ServiceFailure(ApplicationError):
    status_code = 500
    default_code = "INTERNAL_ERROR"


#: Seconds a client is told to wait (``Retry-After``) while the database is unreachable.
DATABASE_RETRY_AFTER = 5
DATABASE_UNAVAILABLE_MESSAGE = (
    "The database is unavailable right now (restarting or unreachable); nothing was changed by this "
    "request. Retry after a few seconds; GET /api/v1/health says which part is down."
)
#: Every pooled connection of this process stayed busy for DATABASE_CONNECT_TIMEOUT: the database is
#: up but this process has more requests in flight than connections. Distinct from "unavailable".
DATABASE_BUSY_RETRY_AFTER = 1
DATABASE_BUSY_MESSAGE = (
    "Every database connection of this server process is busy; nothing was changed by this request. "
    "Retry in a second (DATABASE_POOL_SIZE sets how many connections a web process keeps)."
)
#: PostgreSQL failed the request's transaction because of concurrent ones (a deadlock's victim, a
#: serialization failure) after the retries its service allows: nothing of it happened, and sent again it
#: will most likely pass. Not an outage: the database is up.
DATABASE_CONFLICT_RETRY_AFTER = 1
DATABASE_CONFLICT_MESSAGE = (
    "This request collided with concurrent changes to the same rows (a database deadlock) and was rolled "
    "back; nothing was changed by it. Send it again in a second (with the same Idempotency-Key, if it had one)."
)
# SQLSTATEs meaning "the server is not there or is going away": connection exceptions (08xxx),
# admin/crash shutdown and "the database system is starting up / shutting down" (57P01-57P03).
_UNAVAILABLE_SQLSTATES = {"57P01", "57P02", "57P03"}


def is_database_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` says the database can't be reached (not a query's own error such as a
    deadlock or a constraint): no connection could be made, or the server closed it. A pool whose
    connections are all busy is not this (:func:`is_database_busy`)."""
    from django.db import utils as db_utils

    if is_database_busy(exc):
        return False
    if not isinstance(exc, (db_utils.OperationalError, db_utils.InterfaceError)):
        return False
    import psycopg

    cause = exc.__cause__
    if isinstance(cause, psycopg.errors.Error):
        state = getattr(cause, "sqlstate", None)
        if state is None:  # connection refused, timed out, closed by the server, no socket
            return isinstance(cause, (psycopg.OperationalError, psycopg.InterfaceError))
        return state.startswith("08") or state in _UNAVAILABLE_SQLSTATES
    # Django's own "connection already closed" (InterfaceError) has no psycopg cause.
    return isinstance(exc, db_utils.InterfaceError)


def is_transaction_conflict(exc: BaseException) -> bool:
    """True when ``exc`` is PostgreSQL failing the transaction because of concurrent ones: a deadlock's
    victim (40P01) or a serialization failure (40001). Nothing of the transaction happened; run again from
    its start (never from inside a caller's transaction, which the failure has spoilt) it most likely passes."""
    import psycopg

    return isinstance(exc.__cause__, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure))


def is_database_busy(exc: BaseException) -> bool:
    """True when ``exc`` is the connection pool's wait running out (psycopg_pool.PoolTimeout)."""
    from django.db import utils as db_utils

    if not isinstance(exc, db_utils.OperationalError):
        return False
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:  # no pool installed: never busy
        return False
    if not (isinstance(exc.__cause__, PoolTimeout) or isinstance(exc, PoolTimeout)):
        return False
    # The pool also times out when it can't open a connection at all (the database is down): busy
    # only when it holds its maximum of connections and none came free.
    from django.db import connection

    pool = getattr(connection, "pool", None)
    if pool is None:
        return False
    stats = pool.get_stats()
    return stats.get("pool_size", 0) >= stats.get("pool_max", pool.max_size)


def database_busy_response(request) -> HttpResponse:
    """503 DATABASE_BUSY with a short Retry-After, in the envelope."""
    response = JsonResponse(error_body("DATABASE_BUSY", DATABASE_BUSY_MESSAGE), status=503)
    response["Retry-After"] = str(DATABASE_BUSY_RETRY_AFTER)
    return response


def database_conflict_response(request) -> HttpResponse:
    """503 DATABASE_CONFLICT with a short Retry-After: the envelope for the API, a short page for humans."""
    return _unavailable(
        request,
        code="DATABASE_CONFLICT",
        message=DATABASE_CONFLICT_MESSAGE,
        retry_after=DATABASE_CONFLICT_RETRY_AFTER,
        title="try again",
        page="<h1>Someone else was changing the same thing</h1>"
        "<p>Nothing was changed. Reload or send the form again in a second.</p>",
    )


def database_outage_response(request, exc: BaseException) -> HttpResponse | None:
    """The 503 for a database that is busy (pool exhausted) or unreachable, or that failed the request's
    transaction because of concurrent ones (deadlock, serialization failure), logged; None for any other
    error. The one place that decides it: the middleware, DRF's exception handler and the 500 handler
    all call it."""
    where = f"{request.method} {request.path}" if request is not None else "an API view"
    if is_transaction_conflict(exc):
        logger.warning("transaction conflict on %s: %s", where, exc)
        return database_conflict_response(request)
    if is_database_busy(exc):
        logger.warning("database pool exhausted on %s: %s", where, exc)
        return database_busy_response(request)
    if is_database_unavailable(exc):
        logger.warning("database unavailable on %s: %s", where, exc)
        return database_unavailable_response(request)
    return None


def database_unavailable_response(request) -> HttpResponse:
    """503 with Retry-After: the envelope for the API, a short readable page for humans."""
    return _unavailable(
        request,
        code="DATABASE_UNAVAILABLE",
        message=DATABASE_UNAVAILABLE_MESSAGE,
        retry_after=DATABASE_RETRY_AFTER,
        title="database unavailable",
        page="<h1>The database is unavailable right now</h1>"
        "<p>Colony can't reach its PostgreSQL server (it is restarting or down). Nothing was changed. "
        f"This page will work again once the database is back: reload in {DATABASE_RETRY_AFTER} seconds.</p>",
    )


def _unavailable(request, *, code: str, message: str, retry_after: int, title: str, page: str) -> HttpResponse:
    """A 503 with Retry-After: the envelope for the API (and JSON clients), ``page`` for a browser."""
    if request is None or request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
        response = JsonResponse(error_body(code, message), status=503)
    else:
        response = HttpResponse(
            f"<!doctype html><html><head><title>Colony: {title}</title></head><body>{page}</body></html>",
            status=503,
            content_type="text/html; charset=utf-8",
        )
    response["Retry-After"] = str(retry_after)
    return response


class DatabaseUnavailableMiddleware:
    """Turns "the database can't be reached" raised by a view into 503 + Retry-After at once."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        return database_outage_response(request, exception)


#: Whatever a request held, an error answer stays a few KB (bounded work, SPEC 6). error_body() keeps
#: the message to ERROR_MESSAGE_MAX characters, any other text to ERROR_TEXT_MAX and a name (an object's
#: key) to ERROR_NAME_MAX, and the first ERROR_ITEMS_MAX entries of any list or object, fewer where that
#: is still more than ERROR_MAX_BYTES of JSON in all; how many it left out of each of the error's own
#: lists and objects goes in ``omitted``.
ERROR_MESSAGE_MAX = 1000
ERROR_TEXT_MAX = 500
ERROR_NAME_MAX = 100
ERROR_ITEMS_MAX = 10
ERROR_MAX_BYTES = 8192


def clip(text, limit: int = ERROR_TEXT_MAX) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bounded(value, items: int):
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, dict):
        return {
            clip(key, ERROR_NAME_MAX): _bounded(item, items) for key, item in itertools.islice(value.items(), items)
        }
    if isinstance(value, (list, tuple)):
        return [_bounded(item, items) for item in value[:items]]
    return value


def error_body(code: str, message: str, **extra) -> dict:
    """The envelope ``{"error": {"code", "message", **extra}}``, bounded (ERROR_MAX_BYTES and the rest)."""
    message = clip(message, ERROR_MESSAGE_MAX)
    for items in (ERROR_ITEMS_MAX, 5, 2, 1, 0):
        error = {"code": code, "message": message} | {key: _bounded(value, items) for key, value in extra.items()}
        omitted = {
            key: len(value) - items
            for key, value in extra.items()
            if isinstance(value, (list, tuple, dict)) and len(value) > items
        }
        if omitted:
            error["omitted"] = omitted
        if len(json.dumps(error, ensure_ascii=False, default=str).encode()) <= ERROR_MAX_BYTES:
            break
    return {"error": error}


def throttled_answer(wait: float | None) -> tuple[int, dict]:
    """A request over its token's rate: the whole seconds to wait (``Retry-After``, at least 1) and the
    429 THROTTLED envelope. REST's exception handler and /mcp's door answer with it."""
    seconds = max(1, math.ceil(wait or 1))
    message = f"Too many requests from this token; retry in {seconds} s (API_THROTTLE_RATE)."
    return seconds, error_body("THROTTLED", message, retry_after=seconds)


async def asgi_json_send(send, status: int, body: dict, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer an ASGI http request with ``body`` as JSON: the envelope of the ASGI layers in front of
    Django (``api.body_limit``, ``colony_mcp.asgi``)."""
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
            + (headers or []),
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _flatten(detail, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as {"field.sub": ["message", ...]}."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return {prefix or "non_field_errors": [str(item) for item in detail]}
        out = {}
        for index, item in enumerate(detail):
            out.update(_flatten(item, f"{prefix}[{index}]" if prefix else str(index)))
        return out
    return {prefix or "non_field_errors": [str(detail)]}


def validation_message(fields: dict[str, list[str]]) -> str:
    """ "Invalid request. name: message; ..." for the first ERROR_ITEMS_MAX of ``fields`` (errors that
    belong to no one field without a name), saying first how many more there are."""
    shown = itertools.islice(fields.items(), ERROR_ITEMS_MAX)
    parts = [
        " ".join(map(str, msgs[:ERROR_ITEMS_MAX]))
        if name == "non_field_errors"
        else f"{clip(name, ERROR_NAME_MAX)}: {' '.join(map(str, msgs[:ERROR_ITEMS_MAX]))}"
        for name, msgs in shown
    ]
    more = len(fields) - ERROR_ITEMS_MAX
    head = f"Invalid request ({len(fields)} fields: the first {ERROR_ITEMS_MAX} below and {more} more). "
    return (head if more > 0 else "Invalid request. ") + "; ".join(parts)


_DRF_CODES = [
    (drf.ParseError, "PARSE_ERROR"),
    (drf.NotAuthenticated, "UNAUTHENTICATED"),
    (drf.AuthenticationFailed, "UNAUTHENTICATED"),
    (drf.PermissionDenied, "FORBIDDEN"),
    (drf.NotFound, "NOT_FOUND"),
    (drf.MethodNotAllowed, "METHOD_NOT_ALLOWED"),
    (drf.NotAcceptable, "NOT_ACCEPTABLE"),
    (drf.UnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"),
    (drf.Throttled, "THROTTLED"),
]


def meant(value: str, names, *, synonyms: dict[str, str] | None = None, cutoff: float = 0.75) -> str | None:
    """The name among ``names`` an unknown ``value`` most likely meant, for an error's "Did you mean ...?":
    the same letters in another case, with spaces around or other separators ("memory.search",
    "memory-search"), a word ``synonyms`` maps to a name, the name behind a prefix ("colony_memory_search"),
    the same words in another order ("search_memory"), a misspelling (difflib, ``cutoff``), or a name of
    which ``value`` is one ``_``-separated word ("learning" -> "operational_learning"); None when nothing is
    close. Never taken in the value's place."""
    by_lower = {str(name).lower(): str(name) for name in names}
    folded = str(value).strip().lower()
    if not folded:
        return None
    if folded in by_lower:
        return by_lower[folded]
    joined = _SEPARATORS.sub("_", folded).strip("_")
    for form in (folded, joined):
        if form in by_lower:
            return by_lower[form]
        if synonyms and form in synonyms:
            return synonyms[form]
    for lower, name in by_lower.items():
        if "_" in lower and (joined.endswith("_" + lower) or sorted(joined.split("_")) == sorted(lower.split("_"))):
            return name
    close = difflib.get_close_matches(folded, list(by_lower), n=1, cutoff=cutoff)
    if close:
        return by_lower[close[0]]
    return next((name for lower, name in by_lower.items() if folded in lower.split("_")), None)


_SEPARATORS = re.compile(r"[\s.\-/:_]+")


def did_you_mean(value: str, names, **how) -> str:
    """ " Did you mean 'x'?" for :func:`meant`'s answer (``how``: its synonyms and cutoff), or ""."""
    likely = meant(value, names, **how)
    return f" Did you mean {likely!r}?" if likely else ""


def name_hint(name: str, known, hints: dict[str, str] | None = None, *, cutoff: float = 0.8) -> str:
    """What to add to "unknown field / argument ``name``": " <hint>" from ``hints`` (the names callers bring
    from another API or tool for one of ``known``), else " Did you mean 'x'?", else ""."""
    if hints and str(name) in hints:
        return " " + hints[str(name)]
    return did_you_mean(str(name), sorted(known), cutoff=cutoff)


NO_CREDENTIALS = (
    "No credentials: send the agent's token in the header 'Authorization: Bearer <token>' (an operator creates "
    "one with manage.py agent create NAME --role ROLE)."
)


def _media_types_hint(view) -> str:
    """What to send instead of an unsupported body: the view's parsers, and curl's usual slip (``-d``
    without a header sends application/x-www-form-urlencoded)."""
    types = [parser.media_type for parser in view.get_parsers()] if view is not None else ["application/json"]
    return (
        f"Send the body as {' or '.join(types)} and say so in the Content-Type header "
        f"(curl: -H 'Content-Type: {types[0]}')."
    )


def api_exception_handler(exc, context) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception becomes the error envelope."""
    if isinstance(exc, ApplicationError):
        if exc.status_code >= 500:
            logger.error("%s: %s", exc.code, exc.message, exc_info=exc)
        return Response(error_body(exc.code, exc.message, **exc.extra), status=exc.status_code)
    outage = database_outage_response(context.get("request"), exc)
    if outage is not None:
        return outage
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if isinstance(exc, drf.ValidationError):
        fields = _flatten(exc.detail)
        return Response(error_body("VALIDATION_ERROR", validation_message(fields), fields=fields), status=400)
    if isinstance(exc, drf.APIException):
        code = next((code for cls, code in _DRF_CODES if isinstance(exc, cls)), "API_ERROR")
        headers = {}
        if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed)):
            headers["WWW-Authenticate"] = 'Bearer realm="colony"'
            status = 401
        elif isinstance(exc, drf.Throttled):
            wait, body = throttled_answer(exc.wait)
            return Response(body, status=429, headers={**headers, "Retry-After": str(wait)})
        else:
            status = exc.status_code
        message = str(exc.detail) if not isinstance(exc.detail, (list, dict)) else str(exc.detail)
        if isinstance(exc, drf.UnsupportedMediaType):
            message += " " + _media_types_hint(context.get("view") if context else None)
        elif isinstance(exc, drf.MethodNotAllowed) and context:
            message = _method_message(context.get("request"), context.get("view"), message)
        elif isinstance(exc, drf.NotAuthenticated):
            # No Authorization header at all (a token sent as X-API-Key, or none): say what to send.
            message = NO_CREDENTIALS
        return Response(error_body(code, message), status=status, headers=headers)
    logger.exception("Unexpected error in %s", context.get("view").__class__.__name__ if context else "?")
    return Response(
        error_body("INTERNAL_ERROR", "Something went wrong on the server; it has been logged. Try again."),
        status=500,
    )


def _method_message(request, view, message: str) -> str:
    """A 405's message: the methods the path takes and, where the view names one, what the caller most
    likely meant to do (agents writing REST calls by hand POST /thoughts to store a thought, PUT a task
    to change its status). ``method_hints`` on a view: method -> text, in which ``{path}`` is the
    request's path and ``{parent}`` that path without its last segment."""
    if request is None or view is None:
        return message
    allowed = ", ".join(method for method in view.allowed_methods if method != "OPTIONS")
    message = f'Method "{request.method}" not allowed on {request.path}; it takes {allowed}.'
    hint = getattr(view, "method_hints", {}).get(request.method)
    if not hint:
        return message
    path = request.path.rstrip("/")
    return f"{message} {hint.format(path=path, parent=path.rsplit('/', 1)[0])}"


def json_404(request, exception=None):
    message = f"No endpoint at {request.path}."
    meant = _meant(request.path)
    if meant is not None:  # what hand-written REST calls and client configurations most often get wrong
        message += f" Did you mean {meant[0]}? {meant[1]}"
    return JsonResponse(error_body("NOT_FOUND", f"{message} The endpoints are listed at /api/docs/."), status=404)


#: (how a near-miss path becomes the endpoint it was meant for, why): a trailing slash, which Django's habits
#: suggest; the API's prefix twice, from a base URL (COLONY_URL) that already ends in /api/v1; no version.
_NEAR_MISSES = (
    (lambda path: path.rstrip("/") if path.endswith("/") else None, "Colony's API paths end without a slash."),
    (
        lambda path: "/api/v1/" + path.removeprefix("/api/v1/api/v1/") if path.startswith("/api/v1/api/v1/") else None,
        "The base URL (COLONY_URL) is the server's root, without /api/v1.",
    ),
    (
        lambda path: "/api/v1/" + path.removeprefix("/api/") if not path.startswith("/api/v") else None,
        "Colony's API paths start with /api/v1/.",
    ),
)


def _meant(path: str) -> tuple[str, str] | None:
    """The endpoint a near-miss ``path`` under /api/ was meant for, and why it missed; None otherwise."""
    if not path.startswith("/api/"):
        return None
    for fix, why in _NEAR_MISSES:
        other = fix(path)
        if other is None or other == path:
            continue
        other = other.rstrip("/") or other
        try:
            match = resolve(other)
        except Resolver404:
            continue
        if match.func is not api_not_found:
            return other, why
    return None


@csrf_exempt
def api_not_found(request, *args, **kwargs):
    """The last route under /api/: an unknown path answers the JSON 404 whatever the method."""
    return json_404(request)


def envelope_response(response: Response) -> JsonResponse:
    """An error ``Response`` rendered as JSON whatever renderer its view uses (HTML or YAML views)."""
    json_response = JsonResponse(response.data, status=response.status_code)
    for header, value in response.headers.items():
        if header.lower() != "content-type":
            json_response[header] = value
    return json_response


def json_500(request):
    return JsonResponse(
        error_body("INTERNAL_ERROR", "Something went wrong on the server; it has been logged. Try again."),
        status=500,
    )
