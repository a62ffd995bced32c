"""Input guard: a NUL character in the path or the query string is a 400, before any view runs.

Path and query values reach selectors as text (task slugs, ids, filters) and PostgreSQL refuses U+0000,
so they are refused here once instead of failing in the database (a 500): under /api/ with the error
envelope, on the humans' pages (``/tasks/<ref>/`` and its forms took the ref as typed) and the admin
with the site's 400 page (``templates/400.html``).
"""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.http import JsonResponse

from core.errors import error_body
from core.parsers import NUL_MESSAGE


def api_input_refusal(request) -> JsonResponse | None:
    """The 400 for an API request with a NUL in its path or query string; None when there is none.
    Also applied to MCP tool calls, which run the API's views without this middleware (``colony_mcp.rest``)."""
    fields: dict[str, list[str]] = {}
    if "\x00" in request.path:
        fields["path"] = [NUL_MESSAGE]
    for key, values in request.GET.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            fields[key.replace("\x00", "\\u0000")] = [NUL_MESSAGE]
    if not fields:
        return None
    summary = "; ".join(f"{name}: {NUL_MESSAGE}" for name in fields)
    return JsonResponse(error_body("VALIDATION_ERROR", f"Invalid request. {summary}", fields=fields), status=400)


class ApiInputGuardMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = api_input_refusal(request)
        if refusal is not None:
            if request.path.startswith("/api/"):
                return refusal
            # A page: Django's handler400 answers with templates/400.html (the message goes to the log).
            raise BadRequest("A NUL character (\\u0000) in the path or the query string.")
        return self.get_response(request)
