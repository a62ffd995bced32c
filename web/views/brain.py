"""The brain explorer: search the brain as the agents do, read a thought with its lineage, correct it.

Search calls the same retrieval selector the memory endpoint uses (``brain.selectors.search``) on
the same query embedding, but a human browsing is not an agent's retrieval: it writes no query log
and does not reinforce pheromones or access counts, so looking never changes what agents get.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from api import paging
from api.errors import ApplicationError, NotFound
from api.text import storable
from brain import embedding as embedder
from brain.choices import DEFAULT_TOPIC, ThoughtCategory
from brain.selectors.lineage import thought_get, thought_lineage_of
from brain.selectors.listing import THOUGHT_LIST_ORDER, thought_list
from brain.selectors.search import thought_search
from brain.services.corrections import correction_supersede_guidance, suggestion_accept, thought_correct
from brain.services.retraction import retraction_guidance, thought_retract
from brain.services.suggestions import suggestion_dismiss, suggestion_get
from brain.services.thoughts import human_contributor
from web.forms import BrainSearchForm, CorrectionForm, SuggestionResolveForm, form_error_text
from web.lineage import TREE_ITEMS_MAX, lineage_trees
from web.selectors import (
    suggestion_list_for_thought,
    thought_corrections_of,
    thought_list_by_ids,
    thought_related_of,
    topic_list,
)
from web.views.common import space_required

SEARCH_LIMIT = 20
LINEAGE_DEPTH = 10


@require_GET
@space_required
def explorer(request):
    space = request.colony_space
    form = BrainSearchForm(request.GET or None, categories=ThoughtCategory.choices)
    context = {"nav": "brain", "form": form, "topics": topic_list(space=space), "results": None}
    if form.is_bound and form.is_valid() and form.cleaned_data["q"]:
        data = form.cleaned_data
        try:
            vector = embedder.embed(data["q"])
        except embedder.EmbeddingError as exc:
            messages.error(request, f"Search is unavailable: the query could not be embedded ({exc}).")
        else:
            result = thought_search(
                space=space,
                vector=vector,
                query_text=data["q"],
                limit=SEARCH_LIMIT,
                filter_topic=data["topic"] or None,
                filter_category=data["category"] or None,
            )
            context["results"] = result.candidates
            context["relaxed"] = result.relaxed
    elif form.is_bound and not form.is_valid():
        if set(form.errors) == {"cursor"}:
            messages.error(request, "That page's link is not one the explorer gave; the list starts from the newest.")
        else:
            messages.error(request, f"Search not run — {form_error_text(form)}")
    if context["results"] is None:
        context.update(_browse(space, form))
    return render(request, "web/brain.html", context)


def _browse(space, form: BrainSearchForm) -> dict:
    """Without a search: the space's thoughts newest first, by the form's topic and category when they
    are valid, one page after the form's cursor (the "Older thoughts" link carries the next); a cursor
    page is the same whatever was contributed since the page before (api.paging)."""
    data = getattr(form, "cleaned_data", {})  # the fields that are valid (a bad cursor keeps the filters)
    topic, category = data.get("topic") or None, data.get("category") or None
    page, next_cursor = paging.page_after(
        thought_list(space=space, topic=topic, category=category),
        order=THOUGHT_LIST_ORDER,
        cursor=data.get("cursor"),
        limit=SEARCH_LIMIT,
    )
    filters = {name: value for name, value in (("topic", topic), ("category", category)) if value}
    older = "?" + urlencode({**filters, "cursor": next_cursor}) if next_cursor is not None else None
    newest = "?" + urlencode(filters) if filters else ""
    paged = data.get("cursor") is not None
    return {"recent": page, "older": older, "newest": newest, "filters": filters, "paged": paged}


def _in_space(space, thought_id):
    """The thought ``thought_id`` names when it is one of ``space``'s, else None."""
    found = thought_list_by_ids(space=space, ids=[thought_id]) if thought_id else []
    return found[0] if found else None


