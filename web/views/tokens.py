"""Read-only URL tokens for humans' URL-fetching chat clients (seed 003 layer B).

A member of the space creates one for an agent identity of the space (whose name its queries are
logged under), with an expiry; the token is shown once, inside a ready URL. Revocable here.
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from api.errors import ApplicationError
from api.paging import newest
from core import services
from core.models import Agent, UrlToken
from web.forms import UrlTokenForm, form_error_text
from web.views.common import space_required


@require_http_methods(["GET", "POST"])
@never_cache  # the answer to a POST shows a new token, once
@space_required
def url_tokens(request):
    space = request.colony_space
    agents = Agent.objects.filter(space=space, active=True).order_by("name")
    new_url = None
    if request.method == "POST":
        form = UrlTokenForm(request.POST)
        if not form.is_valid():
            messages.error(request, f"No URL token created — {form_error_text(form)}")
        elif (agent := agents.filter(name=form.cleaned_data["agent"]).first()) is None:
            messages.error(request, "No URL token created — choose an agent of this space.")
        else:
            try:
                _, raw = services.url_token_create(
                    agent=agent,
                    days=form.cleaned_data["days"],
                    label=form.cleaned_data["label"],
                    created_by=request.user.get_username(),
                    user=request.user,
                )
            except ApplicationError as exc:
                messages.error(request, f"No URL token created — {exc.message}")
            else:
                new_url = request.build_absolute_uri(f"/api/v1/memory?prompt=YOUR+QUESTION&token={raw}")
    tokens = newest(
        UrlToken.objects.filter(agent__space=space).select_related("agent").order_by("-created_at"),
        services.URL_TOKENS_LIVE_MAX,  # a person's live tokens fit on the page, to revoke
    )
    return render(
        request,
        "web/url_tokens.html",
        {"agents": agents, "tokens": tokens, "new_url": new_url, "now": timezone.now()},
    )


@require_POST
@space_required
def url_token_revoke(request, token_id: int):
    count = UrlToken.objects.filter(pk=token_id, agent__space=request.colony_space, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if count:
        messages.success(request, "URL token revoked: it answers nothing from now on.")
    else:
        messages.error(request, "No active URL token with that id in this space; nothing changed.")
    return redirect("web:url-tokens")
