"""Which spaces a human sees, and which one a page works in.

A human sees the spaces they are a member of (``Space.members``); a superuser sees every space.
The space a page works in is the one chosen with the switcher (kept in the session), else the
first the human sees. Every page and every form post is scoped to that one space, so an id from
another space is simply not found there.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest

from core.models import Space

SESSION_KEY = "colony_space_id"


def space_list_for_user(*, user) -> QuerySet[Space]:
    """The spaces ``user`` may see and act in."""
    if not user.is_authenticated:
        return Space.objects.none()
    if user.is_superuser:
        return Space.objects.all()
    return Space.objects.filter(members=user)


def space_for_request(request: HttpRequest) -> Space | None:
    """The space this request works in (None when the human belongs to no space).

    Computed once per request with one query; the list is kept on the request for the switcher.
    """
    if hasattr(request, "colony_space"):
        return request.colony_space
    spaces = list(space_list_for_user(user=request.user))
    wanted = request.session.get(SESSION_KEY)
    current = next((s for s in spaces if s.pk == wanted), spaces[0] if spaces else None)
    request.colony_spaces = spaces
    request.colony_space = current
    return current


def space_choose(request: HttpRequest, *, slug: str) -> Space | None:
    """Make ``slug`` the request's space if the human may see it; None (and no change) otherwise."""
    space = space_list_for_user(user=request.user).filter(slug=slug).first()
    if space is not None:
        request.session[SESSION_KEY] = space.pk
    return space
