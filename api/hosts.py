"""An unknown ``Host`` header gets a short 400 before anything else reads the request.

Django raises ``DisallowedHost`` from ``request.get_host()`` wherever it is first called (a
middleware, a view, a URL); with DEBUG on, its answer is the technical page with the settings. This
middleware, first in the list, checks the host once: the API answers in the error envelope, every
other path with a short plain-text page, DEBUG or not.
"""

from __future__ import annotations

from django.core.exceptions import DisallowedHost
from django.http import HttpResponse, JsonResponse

MESSAGE = "Bad request: this server does not answer for that Host header."


class RejectUnknownHost:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            request.get_host()
        except DisallowedHost:
            if request.path.startswith("/api/"):
                from api.errors import error_body

                return JsonResponse(error_body("BAD_HOST", MESSAGE), status=400)
            return HttpResponse(MESSAGE + "\n", status=400, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
