"""The quality loop's data (SPEC 4; seeds/004).

- ``TurnLog`` / ``TurnItem``: one agent turn and the brain items injected into it, with the
  judge's and the agent's verdicts per item. Expire after ``TURN_LOG_RETENTION_DAYS``.
- ``SessionOwner``: the one agent whose turns a session id takes, fixed by the unique constraint
  when the session's first turn is logged. Expires once the session has no turn or query log left.
- ``ConfidenceChange``: every change of a thought's effective confidence made by scoring, so
  demotions and their reversal (``false_demotion_rate``) can be counted. Expires with turn logs.
- ``QualityRollup``: daily counts per (day, space, agent; none = the whole space). An agent is its id,
  whatever it is called now; the turns of a deleted agent are counted under the name they carry. Kept
  forever; the metrics are ratios of sums of these rows.
- ``JudgeValidation``: one run of ``manage.py validate_judge``; the latest one per judge name
  decides whether ranking may use that judge's verdicts.
"""

from __future__ import annotations

import uuid

from django.db import models

from quality.choices import InjectedFrom, TurnStatus, VerdictSource


class TurnLog(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="turn_logs")
    agent = models.ForeignKey("core.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The agent's name when the turn was logged: who it was once the agent is deleted (``agent`` nulled).
    agent_name = models.CharField(max_length=100)
    session_id = models.CharField(max_length=100)
    turn_id = models.CharField(max_length=200)
    user_prompt = models.TextField(blank=True, default="")
    assistant_response = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(default=list, blank=True)
    injected_from = models.CharField(max_length=20, choices=InjectedFrom.choices)
    query_log = models.ForeignKey(
        "brain.QueryLog",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The memory call whose sources were taken as the injected items.",
    )
    status = models.CharField(max_length=20, choices=TurnStatus.choices, default=TurnStatus.PENDING)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    scored_at = models.DateTimeField(null=True, blank=True)
    judge_name = models.CharField(max_length=50, blank=True, default="")
    judge_trusted = models.BooleanField(
        null=True, blank=True, help_text="Whether the judge's verdicts fed the EMAs when this turn was scored."
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["space", "session_id", "turn_id"], name="turnlog_unique_turn"),
        ]
        indexes = [
            models.Index(fields=["space", "created_at"], name="turnlog_space_created"),
            models.Index(fields=["status", "created_at"], name="turnlog_status_created"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}/{self.turn_id}"


class SessionOwner(models.Model):
    """The agent a session belongs to (quality.services.turns): one row per session id of a space, so
    of two agents reporting a new session's first turn at once exactly one gets it."""

    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="+")
    session_id = models.CharField(max_length=100)
    agent = models.ForeignKey("core.Agent", on_delete=models.CASCADE, related_name="+")
    claimed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["space", "session_id"], name="sessionowner_unique_session"),
        ]

    def __str__(self) -> str:
        return self.session_id


TURN_ITEM_VERDICT_FIELDS = (
    "judge_on_topic",
    "judge_used",
    "judge_contradicted",
    "on_topic",
    "used",
    "contradicted",
    "verdict_source",
    "fed_ema",
)
"""The verdict columns of a TurnItem that scoring writes and the admin shows."""


class TurnItem(models.Model):
    """One injected item of a turn: what was shown, and the verdicts on it.

    ``judge_*`` are the judge's raw verdicts; ``explicit_*`` the agent's feedback (null = none
    given); ``on_topic``/``used``/``contradicted`` the outcome that counts (explicit wins).
    """

    turn = models.ForeignKey(TurnLog, on_delete=models.CASCADE, related_name="items")
    thought = models.ForeignKey("brain.Thought", on_delete=models.CASCADE, related_name="+")
    position = models.PositiveSmallIntegerField(help_text="0 = best source of the memory call.")
    excerpt = models.TextField(help_text="The first 500 characters of the thought when injected.")
    content_length = models.PositiveIntegerField()
    score_at_injection = models.FloatField(null=True, blank=True)
    in_injection = models.BooleanField(
        default=True, help_text="False when the item only appears in the agent's feedback ids."
    )

    explicit_used = models.BooleanField(null=True, blank=True)
    explicit_contradicted = models.BooleanField(null=True, blank=True)

    judge_on_topic = models.BooleanField(null=True, blank=True)
    judge_used = models.BooleanField(null=True, blank=True)
    judge_contradicted = models.BooleanField(null=True, blank=True)
    judge_details = models.JSONField(default=dict, blank=True, help_text="confidence and reason per verdict")

    on_topic = models.BooleanField(null=True, blank=True)
    used = models.BooleanField(null=True, blank=True)
    contradicted = models.BooleanField(null=True, blank=True)
    verdict_source = models.CharField(max_length=20, choices=VerdictSource.choices, blank=True, default="")
    fed_ema = models.BooleanField(default=False, help_text="Whether this outcome moved the thought's EMAs.")

    class Meta:
        ordering = ["turn", "position"]
        constraints = [models.UniqueConstraint(fields=["turn", "thought"], name="turnitem_unique_thought")]
        indexes = [models.Index(fields=["thought", "contradicted"], name="turnitem_thought_contra")]

    def __str__(self) -> str:
        return f"{self.turn_id} #{self.position} {self.thought_id}"


