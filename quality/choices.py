from django.db import models


class TurnStatus(models.TextChoices):
    PENDING = "pending"  # logged, scoring job queued
    SCORED = "scored"


class InjectedFrom(models.TextChoices):
    """Where a turn's injected items came from."""

    EXPLICIT = "explicit"  # the caller listed injected_ids
    QUERY_LOG = "query_log"  # the sources of this session's last memory call
    NONE = "none"  # neither: only the feedback ids, if any


class VerdictSource(models.TextChoices):
    """Who decided an item's outcome: the agent's explicit feedback wins over the judge."""

    EXPLICIT = "explicit"
    JUDGE = "judge"
