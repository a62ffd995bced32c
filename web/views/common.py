"""What every page shares: a logged-in human working in one of their spaces."""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlparse

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.shortcuts import render

from web.spaces import space_for_request


def is_htmx(request) -> bool:
    return request.headers.get("HX-Request") == "true"


def space_required(view):
    """Login required, and the page works in the human's current space (``request.colony_space``).

    A human who belongs to no space gets a page that says so (403) instead of an empty site. An
    htmx request whose session has ended is sent to the login page as a whole page (``HX-Redirect``)
    instead of having the login form swapped into a board column.
    """

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated and is_htmx(request):
            try:
                page = urlparse(request.headers.get("HX-Current-URL", "")).path or "/"
            except ValueError:  # not a URL ("http://[" is an invalid IPv6 address to urlparse)
                page = "/"
            response = HttpResponse(status=401)
            response["HX-Redirect"] = redirect_to_login(page, settings.LOGIN_URL)["Location"]
            return response
        return _logged_in(request, *args, **kwargs)

    @login_required
    def _logged_in(request, *args, **kwargs):
        if space_for_request(request) is None:
            return render(request, "web/no_space.html", status=403)
        return view(request, *args, **kwargs)

    return wrapper