class ConfidenceChange(models.Model):
    """One scoring update of a thought's EMAs and effective confidence."""

    thought = models.ForeignKey("brain.Thought", on_delete=models.CASCADE, related_name="+")
    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="+")
    turn = models.ForeignKey(TurnLog, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    agent_name = models.CharField(max_length=100, help_text="The agent whose turn caused the change.")
    # Who it was, whatever it is called now: the floor and the ceiling count distinct agents by it.
    agent = models.ForeignKey("core.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    used = models.BooleanField()
    contradicted = models.BooleanField()
    usage_score = models.FloatField()
    contradiction_score = models.FloatField()
    old_confidence = models.FloatField()
    new_confidence = models.FloatField()
    changed_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-changed_at", "-id"]
        indexes = [models.Index(fields=["thought", "changed_at"], name="confchange_thought_at")]

    def __str__(self) -> str:
        return f"{self.thought_id}: {self.old_confidence:.3f} -> {self.new_confidence:.3f}"


class QualityRollup(models.Model):
    """Counts of one day for one space (no ``agent_id``, ``agent_name=""``) or one agent of it. Kept forever.

    An agent's row is keyed by its id (``agent_id``; ``agent_name`` is its name when the row was written,
    for display), so a renamed agent keeps its record and an agent given a retired agent's name starts
    with none. Turns whose agent was deleted before they were rolled up are counted under the name they
    carry (``agent_id`` null). ``agent_id`` is a plain column, not a foreign key: the rows outlive the agent.
    """

    day = models.DateField()
    space = models.ForeignKey("core.Space", on_delete=models.CASCADE, related_name="+")
    agent_id = models.UUIDField(null=True, blank=True, help_text="The agent's id; null for the space's row.")
    agent_name = models.CharField(max_length=100, blank=True, default="")
    turns = models.PositiveIntegerField(default=0)
    turns_pending = models.PositiveIntegerField(default=0, help_text="logged but not scored yet")
    items = models.PositiveIntegerField(default=0, help_text="scored injected items")
    on_topic = models.PositiveIntegerField(default=0)
    used = models.PositiveIntegerField(default=0)
    contradicted = models.PositiveIntegerField(default=0)
    explicit_items = models.PositiveIntegerField(default=0)
    contradictions_raised = models.PositiveIntegerField(default=0, help_text="distinct thoughts contradicted")
    contradictions_resolved = models.PositiveIntegerField(default=0, help_text="superseded within 14 days")
    contradictions_pending = models.PositiveIntegerField(default=0, help_text="not superseded, 14 days not over")
    demotions = models.PositiveIntegerField(default=0, help_text="distinct thoughts whose confidence fell below 1")
    false_demotions = models.PositiveIntegerField(default=0, help_text="back to >= 1 within 7 days")
    demotions_pending = models.PositiveIntegerField(default=0, help_text="not back yet, 7 days not over")
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["-day", "space", "agent_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["day", "space", "agent_id"],
                condition=models.Q(agent_id__isnull=False),
                name="rollup_unique_day_space_agent_id",
            ),
            models.UniqueConstraint(
                fields=["day", "space", "agent_name"],
                condition=models.Q(agent_id__isnull=True),
                name="rollup_unique_day_space_name",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.space_id} {self.agent_name or '(space)'}"


class JudgeValidation(models.Model):
    """Agreement of a judge with hand labels, per metric (``manage.py validate_judge``)."""

    judge_name = models.CharField(max_length=50, db_index=True)
    source = models.CharField(max_length=500, help_text="The labelled file that was used.")
    source_sha256 = models.CharField(max_length=64)
    turns = models.PositiveIntegerField()
    items = models.PositiveIntegerField()
    on_topic_agreement = models.FloatField()
    used_agreement = models.FloatField()
    contradicted_agreement = models.FloatField()
    trusted = models.BooleanField(help_text="At least 85% agreement on every metric.")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.judge_name} {self.created_at:%Y-%m-%d}: {'trusted' if self.trusted else 'not trusted'}"
