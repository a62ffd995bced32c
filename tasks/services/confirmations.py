"""Human confirmations: a member of the space confirms a human-gated step; the transition consumes it."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from api.errors import Conflict, Forbidden, ValidationFailed
from tasks import workflow
from tasks.choices import HUMAN
from tasks.models import HumanConfirmation, Task, dna_digest
from tasks.selectors import confirmation_list_open
from tasks.services.actors import human_may_act


def confirmation_valid(*, task: Task, to_status: str) -> HumanConfirmation | None:
    """The oldest unconsumed confirmation of ``task``'s step to ``to_status`` given in its current state."""
    return confirmation_list_open(task=task).filter(to_status=to_status).first()


def task_confirm_human(
    *, task: Task, to_status: str, user: AbstractBaseUser, shown_dna_digest: str | None = None
) -> HumanConfirmation:
    """Record a logged-in human's confirmation of ``task``'s next step to ``to_status``.

    Called by the board and the admin. The transition that needs it consumes it; a confirmation only
    counts for the state and the DNA the task has when it is given (tasks.selectors.confirmation_list_open).
    ``shown_dna_digest`` is the digest of the DNA the human's page showed (the board's and the task
    page's forms and the admin's confirmation page send it): when an agent changed the DNA since,
    nothing is confirmed (409 ``STALE_PAGE``), so a human never confirms DNA they have not seen.
    """
    if not human_may_act(user=user, space_id=task.space_id):
        raise Forbidden(
            f"User {user.get_username()!r} is not a member of this task's space and can't confirm its steps.",
            code="HUMAN_NOT_MEMBER",
        )
    with transaction.atomic():
        locked = Task.objects.select_for_update(of=("self",)).select_related("project").get(pk=task.pk)
        if shown_dna_digest is not None and shown_dna_digest != dna_digest(locked.dna):
            raise Conflict(
                f"The DNA of {locked.slug} changed after this page was loaded; nothing was confirmed. Reload the "
                "page, read the task again and confirm what it shows.",
                code="STALE_PAGE",
            )
        resolved = workflow.rule_lookup(
            task_type=locked.type, from_status=locked.status, to=to_status, role=locked.role, actor=HUMAN
        )
        if resolved is None or not resolved.rule.human_confirmation:
            raise ValidationFailed(
                f"'{locked.status}' -> '{to_status}' is not a human-gated step of this {locked.type}.",
                code="NO_HUMAN_GATE",
            )
        if not workflow.human_confirmation_needed(
            rule_key=resolved.key, rule=resolved.rule, approval_mode=locked.project.approval_mode
        ):
            raise ValidationFailed(
                f"Project {locked.project.slug} is in {locked.project.approval_mode} mode: "
                f"'{locked.status}' -> '{to_status}' needs no human confirmation.",
                code="CONFIRMATION_NOT_NEEDED",
            )
        existing = confirmation_valid(task=locked, to_status=to_status)
        if existing is not None:
            return existing
        return HumanConfirmation.objects.create(
            task=locked,
            from_status=locked.status,
            to_status=to_status,
            user=user,
            confirmed_at=timezone.now(),
            dna_digest=dna_digest(locked.dna),
        )
