"""Memory input validation shared by the REST API (brain.apis.memory) and the CLI (manage.py brain).

One serializer per input shape, so both entry points accept and refuse exactly the same values.
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from rest_framework import serializers

from api import fields as strict
from brain.choices import TOPIC_MAX_CHARS, SourceRefType, ThoughtCategory, topic_normal

#: Transition markers are written by the task workflow itself, never through the memory endpoint.
CONTRIBUTABLE_CATEGORIES = [c for c in ThoughtCategory.values if c != ThoughtCategory.TRANSITION_MARKER]
MAX_ID_LIST = 100
#: The longest text a memory call takes; an import, a correction (REST, MCP, web) take the same.
PROMPT_MAX_CHARS = 10000
MAX_TAGS = 20
#: The longest structured text of a contribution (a corrected or correct fact, the alternatives considered).
FACT_MAX_CHARS = 5000
#: A ``temporal_scope`` is when the knowledge was current: not after today, with a day for callers in
#: time zones ahead of the server's.
TEMPORAL_SCOPE_SKEW = dt.timedelta(days=1)


def temporal_scope_checked(value: dt.date | None) -> dt.date | None:
    """``value`` when it is no later than today (TEMPORAL_SCOPE_SKEW aside), else a ValidationError."""
    latest = timezone.localdate() + TEMPORAL_SCOPE_SKEW
    if value is not None and value > latest:
        raise serializers.ValidationError(
            f"temporal_scope is when this knowledge was current: a date no later than {latest.isoformat()} "
            "(today); leave it out for today."
        )
    return value


class TextOrListField(strict.CharField):
    """Free text, or a list of short texts (one alternative per item) joined one per line."""

    def to_internal_value(self, data):
        if isinstance(data, list):
            if not all(isinstance(item, str) for item in data):
                self.fail("invalid")
            data = "\n".join(item.strip() for item in data if item.strip())
        return super().to_internal_value(data)


class OptionalBooleanField(strict.BooleanField):
    """A boolean that stays "not given" when absent, also in form-encoded bodies (DRF's default
    reads a missing checkbox as false, which would make every form POST a pure search)."""

    default_empty_html = serializers.empty


def relevance_field(**kwargs) -> strict.FloatField:
    """A relevance threshold in [0, 1]."""
    return strict.FloatField(min_value=0.0, max_value=1.0, **kwargs)


class SourceRefSerializer(strict.Serializer):
    type = strict.ChoiceField(choices=SourceRefType.values)
    value = strict.CharField(max_length=500)
    project = strict.CharField(max_length=200, required=False, allow_blank=True)


def thought_ids_field(**kwargs) -> serializers.ListField:
    """A list of at most MAX_ID_LIST thought ids (UUIDs), optional; shared by every endpoint that takes one."""
    return serializers.ListField(child=strict.UUIDField(), required=False, max_length=MAX_ID_LIST, **kwargs)


class MemoryInputSerializer(strict.FieldsReusedPerThread, strict.Serializer):
    #: The MCP tools take the text as ``query`` (memory_search) and ``content`` (memory_contribute); an
    #: agent that uses both surfaces sends those names here too.
    unknown_field_hints = {
        name: "The text goes in 'prompt' (the MCP tools memory_search and memory_contribute call it query and content)."
        for name in ("query", "content", "q", "text")
    }

    prompt = strict.CharField(max_length=PROMPT_MAX_CHARS)
    agent_id = strict.CharField(max_length=100, required=False, allow_blank=True)
    agent_name = strict.CharField(max_length=200, required=False, allow_blank=True)
    context = strict.CharField(max_length=2000, required=False, allow_blank=True)
    session_id = strict.CharField(max_length=100, required=False, allow_blank=True)
    refines = strict.UUIDField(required=False, allow_null=True)
    # No min length here: fewer than two ids is MIN_CONSOLIDATION, raised by the service.
    consolidates = thought_ids_field(allow_null=True)
    thought_category = strict.ChoiceField(choices=CONTRIBUTABLE_CATEGORIES, required=False)
    topic = strict.CharField(
        max_length=TOPIC_MAX_CHARS, required=False, allow_blank=True, help_text="Stored trimmed and lower-cased."
    )
    temporal_scope = strict.DateField(
        required=False,
        allow_null=True,
        input_formats=["iso-8601"],
        help_text="When this knowledge was current: today or earlier.",
    )
    source_ref = SourceRefSerializer(required=False, allow_null=True)
    alternatives_considered = TextOrListField(max_length=FACT_MAX_CHARS, required=False, allow_blank=True)
    corrected_fact = strict.CharField(max_length=FACT_MAX_CHARS, required=False, allow_blank=True)
    correct_fact = strict.CharField(max_length=FACT_MAX_CHARS, required=False, allow_blank=True)
    supersedes = thought_ids_field(
        help_text="The thoughts this one replaces. A correction supersedes them (x0.5); any other thought "
        "replaces them as refines (one id) or consolidates (several) would."
    )
    related_thoughts = thought_ids_field()
    tags = serializers.ListField(child=strict.CharField(max_length=100), required=False, max_length=MAX_TAGS)
    filter_topic = strict.CharField(
        max_length=TOPIC_MAX_CHARS, required=False, allow_blank=True, help_text="A topic, whatever its case."
    )
    filter_category = strict.ChoiceField(choices=ThoughtCategory.values, required=False, allow_blank=True)
    limit = strict.IntegerField(min_value=1, max_value=50, required=False)
    min_relevance = relevance_field(
        required=False,
        help_text="Drop sources whose calibrated relevance (each source's `relevance`, an estimate of the "
        "chance it is what you need) is below this.",
    )
    inject = OptionalBooleanField(
        required=False,
        help_text="true: the injection mode for prompt hooks: only sources at or above the default "
        "relevance threshold (or min_relevance, when given), and no sources at all when none qualifies.",
    )
    contribute = OptionalBooleanField(
        required=False,
        help_text="false: a pure search. Retrieve, reinforce and log the query, never store the prompt.",
    )
    store = OptionalBooleanField(
        required=False,
        help_text="true: store the prompt even when it is below the contribution threshold (short facts, "
        "imports); false: the same as contribute: false.",
    )

    def validate_temporal_scope(self, value: dt.date | None) -> dt.date | None:
        return temporal_scope_checked(value)

    def validate_filter_topic(self, value: str) -> str:
        return topic_normal(value)  # a stored topic is normalized by thought_create; a filter here