@require_GET
@space_required
def thought_detail(request, thought_id):
    space = request.colony_space
    try:
        thought = thought_get(space=space, thought_id=thought_id)
        lineage = thought_lineage_of(space=space, root=thought, max_depth=LINEAGE_DEPTH)
    except NotFound:
        return render(request, "web/not_found.html", {"back": reverse("web:brain")}, status=404)
    trees = lineage_trees(lineage["chain"], str(thought.id))
    form = CorrectionForm(initial={"corrected_fact": thought.content, "topic": thought.topic or DEFAULT_TOPIC})
    context = {
        "nav": "brain",
        "thought": thought,
        "ancestors": trees.ancestors,
        "descendants": trees.descendants,
        "lineage_truncated": lineage["truncated"] or trees.cut,
        "lineage_depth": LINEAGE_DEPTH,
        "lineage_items": TREE_ITEMS_MAX,
        "corrected_by": thought_corrections_of(space=space, thought=thought),
        "corrects": thought_list_by_ids(space=space, ids=thought.supersedes),
        "related": thought_related_of(space=space, thought=thought),
        "superseded_by": _in_space(space, thought.superseded_by_id),
        "refined_by": _in_space(space, thought.refined_by_id),
        "suggestions": suggestion_list_for_thought(thought=thought),
        "form": form,
    }
    return render(request, "web/thought.html", context)


@require_POST
@space_required
def thought_correct_post(request, thought_id):
    space = request.colony_space
    try:
        thought = thought_get(space=space, thought_id=thought_id)
    except NotFound as exc:
        messages.error(request, f"Correction not stored — {exc.message}")
        return redirect("web:brain")
    form = CorrectionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Correction not stored — {form_error_text(form)}")
        return redirect("web:thought", thought.id)
    contributor_id, contributor_name = human_contributor(request.user)
    data = form.cleaned_data
    try:
        correction, count = thought_correct(
            space=space,
            agent=None,
            content=data["content"],
            topic=data["topic"],
            corrected_fact=data["corrected_fact"],
            correct_fact=data["correct_fact"],
            supersedes=[thought.id],
            contributor_id=contributor_id,
            contributor_name=contributor_name,
            context_metadata={"via": "web", "user": request.user.get_username()},
        )
    except ApplicationError as exc:
        messages.error(request, f"Correction not stored — {exc.message}")
        return redirect("web:thought", thought.id)
    messages.success(
        request, f"Correction stored. {correction_supersede_guidance(count=count, repeats=correction.repeats_flagged)}"
    )
    return redirect("web:thought", correction.id)


@require_POST
@space_required
def thought_retract_post(request, thought_id):
    """A human member of the space retracts a thought: superseded without a replacement, kept for audit."""
    try:
        retracted = thought_retract(
            space=request.colony_space,
            thought_id=thought_id,
            reason=storable(request.POST.get("reason", "")),
            user_name=request.user.get_username(),
            redact=request.POST.get("redact") == "on",
        )
    except ApplicationError as exc:
        messages.error(request, f"Not retracted — {exc.message}")
        return redirect("web:thought", thought_id)
    messages.success(request, retraction_guidance(retracted))
    return redirect("web:thought", thought_id)


def _resolve(request, suggestion_id, *, accept: bool):
    space = request.colony_space
    form = SuggestionResolveForm(request.POST)
    try:
        suggestion = suggestion_get(space=space, suggestion_id=suggestion_id)
    except (NotFound, ValueError):
        messages.error(request, f"No pending correction suggestion {suggestion_id} in this space; nothing changed.")
        return redirect("web:brain")
    back = redirect("web:thought", suggestion.thought_id)
    if not form.is_valid():
        messages.error(request, f"Suggestion not resolved — {form_error_text(form)}")
        return back
    resolved_by, _name = human_contributor(request.user)
    try:
        if accept:
            correction = suggestion_accept(
                suggestion=suggestion, resolved_by=resolved_by, correct_fact=form.cleaned_data["correct_fact"] or None
            )
        else:
            suggestion_dismiss(suggestion=suggestion, resolved_by=resolved_by, reason=form.cleaned_data["reason"])
    except ApplicationError as exc:
        messages.error(request, f"Suggestion not resolved — {exc.message}")
        return back
    if accept:
        messages.success(request, "Suggestion accepted: the correction below now supersedes the old thought.")
        return redirect("web:thought", correction.id)
    messages.success(request, "Suggestion dismissed; the thought stands as it was.")
    return back


@require_POST
@space_required
def suggestion_accept_post(request, suggestion_id):
    return _resolve(request, suggestion_id, accept=True)


@require_POST
@space_required
def suggestion_dismiss_post(request, suggestion_id):
    return _resolve(request, suggestion_id, accept=False)
