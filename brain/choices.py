from django.db import models

from api.text import without_invisible_controls


class ThoughtType(models.TextChoices):
    ORIGINAL = "original"
    REFINEMENT = "refinement"
    CONSOLIDATION = "consolidation"


class ThoughtCategory(models.TextChoices):
    STATE_SNAPSHOT = "state_snapshot"
    DECISION_RECORD = "decision_record"
    OPERATIONAL_LEARNING = "operational_learning"
    TASK_OUTCOME = "task_outcome"
    CORRECTION = "correction"
    TRANSITION_MARKER = "transition_marker"
    UNCATEGORIZED = "uncategorized"


class QualityFlag(models.TextChoices):
    KEYWORD_ECHO = "keyword_echo"
    ORPHANED_REFERENCE = "orphaned_reference"
    STALE = "stale"
    NEAR_DUPLICATE = "near_duplicate"
    CONTRADICTS_CORRECTION = "contradicts_correction"
    UNVERIFIED = "unverified"
    RETRACTED = "retracted"  # withdrawn by its contributor or a human, superseded without a replacement


class SourceRefType(models.TextChoices):
    TASK = "task"
    FILE = "file"
    COMMIT = "commit"
    URL = "url"


class SuggestionStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DISMISSED = "dismissed"
    # Dismissed by the agent that raised it (it took its report back): it settles that agent's
    # contradictions of the thought, not another agent's still pending.
    WITHDRAWN = "withdrawn"
    # Closed by Colony: its thought was corrected, refined, consolidated or retracted before anyone
    # resolved it (the quality loop raises none on a superseded thought, for the same reason).
    SUPERSEDED = "superseded"


class SuggestionOrigin(models.TextChoices):
    CONTRADICTION_DETECTOR = "contradiction_detector"  # brain: new thought vs existing facts
    QUALITY_JUDGE = "quality_judge"  # quality loop: a response contradicted an injected item


DEFAULT_TOPIC = "general"
#: The key of ``context_metadata`` an agent's import writes on every thought it stores ({"by", "at"}),
#: whatever the item carried: an import restores notes, it is no contribution (the memory gates).
IMPORTED_KEY = "imported"
"""The topic a correction gets when neither the caller nor the corrected thought names one."""


TOPIC_MAX_CHARS = 200
"""The longest topic, as sent and as stored (``Thought.topic``)."""


def topic_normal(topic: str | None) -> str:
    """How a topic is stored and matched: trimmed and lower-cased, so "Deploys " and "deploys" are one
    topic (agents and people spell a topic's case as it comes; a filter would silently match nothing),
    without invisible controls ("deploys" and "deploys" + a zero-width space look alike, so they are
    one topic). Applied where topics come in: thought_create, imports, and every topic filter.

    Lower-casing can lengthen a text ("İ" becomes two characters), so the result is cut to
    TOPIC_MAX_CHARS: a topic the inputs accept always fits its column, and a filter spelled like it
    is cut the same way and still matches."""
    return without_invisible_controls(topic or "").strip().lower()[:TOPIC_MAX_CHARS].rstrip()
