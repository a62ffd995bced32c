"""Input guard: what no view can read is refused before any view runs.

A NUL character in the path or the query string is a 400, and so is a query string of more parameters
than Django reads (``DATA_UPLOAD_MAX_NUMBER_FIELDS``).

Path and query values reach selectors as text (task slugs, ids, filters) and PostgreSQL refuses U+0000,
so they are refused here once instead of failing in the database (a 500): under /api/ with the error
envelope, on the humans' pages (``/tasks/<ref>/`` and its forms took the ref as typed) and the admin
with the site's 400 page (``templates/400.html``).

An API body sent compressed (``Content-Encoding: gzip``; some HTTP clients and proxies do) is a 415
that says so: the parsers read the compressed bytes as text and answered "'utf-8' codec can't decode
byte 0x8b", which does not tell the caller what to change. RFC 7694: 415 with ``Accept-Encoding``.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import BadRequest, TooManyFieldsSent
from django.http import JsonResponse

from api.errors import error_body, validation_message
from api.parsers import NUL_MESSAGE, printable


def input_problem(request) -> tuple[str, dict[str, list[str]]] | None:
    """(message, fields) for a request with a NUL in its path or query string, or more query parameters
    than Django reads (no fields then); None when there is none."""
    fields: dict[str, list[str]] = {}
    if "\x00" in request.path:
        fields["path"] = [NUL_MESSAGE]
    try:
        query = request.GET.lists()
    except TooManyFieldsSent:
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return f"More than {limit} query parameters (DATA_UPLOAD_MAX_NUMBER_FIELDS); send fewer.", {}
    for key, values in query:
        if "\x00" in key or any("\x00" in value for value in values):
            fields[key.replace("\x00", "\\u0000")] = [NUL_MESSAGE]
    return (validation_message(fields), fields) if fields else None


def api_input_refusal(request) -> JsonResponse | None:
    """The 400 in the API's envelope for :func:`input_problem`; None when there is none."""
    problem = input_problem(request)
    if problem is None:
        return None
    message, fields = problem
    extra = {"fields": fields} if fields else {}
    return JsonResponse(error_body("VALIDATION_ERROR", message, **extra), status=400)


def encoded_body_refusal(request) -> JsonResponse | None:
    """The 415 for an API request whose body is content-coded (gzip, deflate, br...); None otherwise."""
    coding = request.META.get("HTTP_CONTENT_ENCODING", "").strip()
    if not coding or coding.lower() == "identity" or request.META.get("CONTENT_LENGTH") in (None, "", "0"):
        return None
    message = (
        f"The body was sent with Content-Encoding: {printable(coding[:100])}; Colony reads request bodies "
        "uncompressed. Send the same body without compressing it and without that header."
    )
    response = JsonResponse(error_body("UNSUPPORTED_MEDIA_TYPE", message), status=415)
    response["Accept-Encoding"] = "identity"
    return response


class ApiInputGuardMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            refusal = api_input_refusal(request)
            if refusal is None:
                refusal = encoded_body_refusal(request)
            return self.get_response(request) if refusal is None else refusal
        problem = input_problem(request)
        if problem is not None:
            # A page: Django's handler400 answers with templates/400.html (the message goes to the log).
            raise BadRequest(problem[0])
        return self.get_response(request)
