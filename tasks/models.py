"""Projects, tasks and their transition history (SPEC 3.1).

A task's ``status`` is only ever changed by ``tasks.services.transitions.task_transition``.
"""

from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.db import models
from django.utils import timezone

from api.parsers import canonical_json
from core.choices import AgentRole
from tasks.choices import ApprovalMode, TaskStatus, TaskType

#: A task's description, at most (its title: 300). Every task list page and board card carries it.
DESCRIPTION_MAX_CHARS = 20_000
#: A transition's summary, at most: one sentence, and the brain marker quotes it.
SUMMARY_MAX_CHARS = 1000
#: Tasks one task may name as parents, and as dependencies, at most.
LINKS_MAX = 100


def task_id_of(ref: str) -> uuid.UUID | None:
    """The task id a reference names, or None when it names a task by slug: a reference that parses as a
    UUID (any case, with or without hyphens) is an id, anything else a slug, never both."""
    try:
        return uuid.UUID(str(ref))
    except ValueError:
        return None


def validate_not_a_task_id(value: str) -> None:
    """A task slug never parses as a UUID (:func:`task_id_of`), so that a reference names exactly one
    task. ``tasks.services.tasks.task_create`` refuses such a slug in the API's envelope; this validator
    holds it on the admin's forms."""
    if task_id_of(value) is None:
        return
    raise ValidationError(
        "A task slug can't read as a task id (a UUID); choose one with a word in it.", code="slug_is_uuid"
    )


class Project(models.Model):
    space = models.ForeignKey("core.Space", on_delete=models.PROTECT, related_name="projects")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200)
    approval_mode = models.CharField(max_length=20, choices=ApprovalMode.choices, default=ApprovalMode.MANUAL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["space", "slug"]
        constraints = [models.UniqueConstraint(fields=["space", "slug"], name="project_unique_slug_per_space")]

    def __str__(self) -> str:
        return self.slug


class Task(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    space = models.ForeignKey("core.Space", on_delete=models.PROTECT, related_name="tasks")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="tasks")
    slug = models.SlugField(max_length=150, validators=[validate_not_a_task_id])
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True, default="", validators=[MaxLengthValidator(DESCRIPTION_MAX_CHARS)])
    type = models.CharField(max_length=10, choices=TaskType.choices, default=TaskType.TASK)
    status = models.CharField(max_length=20, choices=TaskStatus.choices, default=TaskStatus.BACKLOG)
    role = models.CharField(max_length=20, choices=AgentRole.choices, blank=True, default="")
    dna = models.JSONField(default=dict, blank=True)
    parents = models.ManyToManyField("self", symmetrical=False, blank=True, related_name="children")
    depends_on = models.ManyToManyField("self", symmetrical=False, blank=True, related_name="dependents")

    # When the task last entered its current state: the memory gates only accept brain queries and
    # contributions made after it. Restore puts back the clock of the state it returns to.
    status_changed_at = models.DateTimeField(default=timezone.now)
    # What ``restore`` returns to (set by any->blocked, cleared by restore).
    blocked_from_status = models.CharField(max_length=20, choices=TaskStatus.choices, blank=True, default="")
    blocked_from_role = models.CharField(max_length=20, choices=AgentRole.choices, blank=True, default="")
    blocked_from_changed_at = models.DateTimeField(null=True, blank=True)

    created_by = models.ForeignKey(
        "core.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="created_tasks"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["space", "slug"], name="task_unique_slug_per_space")]
        indexes = [
            models.Index(fields=["space", "status", "role"], name="task_space_status_role"),
            models.Index(fields=["project", "status"], name="task_project_status"),
        ]

    def __str__(self) -> str:
        return f"{self.slug} [{self.status}]"


class TransitionLog(models.Model):
    """One accepted transition, written in the same database transaction as the change and its marker."""

    id = models.BigAutoField(primary_key=True)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="transitions")
    rule_key = models.CharField(max_length=60)
    from_status = models.CharField(max_length=20, choices=TaskStatus.choices)
    to_status = models.CharField(max_length=20, choices=TaskStatus.choices)
    actor = models.CharField(max_length=20, help_text="The acting role, 'system' or 'human'.")
    # The audit trail keeps who moved the task: an agent or a user it names can't be deleted (deactivate it).
    agent = models.ForeignKey("core.Agent", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    role_before = models.CharField(max_length=20, blank=True, default="")
    role_after = models.CharField(max_length=20, blank=True, default="")
    dna_diff = models.JSONField(
        default=dict, blank=True, help_text='{"added": {}, "removed": {}, "changed": {k: [before, after]}}'
    )
    summary = models.TextField(blank=True, default="")
    marker = models.ForeignKey("brain.Thought", on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["task", "-created_at"], name="transition_task_created")]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.from_status}->{self.to_status} by {self.actor}"


def dna_digest(dna: dict | None) -> str:
    """SHA-256 of a task's DNA in canonical JSON: what a human's confirmation was given for."""
    return hashlib.sha256(canonical_json(dna or {}).encode()).hexdigest()


class HumanConfirmation(models.Model):
    """A logged-in human's 'yes' to one human-gated step of one task, consumed by that transition.

    It only counts while the task is still in ``from_status`` since it was given (a confirmation from
    an earlier round of the same state does not carry over), while its DNA is what the human saw
    (``dna_digest``: an agent can't change the abstract or the test counts after the 'yes'), and while
    the human may still act in the space (active, and a member or a superuser).
    """

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="confirmations")
    from_status = models.CharField(max_length=20, choices=TaskStatus.choices)
    to_status = models.CharField(max_length=20, choices=TaskStatus.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    confirmed_at = models.DateTimeField(default=timezone.now)
    consumed_at = models.DateTimeField(null=True, blank=True)
    dna_digest = models.CharField(max_length=64, default="")
    consumed_by = models.OneToOneField(
        TransitionLog, null=True, blank=True, on_delete=models.SET_NULL, related_name="confirmation"
    )

    class Meta:
        ordering = ["-confirmed_at"]
        indexes = [models.Index(fields=["task", "from_status", "to_status"], name="confirmation_lookup")]

    def __str__(self) -> str:
        return f"{self.task_id}: {self.from_status}->{self.to_status} confirmed by {self.user_id}"
