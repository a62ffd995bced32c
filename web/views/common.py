"""What every page shares: a logged-in human working in one of their spaces."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from web.spaces import space_for_request


def space_required(view):
    """Login required, and the page works in the human's current space (``request.colony_space``).

    A human who belongs to no space gets a page that says so (403) instead of an empty site.
    """

    @login_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if space_for_request(request) is None:
            return render(request, "web/no_space.html", status=403)
        return view(request, *args, **kwargs)

    return wrapper
