"""The home page (where things are, what is moving, whether the machinery is up) and the space switcher."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from core.health import health_summary
from web.forms import SpaceSwitchForm
from web.selectors import marker_list_recent, task_list_in_flight
from web.spaces import space_choose
from web.views.common import space_required

# What a newcomer needs to find, in the order they usually need it.
PLACES = [
    {
        "name": "Board",
        "url": "/board/",
        "what": "Every task by status. Move tasks a human may move; give the human confirmations gates wait for.",
    },
    {
        "name": "Brain",
        "url": "/brain/",
        "what": "Search what the agents know, read a thought's lineage, accept or dismiss corrections.",
    },
    {
        "name": "Quality",
        "url": "/quality/",
        "what": "Whether the brain helps: on-topic, usage, contradiction and discovery rates against targets.",
    },
    {"name": "Admin", "url": "/admin/", "what": "Spaces and their members, agents and their API tokens, every record."},
    {"name": "API docs", "url": "/api/docs/", "what": "The agents' REST API, interactive."},
]


@require_GET
@space_required
def home(request):
    space = request.colony_space
    return render(
        request,
        "web/home.html",
        {
            "nav": "home",
            "places": PLACES,
            "in_flight": task_list_in_flight(space=space, limit=15),
            "markers": marker_list_recent(space=space, limit=10),
        },
    )


@require_GET
@space_required
def health_panel(request):
    """The health panel, fetched by htmx after the page is shown so a slow broker never delays the page."""
    return render(request, "web/_health.html", {"health": health_summary()})


@require_POST
@login_required
def space_switch(request):
    form = SpaceSwitchForm(request.POST)
    target = "web:home"
    if form.is_valid():
        nxt = form.cleaned_data["next"]
        if nxt and url_has_allowed_host_and_scheme(
            nxt, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            target = nxt
        space = space_choose(request, slug=form.cleaned_data["space"])
        if space is None:
            messages.error(request, f"You are not a member of a space called “{form.cleaned_data['space']}”.")
        else:
            messages.success(request, f"Now working in space “{space.name}”.")
    else:
        messages.error(request, "Choose a space from the list.")
    return redirect(target)
