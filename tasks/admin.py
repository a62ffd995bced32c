"""Admin for projects, tasks, their transition history and human confirmations.

Humans confirm human-gated steps on the board and the task page, and here through the task actions
"Confirm next step: ...": like the board, an action confirms only the DNA it showed. Choosing it
shows each selected task's DNA; the "Yes" sends back each digest, and ``task_confirm_human`` confirms
nothing for a task whose DNA changed since. Status is read-only here: only ``task_transition``
changes it.
"""

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

from api.errors import ApplicationError
from core.admin import ColonyModelAdmin
from tasks.choices import TaskStatus
from tasks.models import HumanConfirmation, Project, Task, TransitionLog, dna_digest
from tasks.services.confirmations import task_confirm_human
from tasks.services.tasks import dependencies_check


@admin.register(Project)
class ProjectAdmin(ColonyModelAdmin):
    list_display = ["slug", "name", "space", "approval_mode", "created_at"]
    list_filter = ["approval_mode", "space"]
    search_fields = ["slug", "name"]

    def get_readonly_fields(self, request, obj=None):
        """A project's space (its tasks are there) is set when it is created."""
        return [*self.readonly_fields, "space"] if obj is not None else self.readonly_fields


class TransitionLogInline(admin.TabularInline):
    model = TransitionLog
    fields = [
        "created_at",
        "rule_key",
        "from_status",
        "to_status",
        "actor",
        "agent",
        "user",
        "role_before",
        "role_after",
        "summary",
        "marker",
        "dna_diff",
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ["-created_at"]
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


class HumanConfirmationInline(admin.TabularInline):
    model = HumanConfirmation
    fields = ["from_status", "to_status", "user", "confirmed_at", "consumed_at", "consumed_by"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


CONFIRM_AT_ONCE_MAX = 50
"""At most this many tasks per "Confirm next step" (each one's DNA is shown in full before the "Yes")."""


def _confirm_action(to_status: str):
    def action(modeladmin, request, queryset):
        tasks = list(queryset.select_related("project").order_by("slug")[: CONFIRM_AT_ONCE_MAX + 1])
        if len(tasks) > CONFIRM_AT_ONCE_MAX:
            modeladmin.message_user(
                request,
                f"Confirm at most {CONFIRM_AT_ONCE_MAX} tasks at a time: each one's DNA is shown before you "
                "confirm it.",
                level=messages.WARNING,
            )
            return None
        if request.POST.get("post") != "yes":
            return _confirm_page(modeladmin, request, tasks, to_status)
        done = 0
        for task in tasks:
            shown = request.POST.get(f"dna_digest_{task.pk}", "")[:64]
            if not shown:
                modeladmin.message_user(
                    request,
                    f"{task.slug}: its DNA was not shown on the confirmation page; nothing was confirmed.",
                    level=messages.WARNING,
                )
                continue
            try:
                task_confirm_human(task=task, to_status=to_status, user=request.user, shown_dna_digest=shown)
                done += 1
            except ApplicationError as exc:
                modeladmin.message_user(request, f"{task.slug}: {exc.message}", level=messages.WARNING)
        if done:
            modeladmin.message_user(request, f"Confirmed the step to '{to_status}' for {done} task(s).")
        return None

    action.__name__ = f"confirm_{to_status}"
    action.short_description = f"Confirm next step: → {to_status}"
    return action


def _confirm_page(modeladmin, request, tasks: list[Task], to_status: str) -> TemplateResponse:
    """The page between choosing "Confirm next step" and the "Yes": every selected task with the DNA
    the human confirms, and its digest in the form."""
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"Confirm the step to '{to_status}'",
        "opts": modeladmin.model._meta,
        "to_status": to_status,
        "action_name": f"confirm_{to_status}",
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "rows": [
            (task, dna_digest(task.dna), json.dumps(task.dna or {}, indent=2, sort_keys=True, ensure_ascii=False))
            for task in tasks
        ],
    }
    return TemplateResponse(request, "admin/tasks/task/confirm_step.html", context)


class TaskForm(forms.ModelForm):
    """A task as the admin edits it (TaskAdmin gives the model and the fields): its project, parents and
    dependencies are of its own space (SPEC 6: no transition crosses a space; the pending->ready gate
    reads the dependencies' status). Its DNA is a JSON object, stored without invisible controls as
    every door stores it.

    ``dna_loaded`` is the digest of the DNA the page showed. Agents write DNA while the page is open
    (their gate evidence, notes): a save that leaves the DNA as it was loaded keeps what the agents
    wrote since, and a save that changes a DNA an agent changed since is refused (reload and edit
    again), never a silent overwrite of their keys."""

    dna_loaded = forms.RegexField(regex=r"^[0-9a-f]{64}$", max_length=64, required=False, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.fields["dna_loaded"].initial = dna_digest(self.instance.dna)

    def clean_dna(self):
        dna = self.cleaned_data.get("dna")
        if dna is None and self.fields["dna"].widget.value_omitted_from_data(self.data, self.files, "dna"):
            return self.instance.dna  # a post without the field (a script's) leaves it as it is
        if not isinstance(dna, dict):
            raise forms.ValidationError("DNA must be a JSON object ({...}); {} for none.")
        return dna  # its texts cleaned by its field (core.admin.StorableJSONFormField)

    def _dna_as_stored_now(self, data: dict) -> None:
        """Under the task's row lock (the admin saves in one transaction): keep the DNA agents wrote since
        the page was loaded, or refuse to overwrite it."""
        loaded = data.get("dna_loaded")
        if self.instance.pk is None or not loaded or "dna" not in data:
            return
        current = Task.objects.select_for_update().filter(pk=self.instance.pk).values_list("dna", flat=True).first()
        if current is None or dna_digest(current) == loaded:
            return
        if dna_digest(data["dna"]) == loaded:  # not edited here: what the agents wrote since stays
            data["dna"] = current
            self.instance.dna = current
            return
        self.add_error(
            "dna",
            "An agent changed this task's DNA after the page was loaded; nothing was saved. Reload the page "
            "and make your change again on the DNA it shows.",
        )

    def _dependency_refused(self, linked) -> bool:
        """A dependency added here is refused as the API refuses it (``dependencies_check``); one the task
        had already stays, so the task's other fields can still be saved (remove it to free the task)."""
        kept = self.instance.depends_on.all() if self.instance.pk is not None else Task.objects.none()
        try:
            dependencies_check(dependencies=linked.exclude(pk__in=kept.values("pk")))
        except ApplicationError as exc:
            self.add_error("depends_on", exc.message)
            return True
        return False

    def clean(self):
        data = super().clean()
        self._dna_as_stored_now(data)
        space = data.get("space") or getattr(self.instance, "space", None)
        if space is None:
            return data
        project = data.get("project")
        if project is not None and project.space_id != space.pk:
            self.add_error("project", "A project of another space: a task stays within its space.")
        for name in ("parents", "depends_on"):
            linked = data.get(name)
            if linked is not None and linked.exclude(space=space).exists():
                self.add_error(name, "A task of another space: links stay within the task's space.")
            elif name == "depends_on" and linked is not None and self._dependency_refused(linked):
                continue
            elif linked is not None and self.instance.pk is not None:
                looped = _reaching(linked, name, self.instance.pk)
                if looped:
                    self.add_error(
                        name,
                        f"{looped} would be linked to itself through this task ({name.replace('_', ' ')} make a "
                        "loop): a task in a loop waits for itself and is never ready. Remove that link.",
                    )
        return data


#: How many links away a loop is looked for (the API links a task only to tasks that exist already, so
#: a loop can only be closed here; a chain this long is far past any real one).
LOOP_SEARCH_DEPTH = 50


def _reaching(linked, field: str, task_pk) -> str | None:
    """The slug of a task of ``linked`` from which ``field`` links lead back to the task ``task_pk`` (the
    task itself, or one ``field`` reaches within LOOP_SEARCH_DEPTH steps), or None."""
    through = Task._meta.get_field(field).remote_field.through
    frontier = {pk: slug for pk, slug in linked.values_list("pk", "slug")}  # each task: the link it came from
    seen: set = set()
    for _ in range(LOOP_SEARCH_DEPTH):
        if task_pk in frontier:
            return frontier[task_pk]
        seen |= set(frontier)
        steps = through.objects.filter(from_task_id__in=list(frontier)).values_list("from_task_id", "to_task_id")
        frontier = {to: frontier[source] for source, to in steps if to not in seen}
        if not frontier:
            return None
    return None


@admin.register(Task)
class TaskAdmin(ColonyModelAdmin):
    list_display = ["slug", "title", "project", "type", "status", "role", "updated_at"]
    list_filter = ["status", "type", "role", "project__approval_mode", "project", "space"]
    search_fields = ["slug", "title", "description"]
    list_select_related = ["project", "space"]
    readonly_fields = [
        "id",
        "status",
        "role",
        "status_changed_at",
        "blocked_from_status",
        "blocked_from_role",
        "blocked_from_changed_at",
        "created_by",
        "created_at",
        "updated_at",
    ]
    form = TaskForm
    filter_horizontal = ["parents", "depends_on"]
    inlines = [HumanConfirmationInline, TransitionLogInline]

    def get_readonly_fields(self, request, obj=None):
        """A task's space (its markers are there) and its type (bugs have other gates) are set when it is
        created."""
        return [*self.readonly_fields, "space", "type"] if obj is not None else self.readonly_fields

    def has_delete_permission(self, request, obj=None):
        """A task that has moved has an audit trail (its transition log and markers): cancel it instead."""
        if obj is not None and obj.transitions.exists():
            return False
        return super().has_delete_permission(request, obj)

    actions = [
        _confirm_action(TaskStatus.APPROVED),
        _confirm_action(TaskStatus.COMPLETE),
        _confirm_action(TaskStatus.REWORK),
    ]


@admin.register(TransitionLog)
class TransitionLogAdmin(ColonyModelAdmin):
    list_display = ["created_at", "task", "from_status", "to_status", "actor", "agent", "user", "role_after"]
    list_filter = ["to_status", "from_status", "actor"]
    search_fields = ["task__slug", "summary"]
    list_select_related = ["task", "agent", "user"]
    readonly_fields = [f.name for f in TransitionLog._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # the audit trail of the workflow (SPEC 6); it also protects the marker


@admin.register(HumanConfirmation)
class HumanConfirmationAdmin(ColonyModelAdmin):
    list_display = ["task", "from_status", "to_status", "user", "confirmed_at", "consumed_at"]
    list_filter = ["to_status", "consumed_at"]
    search_fields = ["task__slug", "user__username"]
    list_select_related = ["task", "user"]
    readonly_fields = [f.name for f in HumanConfirmation._meta.fields]

    def has_add_permission(self, request):
        return False  # confirmations are given with the task actions, which check the gate

    def has_delete_permission(self, request, obj=None):
        return False  # a consumed one is part of a transition's record; an open one lapses by itself
