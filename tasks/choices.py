"""Enumerations of the task workflow (SPEC 3.1)."""

from django.db import models

from core.choices import AgentRole


class TaskStatus(models.TextChoices):
    BACKLOG = "backlog"
    PENDING = "pending"
    READY = "ready"
    ACTIVE = "active"
    APPROVAL = "approval"
    APPROVED = "approved"
    TESTING = "testing"
    REVIEW = "review"
    REWORK = "rework"
    COMPLETE = "complete"
    BLOCKED = "blocked"
    CANCELLED = "cancelled"


class TaskType(models.TextChoices):
    TASK = "task"
    BUG = "bug"


class ApprovalMode(models.TextChoices):
    """How much of the human gate a project keeps; see ``tasks.workflow.HUMAN_CONFIRMATION_WAIVED``."""

    MANUAL = "manual"
    SEMI = "semi"
    AUTO_APPROVAL = "auto-approval"
    AUTONOMOUS = "autonomous"


# Who can act on a task: the agent roles, the system (CLI, jobs) and humans (logged-in users).
SYSTEM = "system"
HUMAN = "human"
ROLE_ACTORS = tuple(AgentRole.values)
ACTORS = (*ROLE_ACTORS, SYSTEM, HUMAN)

# The pseudo-target that leaves ``blocked`` for the exact state and role the task was blocked in.
RESTORE = "restore"
