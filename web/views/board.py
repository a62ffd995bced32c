"""The task board and the task page: humans watch the work, move tasks a human may move, give confirmations.

Every read goes through ``tasks.selectors`` and every change through ``tasks.services`` (the same
code the agents' API calls), always within the human's current space. A refused post (a transition
the workflow does not allow now, a task of another space, a gate key in DNA) shows the service's
reason as a message and changes nothing.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from api.errors import ApplicationError, NotFound, ValidationFailed
from tasks import workflow
from tasks.choices import TaskType
from tasks.models import dna_digest
from tasks.selectors import confirmation_list_open, task_get, task_list
from tasks.services.confirmations import task_confirm_human
from tasks.services.tasks import task_update_dna
from tasks.services.transitions import task_transition, task_transition_options
from web.board import board_columns, confirmations_by_target, dna_split
from web.forms import BoardFilterForm, ConfirmForm, DnaForm, TransitionForm, form_error_text
from web.selectors import project_list_for_filter, transition_history
from web.views.common import is_htmx, space_required

BOARD_REFRESH_SECONDS = 5
#: Projects the board's filter offers at most (those with the latest task changes); any other is
#: still a filter when the URL names it.
BOARD_PROJECTS = 50


def dna_is_gate_key(key: str) -> bool:
    """Gate keys: what the engine keeps (confirmations, blocked state, links) and the memory gates,
    which must be the acting agent's own verified brain activity, so a human can't stand in for them."""
    return workflow.is_protected_dna_key(key) or key in workflow.MEMORY_FIELDS


def _safe_next(request, value: str | None, default: str) -> str:
    if value and url_has_allowed_host_and_scheme(
        value, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return value
    return default


@require_GET
@space_required
def board(request):
    space = request.colony_space
    selected = str(request.GET.get("project") or "")
    selected = selected if selected.isprintable() and len(selected) <= 100 else ""  # else refused by the form
    projects, project_count = project_list_for_filter(space=space, limit=BOARD_PROJECTS, selected=selected)
    form = BoardFilterForm(request.GET or None, projects=projects, types=TaskType.choices)
    filters: dict = {}
    if form.is_bound:
        if form.is_valid():
            filters = form.filters()
        elif not is_htmx(request):  # the page said it once; the columns' refresh shows no messages
            messages.error(request, f"Filter ignored — {form_error_text(form)}")
    tasks = task_list(space=space, **filters)
    context = {
        "nav": "board",
        "form": form,
        "filters": filters,
        "projects_not_offered": project_count - len(projects),
        "columns": board_columns(tasks),
        "refresh_seconds": BOARD_REFRESH_SECONDS,
    }
    template = "web/_board_columns.html" if is_htmx(request) else "web/board.html"
    return render(request, template, context)


def _task_or_none(request, ref: str):
    try:
        return task_get(space=request.colony_space, id_or_slug=ref)
    except NotFound as exc:
        messages.error(request, exc.message)
        return None


def _options_context(request, task) -> dict:
    """What the moves panel draws (the task page's and the board card's): the moves, the human gates, and
    the DNA with its digest, which a human-gated move or confirmation is given on and which the panel
    shows next to it (a human never confirms DNA they have not seen)."""
    options = task_transition_options(task=task, actor_user=request.user)
    confirmations = confirmations_by_target(confirmation_list_open(task=task))
    gates = [
        {"option": option, "confirmation": confirmations.get(option["target_status"])}
        for option in options
        if option["human_confirmation_needed"]
    ]
    editable, gate = dna_split(task.dna or {}, is_gate_key=dna_is_gate_key)
    return {
        "task": task,
        "options": options,
        "gates": gates,
        "dna_digest": dna_digest(task.dna),
        # As (key, value) pairs: a template's dict.items reads a DNA key named "items" first, so an
        # agent's {"items": [["pdsa_ref", "…"]]} would be drawn in place of the task's own DNA.
        "dna_editable": list(editable.items()),
        "dna_gate": list(gate.items()),
    }


@require_GET
@space_required
def task_detail(request, ref: str):
    task = _task_or_none(request, ref)
    if task is None:
        return render(request, "web/not_found.html", {"back": reverse("web:board")}, status=404)
    context = {"nav": "board", "history": transition_history(task=task), **_options_context(request, task)}
    context["dna_text"] = json.dumps(dict(context["dna_editable"]), indent=2, sort_keys=True, ensure_ascii=False)
    return render(request, "web/task.html", context)


@require_GET
@space_required
def task_moves(request, ref: str):
    """The card's move panel on the board: what the human may do now, and why not the rest."""
    task = _task_or_none(request, ref)
    if task is None:
        return render(request, "web/_messages_oob.html", status=200)
    return render(request, "web/_task_moves.html", {"on_board": True, **_options_context(request, task)})


