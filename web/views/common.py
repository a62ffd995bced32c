"""What every page shares: a logged-in human working in one of their spaces."""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlparse

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from web.spaces import space_for_request

#: The hidden field every form of a member page carries (templates/web/_page_space.html): the space the
#: page was shown in, so a form sent after the session switched space (another tab) acts in neither.
PAGE_SPACE_FIELD = "page_space"


def is_htmx(request) -> bool:
    return request.headers.get("HX-Request") == "true"


def space_required(view):
    """Login required, and the page works in the human's current space (``request.colony_space``).

    A human who belongs to no space gets a page that says so (403) instead of an empty site. An
    htmx request whose session has ended is sent to the login page as a whole page (``HX-Redirect``)
    instead of having the login form swapped into a board column. A post from a page of another space
    (:data:`PAGE_SPACE_FIELD`) changes nothing and says why. Member pages show the brain and task DNA:
    the browser doesn't keep them (``never_cache``), so Back after logging out shows none of it.
    """

    @wraps(view)
    @never_cache
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
        space = space_for_request(request)
        if space is None:
            return render(request, "web/no_space.html", status=403)
        shown = request.POST.get(PAGE_SPACE_FIELD) if request.method == "POST" else None
        if shown is not None and shown != space.slug:
            messages.error(
                request,
                f"Nothing was changed: that form was on a page of the space {shown[:100]!r}, and this session has "
                f"since switched to {space.slug!r} (in another tab?). Switch back to it and send the form again.",
            )
            if is_htmx(request):
                return render(request, "web/_messages_oob.html")
            return redirect("web:home")
        return view(request, *args, **kwargs)

    return wrapper


class LoginView(auth_views.LoginView):
    """Django's login page; a logged-in human sent to it (``redirect_authenticated_user``) with ``next``
    naming the login page itself goes to LOGIN_REDIRECT_URL instead of a redirect loop (Django raises
    ValueError there: a 500 for a link anyone can send)."""

    redirect_authenticated_user = True

    def get_redirect_url(self):
        url = super().get_redirect_url()
        return "" if url and urlparse(url).path == self.request.path else url