def _after_post(request, *, task_ref: str | None, next_value: str | None):
    """htmx (the board): messages swapped in place and the board told to refresh. Else back to a page."""
    if is_htmx(request):
        response = render(request, "web/_messages_oob.html")
        response["HX-Trigger"] = "board-changed"
        return response
    default = reverse("web:task", args=[task_ref]) if task_ref else reverse("web:board")
    return redirect(_safe_next(request, next_value, default))


def _task_and_valid_form(request, ref: str, form, *, refusal: str):
    """The task a post acts on, and the response that ends the post early (None when it may go on).

    An unknown task or an invalid form changes nothing: the human gets the reason as a message.
    """
    task = _task_or_none(request, ref)
    if task is None:
        return None, _after_post(request, task_ref=None, next_value=None)
    if not form.is_valid():
        messages.error(request, f"{refusal} — {form_error_text(form)}")
        return task, _after_post(request, task_ref=task.slug, next_value=None)
    return task, None


@require_POST
@space_required
def task_transition_post(request, ref: str):
    form = TransitionForm(request.POST)
    task, refused = _task_and_valid_form(request, ref, form, refusal="Transition refused")
    if refused is not None:
        return refused
    try:
        log = task_transition(
            task=task,
            to=form.cleaned_data["to"],
            summary=form.cleaned_data["summary"],
            actor_user=request.user,
            shown_dna_digest=form.cleaned_data["dna_digest"],
        )
    except ApplicationError as exc:
        messages.error(request, f"{task.slug}: transition to “{form.cleaned_data['to']}” refused — {exc.message}")
    else:
        messages.success(
            request, f"{task.slug} moved {log.from_status} → {log.to_status}; marker written to the brain."
        )
    return _after_post(request, task_ref=task.slug, next_value=form.cleaned_data.get("next"))


@require_POST
@space_required
def task_confirm_post(request, ref: str):
    form = ConfirmForm(request.POST)
    task, refused = _task_and_valid_form(request, ref, form, refusal="Confirmation refused")
    if refused is not None:
        return refused
    try:
        confirmation = task_confirm_human(
            task=task,
            to_status=form.cleaned_data["to_status"],
            user=request.user,
            shown_dna_digest=form.cleaned_data["dna_digest"],
        )
    except ApplicationError as exc:
        messages.error(request, f"{task.slug}: confirmation refused — {exc.message}")
    else:
        messages.success(
            request,
            f"{task.slug}: {confirmation.from_status} → {confirmation.to_status} confirmed by "
            f"{confirmation.user.get_username()}; the agent's transition will use it.",
        )
    return _after_post(request, task_ref=task.slug, next_value=form.cleaned_data.get("next"))


@require_POST
@space_required
def task_dna_post(request, ref: str):
    task = _task_or_none(request, ref)
    if task is None:
        return _after_post(request, task_ref=None, next_value=None)
    form = DnaForm(request.POST, is_gate_key=dna_is_gate_key)
    try:
        if not form.is_valid():
            raise ValidationFailed(form_error_text(form))
        patch = form.cleaned_data["patch"]
        if not patch:
            messages.info(request, f"{task.slug}: the DNA was not changed.")
        else:
            task_update_dna(task=task, patch=patch)
            messages.success(request, f"{task.slug}: DNA saved ({', '.join(sorted(patch))}).")
    except ApplicationError as exc:
        messages.error(request, f"{task.slug}: DNA not saved — {exc.message}")
    return _after_post(request, task_ref=task.slug, next_value=None)
