"""The wire shape of an import item, validated by one serializer per mode, and the dump rows' cleaners.

:class:`ImportItemSerializer` is what ``POST /api/v1/thoughts/import`` takes (an agent restoring its
own thoughts: the caller's identity, dates no later than now, values in their formulas' ranges, no
transition markers) and what the OpenAPI schema shows. :class:`RestoreItemSerializer` is the
operator's (``manage.py brain import``): other agents, markers and any storable value. Both give
:func:`item_clean`'s row of model values; a refusal names the first wrong field (``_Bad``), which the
services report per line as ``{line, field, message}``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import uuid
from typing import Any

import numpy as np
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from api import fields as strict
from api.fields import FieldsReusedPerThread
from api.parsers import unstorable_paths
from api.schema import JSON_VALUE_REF, NO_NUL_PATTERN
from api.text import json_storable
from brain.choices import (
    TOPIC_MAX_CHARS,
    QualityFlag,
    SuggestionOrigin,
    SuggestionStatus,
    ThoughtCategory,
    ThoughtType,
    topic_normal,
)
from brain.inputs import (
    FACT_MAX_CHARS,
    MAX_ID_LIST,
    MAX_TAGS,
    PROMPT_MAX_CHARS,
    SourceRefSerializer,
    temporal_scope_checked,
)
from brain.models import EMBEDDING_DIMENSIONS, THOUGHT_BOOKKEEPING_FIELDS, Thought
from brain.ranking import PHEROMONE_MAX
from brain.services import pheromones
from brain.services.retraction import RETRACTION_KEY
from brain.services.suggestions import draft_problem

#: Array references (stored as arrays of ids) and foreign-key references.
ARRAY_REFS = ("source_ids", "supersedes")
FK_REFS = ("refined_by", "superseded_by", "contradicted_by")
VECTOR_FIELDS = ("embedding", "corrected_fact_embedding")
#: Plain (non-reference) thought fields an import item carries under the model's names (SPEC 2.1):
#: every stored column of Thought but its id, space, agent, references, vectors, generated text and the
#: jobs' bookkeeping (``THOUGHT_BOOKKEEPING_FIELDS``: it describes this database's runs, not the thought).
VALUE_FIELDS = tuple(
    f.name
    for f in Thought._meta.concrete_fields
    if not f.is_relation
    and not f.generated
    and f.name not in ("id", *ARRAY_REFS, *VECTOR_FIELDS, *THOUGHT_BOOKKEEPING_FIELDS)
)
ITEM_FIELDS = frozenset(("id", "agent", "related_thoughts", *VALUE_FIELDS, *ARRAY_REFS, *FK_REFS, *VECTOR_FIELDS))
#: Vectors are stored as float32: a value beyond this would not stay finite (a little below float32's largest).
FLOAT32_MAX = 3.4e38
#: How far in the future an agent's import may date a thought (its clock and the server's differ a
#: little); such a time is stored as now, so a thought is never dated after the moment it is stored.
CLOCK_SKEW = dt.timedelta(minutes=5)
#: The largest effective confidence an agent's import may give its own thought: the single-agent
#: ceiling (quality.formulas.SINGLE_AGENT_CEILING, 1 + ALPHA/2). One agent's uses lift a thought no
#: higher, so one agent's import doesn't either; the operator's restore keeps any value of the formula.
AGENT_IMPORT_CONFIDENCE_MAX = 1.25
#: The largest effective confidence the operator's restore takes: the formula's largest value
#: (quality.formulas.confidence_formula: 1 + ALPHA with a usage of 1 and no contradiction). Written here, as
#: the ceiling above is, because brain does not import quality (tests/test_import_graph.py).
RESTORE_CONFIDENCE_MAX = 1.5
COUNTER_MAX = pheromones.COUNTER_MAX
#: What a PostgreSQL integer column holds.
INT_MAX = 2**31 - 1
#: The most ``context_metadata`` an import over the API takes, in characters of compact JSON (its nesting
#: is bounded by the API's parser, api.parsers.MAX_JSON_DEPTH). What Colony writes there itself is a few
#: thousand: a memory call's session, context (2,000) and names, a retraction's reasons (2 x 2,000).
CONTEXT_METADATA_MAX_CHARS = 20_000
#: The most ``context_metadata`` the operator's restore takes, in the same measure: five times what an import
#: over the API takes, so what the API took plus what Colony writes beside it (the import's record, a
#: retraction's and a redaction's reasons of at most 2,000 characters each) comes back from a backup, as does
#: a seed dump's payload kept under ``seed``; a hand-edited object of megabytes is refused.
RESTORE_CONTEXT_METADATA_MAX_CHARS = 100_000
#: The longest text of a thought the operator's restore takes (its content and its facts): ten times what
#: every other door takes (PROMPT_MAX_CHARS), so a dump holding longer texts (a Mem0 or seed-brain dump, an
#: export of a brain edited in the admin) is restored as it is, and within what PostgreSQL's full-text index
#: holds of one text (a tsvector of at most 1 MB: at worst about 6 bytes a character, single CJK characters
#: between spaces), past which storing the content fails.
RESTORE_TEXT_MAX_CHARS = 100_000
#: The most results one query-log row of a dump names: a memory call names at most 51 (its limit's 50
#: sources and the thought it repeats).
QUERY_RESULTS_MAX = MAX_ID_LIST

#: Other dumps' names for an import item's fields: a Mem0 get_all() item's "memory", a hand-written "text".
#: The API takes Colony's own fields; ``manage.py brain import FILE`` reads Mem0 and seed-brain dumps as they are.
ITEM_FIELD_HINTS = {
    "memory": "The text goes in 'content' (a Mem0 get_all() dump is read as it is by manage.py brain import FILE).",
    **dict.fromkeys(("text", "prompt", "body"), "The text goes in 'content'."),
}


class _Bad(Exception):
    """A refused value: the field it is in and why."""

    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name
        self.message = message


# --- value parsers (shared by the item's fields and the dump rows' cleaners) ---------------------------
#: A UUID as JSON Schema's ``format: uuid`` has it (RFC 9562): 8-4-4-4-12 hex digits. Python's
#: ``uuid.UUID`` also takes braces, ``urn:uuid:`` and 32 bare digits, which the schema refuses.
_CANONICAL_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _uuid(value: Any, name: str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str) or not _CANONICAL_UUID.fullmatch(value):
        raise _Bad(name, f"{value!r} is not a thought id (a UUID, 8-4-4-4-12 hex digits).")
    return uuid.UUID(value)


def _datetime(value: Any, name: str) -> dt.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        parsed = value
    elif not isinstance(value, str):
        raise _Bad(name, f"{value!r} is not an ISO 8601 date-time (a string).")
    else:
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _Bad(name, f"{value!r} is not an ISO 8601 date-time.") from None
    if timezone.is_naive(parsed):
        return timezone.make_aware(parsed, dt.UTC)
    try:  # in UTC: PostgreSQL takes offsets up to 15:59 only, ISO 8601 allows 23:59
        return parsed.astimezone(dt.UTC)
    except OverflowError:
        raise _Bad(name, f"{value!r} is out of range.") from None


def _vector(value: Any, name: str):
    """A 384-float vector as a float32 numpy array (checked in C: the import's hot loop). A float32
    array is one a file reader compacted with :func:`vector_compact`."""
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.dtype == np.float32 and value.shape == (EMBEDDING_DIMENSIONS,):
        if not np.isfinite(value).all():
            raise _Bad(name, f"must hold finite numbers between -{FLOAT32_MAX:g} and {FLOAT32_MAX:g} only.")
        return value
    if not isinstance(value, list) or len(value) != EMBEDDING_DIMENSIONS or not set(map(type, value)) <= {int, float}:
        raise _Bad(name, f"must be a list of {EMBEDDING_DIMENSIONS} numbers (or left out to embed on import).")
    try:
        exact = np.asarray(value, dtype=np.float64)
    except OverflowError:  # an integer of hundreds of digits
        raise _Bad(name, f"must hold finite numbers between -{FLOAT32_MAX:g} and {FLOAT32_MAX:g} only.") from None
    if not (np.abs(exact) <= FLOAT32_MAX).all():  # NaN fails the comparison too
        raise _Bad(name, f"must hold finite numbers between -{FLOAT32_MAX:g} and {FLOAT32_MAX:g} only.")
    return exact.astype(np.float32)


def vector_compact(value: Any) -> Any:
    """``value`` as the float32 array :func:`_vector` makes of it (1.5 KB, where a list of 384 Python
    floats takes ~12 KB), or unchanged when it is not a vector, for :func:`item_clean` to report with
    its item. File readers call it as they read (``brain.transfer.readers``)."""
    try:
        return _vector(value, "embedding")
    except _Bad:
        return value


def _require_storable(values: dict[str, Any]) -> None:
    """Raise ``_Bad`` naming the first text PostgreSQL can't store: a NUL, or a lone surrogate (which
    psycopg can't encode)."""
    found = unstorable_paths(values)
    if found:
        path, message = next(iter(found.items()))
        raise _Bad(path, message)


# --- the item's fields ---------------------------------------------------------------------------------
def _parsed_by(parse):
    """A field's ``to_internal_value`` that runs one of the parsers above, its ``_Bad`` as the field's error."""

    def to_internal_value(self, data):
        try:
            return parse(data, self.field_name)
        except _Bad as bad:
            raise serializers.ValidationError(bad.message) from None

    return to_internal_value


class _BlankIsNotGiven:
    """The empty string is "not given" (seed exports write ""), as a missing value or null is."""

    def run_validation(self, data=empty):
        return super().run_validation(empty if data == "" else data)


def _or_not_given(schema: dict) -> dict:
    """An optional value the import takes as "not given" when it is the empty string, as it does null."""
    return {"anyOf": [schema, {"type": "string", "enum": [""]}]}


class _Uuid(strict.UUIDField):
    to_internal_value = _parsed_by(_uuid)


@extend_schema_field(_or_not_given({"type": "string", "format": "uuid"}))
class _OptionalUuid(_BlankIsNotGiven, _Uuid):
    pass


@extend_schema_field(_or_not_given({"type": "string", "format": "date-time"}))
class _DateTime(_BlankIsNotGiven, serializers.DateTimeField):
    to_internal_value = _parsed_by(_datetime)


@extend_schema_field(_or_not_given({"type": "string", "format": "date"}))
class _Date(_BlankIsNotGiven, strict.DateField):
    """A date; a date-time's date part is kept."""

    def to_internal_value(self, data):
        if not isinstance(data, str):  # 20260101 is not the date "20260101"
            raise serializers.ValidationError(f"{data!r} is not an ISO date (YYYY-MM-DD, a string).")
        try:
            return dt.date.fromisoformat(data[:10])
        except ValueError:
            raise serializers.ValidationError(f"{data!r} is not an ISO date (YYYY-MM-DD).") from None


class _Ids(serializers.ListField):
    """Thought ids, each once, in the order given; ``max_length`` bounds how many (None: any number), checked
    before a single id is parsed."""

    default_error_messages = {"max_length": "at most {max_length} thought ids, as a memory call takes."}

    def __init__(self, *, max_length: int | None = MAX_ID_LIST, **kwargs):
        super().__init__(child=_Uuid(), default=list, max_length=max_length, **kwargs)

    def to_internal_value(self, data):
        if self.max_length is not None and isinstance(data, list) and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return list(dict.fromkeys(super().to_internal_value(data)))


class _Vector(serializers.ListField):
    to_internal_value = _parsed_by(_vector)

    def __init__(self):
        super().__init__(
            child=serializers.FloatField(min_value=-FLOAT32_MAX, max_value=FLOAT32_MAX),  # stored as float32
            min_length=EMBEDDING_DIMENSIONS,
            max_length=EMBEDDING_DIMENSIONS,
            default=None,
            help_text=f"{EMBEDDING_DIMENSIONS} numbers; computed when absent.",
        )


class _Number(strict.FloatField):
    """A finite JSON number within the field's bounds (strict.FloatField), in the import's words."""

    default_error_messages = {
        "invalid": "must be a finite number.",
        "not_a_number": "must be a number, not {type}.",
        "min_value": "must be at least {min_value}.",
        "max_value": "must be at most {max_value}; an import over the API refuses more.",
    }


class _Bounded(_Number):
    """A restored number within what Colony's own formulas give (the operator's restore)."""

    default_error_messages = {"max_value": "must be at most {max_value}, the most Colony's formulas give."}


class _Integer(strict.IntegerField):
    default_error_messages = {
        "min_value": "must be at least {min_value}.",
        "max_value": "must be at most {max_value}.",
    }


def _text(max_length: int | None = None, **kwargs) -> strict.CharField:
    """Text kept as sent (no trimming); missing or null is ""."""
    return strict.CharField(max_length=max_length, allow_blank=True, trim_whitespace=False, default="", **kwargs)


def _texts(max_chars: int, **kwargs) -> serializers.ListField:
    """Texts of at most ``max_chars`` each; ``max_length`` bounds how many."""
    child = strict.CharField(max_length=max_chars, allow_blank=True, trim_whitespace=False)
    return serializers.ListField(child=child, default=list, **kwargs)


_CONTENT_REQUIRED = dict.fromkeys(("required", "blank"), "is required: the text of the thought (any length).")


def _not_blank(value: str) -> None:
    if not value.strip():
        raise serializers.ValidationError("is required: the text of the thought (any length).")


@extend_schema_field(
    {
        "description": f"An object; a string is kept as {{'text': ...}}. At most {CONTEXT_METADATA_MAX_CHARS} "
        "characters of JSON.",
        "anyOf": [
            {"type": "null"},
            {"type": "string", "pattern": NO_NUL_PATTERN},
            {"type": "object", "propertyNames": {"pattern": NO_NUL_PATTERN}, "additionalProperties": JSON_VALUE_REF},
        ],
    }
)
class _Metadata(serializers.JSONField):
    """An object; ``max_chars`` bounds its compact JSON, a larger one refused as ``door``'s bound. Its keys and
    strings are stored as the API stores text (``api.text.json_storable``, as a task's DNA is): other agents
    read it (``GET /api/v1/thoughts/{id}``)."""

    def __init__(self, *, max_chars: int = CONTEXT_METADATA_MAX_CHARS, door: str = "an import over the API"):
        self.max_chars, self.door = max_chars, door
        super().__init__(default=dict)

    def to_internal_value(self, data):
        if isinstance(data, str):
            data = {"text": data}
        if not isinstance(data, dict):
            raise serializers.ValidationError("must be an object (a string is kept as {'text': ...}).")
        size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")))  # as sent, as CharField's max_length
        if size > self.max_chars:
            raise serializers.ValidationError(
                f"at most {self.max_chars} characters of JSON (got {size}); {self.door} refuses more."
            )
        return json_storable(data)


_COUNT = {"type": "integer", "minimum": 0, "maximum": COUNTER_MAX}


@extend_schema_field(
    {
        "description": f"{{thought id: count}} (or the seed brain's [{{thought_id, count}}]); at most "
        f"{pheromones.CO_RETRIEVAL_PARTNERS_MAX} partners.",
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "propertyNames": {"format": "uuid"},
                "additionalProperties": _COUNT,
                "maxProperties": pheromones.CO_RETRIEVAL_PARTNERS_MAX,
            },
            {
                "type": "array",
                "maxItems": pheromones.CO_RETRIEVAL_PARTNERS_MAX,
                "items": {
                    "type": "object",
                    "required": ["thought_id", "count"],
                    "properties": {"thought_id": {"type": "string", "format": "uuid"}, "count": _COUNT},
                    "additionalProperties": JSON_VALUE_REF,  # other keys of a seed entry are ignored
                },
            },
        ],
    }
)
class _CoRetrieved(serializers.JSONField):
    """{thought id: count}, or the seed brain's [{thought_id, count}]; ``max_partners`` and
    ``max_count`` bound it (None: only what the column holds). With ``ids_only`` every partner is a
    thought id (a UUID, stored in its canonical form), as the reinforcement writes them; the operator's
    restore also keeps a seed dump's own partner keys."""

    SHAPE = "must be {id: count} or [{thought_id, count}]."

    def __init__(self, *, max_partners: int | None, max_count: int, ids_only: bool = True):
        self.max_partners, self.max_count, self.ids_only = max_partners, max_count, ids_only
        super().__init__(default=dict)

    def to_internal_value(self, data):
        if isinstance(data, list):
            if not all(
                isinstance(e, dict) and e.keys() >= {"thought_id", "count"} and isinstance(e["thought_id"], str)
                for e in data
            ):
                raise serializers.ValidationError(self.SHAPE)
            data = {e["thought_id"]: e["count"] for e in data}
        if not isinstance(data, dict):
            raise serializers.ValidationError(self.SHAPE)
        data = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in data.items()}
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= INT_MAX for v in data.values()):
            raise serializers.ValidationError(self.SHAPE)
        if self.max_partners is not None and len(data) > self.max_partners:
            raise serializers.ValidationError(f"at most {self.max_partners} partners (got {len(data)}).")
        if any(v > self.max_count for v in data.values()):
            raise serializers.ValidationError(f"each count at most {self.max_count}.")
        if self.ids_only:
            wrong = next((k for k in data if not _CANONICAL_UUID.fullmatch(k)), None)
            if wrong is not None:
                shown = wrong if len(wrong) <= 40 else f"{wrong[:40]}..."
                raise serializers.ValidationError(
                    f"each partner is a thought id (a UUID, 8-4-4-4-12 hex digits); {shown!r} is not."
                )
            data = {str(uuid.UUID(k)): v for k, v in data.items()}
        return data


class _Category(_BlankIsNotGiven, strict.ChoiceField):
    """A thought category; an agent's import refuses transition markers with a message saying who writes them."""

    def to_internal_value(self, data):
        if data == ThoughtCategory.TRANSITION_MARKER and data not in self.choices:
            raise serializers.ValidationError(
                "markers are written by task transitions; an operator restores them with manage.py brain import."
            )
        return super().to_internal_value(data)


class _Choice(_BlankIsNotGiven, strict.ChoiceField):
    pass


# --- the item ------------------------------------------------------------------------------------------
_SKEW_NOTE = f" (a time up to {CLOCK_SKEW.seconds // 60} minutes ahead, another clock's skew, is stored as now)"
_OWN_ACCESS_ONLY = (
    "leave it out or give your own agent name: other agents' accesses are recorded by their own retrievals "
    "(the operator's manage.py brain import restores them)."
)


class ImportItemSerializer(FieldsReusedPerThread, strict.Serializer):
    """One thought to import over the API (``null`` or an empty string means "not given" for optional fields).

    An import over the API restores the caller's own thoughts: a value outside these rules is
    refused (400 naming the field), never clamped. ``manage.py brain import`` restores an export as
    it is (other agents, markers, ids).

    Rules across items and the space, each a 400 ``IMPORT_INVALID`` naming the line: an ``id``
    appears once in the batch (one that is a thought of the caller's space, or was stored from the
    same ``id`` before, is a 409 ``IMPORT_CONFLICT``); every reference (``source_ids``,
    ``supersedes``, ``refined_by``, ``superseded_by``, ``contradicted_by``, ``related_thoughts``)
    names a thought of the batch or of the space, and a thought is not related to itself; a
    ``contradicted_by`` names a correction; a refinement, consolidation or correction does not
    supersede a transition marker; ``refined_by``
    and ``superseded_by`` name only an item of the batch that supersedes this one (retrieval serves
    the thought they point to as this one's replacement).

    Per item: ``retracted`` in ``quality_flags`` goes with ``superseded`` true, and a
    ``context_metadata.retraction`` record only with that flag (``_check_retraction``); the keys of
    ``context_metadata`` Colony owns (``imported``, ``retraction``) are written by the import from the
    token and the clock (``brain.transfer.services._server_owned_written``)."""

    id = _OptionalUuid(
        help_text="Names the item within the batch (references may use it); the thought is stored under a new id, "
        "given in the answer's id_map.",
        default=None,
    )
    kind = serializers.JSONField(required=False, help_text="Ignored (export files carry it).")
    content = strict.CharField(
        max_length=PROMPT_MAX_CHARS,
        trim_whitespace=False,
        validators=[_not_blank],
        error_messages=_CONTENT_REQUIRED,
        help_text="Required; as long as a memory call's prompt at most (no contribution threshold).",
    )
    context_metadata = _Metadata()
    contributor_id = _text(100, help_text="Left out, or the caller's agent name.")
    contributor_name = _text(200, help_text="Left out, or the caller's agent name.")
    agent = _text(100, help_text="Left out, or the caller's agent name.")
    created_at = _DateTime(help_text=f"Kept when no later than now{_SKEW_NOTE}; default now.", default=None)
    thought_type = _Choice(choices=ThoughtType.choices, allow_blank=True, default=ThoughtType.ORIGINAL)
    source_ids = _Ids()
    tags = _texts(100, max_length=MAX_TAGS)
    thought_category = _Category(
        choices=[c for c in ThoughtCategory.choices if c[0] != ThoughtCategory.TRANSITION_MARKER],
        allow_blank=True,
        default=ThoughtCategory.UNCATEGORIZED,
        help_text="Not transition_marker: markers are written by task transitions.",
    )
    topic = _text(TOPIC_MAX_CHARS)
    temporal_scope = _Date(help_text="Today or earlier; a date-time's date part is kept.", default=None)
    source_ref = SourceRefSerializer(default=None, allow_null=True)
    alternatives_considered = _text(FACT_MAX_CHARS)
    corrected_fact = _text(FACT_MAX_CHARS)
    correct_fact = _text(FACT_MAX_CHARS)
    supersedes = _Ids()
    quality_flags = serializers.ListField(child=strict.ChoiceField(choices=QualityFlag.choices), default=list)
    superseded = strict.BooleanField(default=False)
    superseded_at = _DateTime(help_text=f"No later than now{_SKEW_NOTE}.", default=None)
    superseded_by = _OptionalUuid(
        help_text="A correction of the batch whose supersedes list this item; derived from it when left out.",
        default=None,
    )
    refined_by = _OptionalUuid(
        help_text="A refinement or consolidation of the batch whose source_ids list this item; derived from it "
        "when left out.",
        default=None,
    )
    contradicted_by = _OptionalUuid(
        help_text="A correction of the batch or the space whose corrected_fact this item repeats.", default=None
    )
    related_thoughts = _Ids()
    embedding = _Vector()
    corrected_fact_embedding = _Vector()
    embedding_model = _text(200)
    pheromone_weight = _Number(min_value=pheromones.DECAY_FLOOR, max_value=PHEROMONE_MAX, default=1.0)
    access_count = _Integer(min_value=0, max_value=COUNTER_MAX, default=0)
    last_accessed = _DateTime(help_text=f"No later than now{_SKEW_NOTE}.", default=None)
    accessed_by = _texts(
        100,
        max_length=1,
        error_messages={"max_length": _OWN_ACCESS_ONLY},
        help_text="Left out, or [the caller's agent name]: other agents' accesses come from their own retrievals.",
    )
    co_retrieved_with = _CoRetrieved(max_partners=pheromones.CO_RETRIEVAL_PARTNERS_MAX, max_count=COUNTER_MAX)
    usage_score = _Number(min_value=0, max_value=1, default=None)
    contradiction_score = _Number(min_value=0, max_value=1, default=None)
    effective_confidence = _Number(min_value=0, max_value=AGENT_IMPORT_CONFIDENCE_MAX, default=1.0)

    #: Who and when come from the token and the clock (``context``: ``agent``, ``now``).
    checks_identity = True
    unknown_field_hints = ITEM_FIELD_HINTS

    def validate_temporal_scope(self, value: dt.date | None) -> dt.date | None:
        return temporal_scope_checked(value)

    def validate_topic(self, value: str) -> str:
        return topic_normal(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["id"] is not None and attrs["id"] in attrs["related_thoughts"]:
            raise serializers.ValidationError({"related_thoughts": "a thought can't be related to itself."})
        if self.checks_identity:
            self._check_identity(attrs)
            self._check_retraction(attrs)
        self._check_dates(attrs)
        return attrs

    def _check_dates(self, attrs: dict[str, Any]) -> None:
        """Dates are no later than now (plus ``CLOCK_SKEW``, within which a date is stored as now): a
        thought is never dated after it was stored, which the task gates rely on (an export is restored
        by the operator as it is, but no file dates a thought in the future)."""
        now = self.context.get("now") or timezone.now()
        for field in ("created_at", "last_accessed", "superseded_at"):
            try:
                attrs[field] = not_after_now(attrs[field], now=now)
            except ValueError as exc:
                raise serializers.ValidationError({field: str(exc)}) from None

    def _check_retraction(self, attrs: dict[str, Any]) -> None:
        """A retracted item is in the state a retraction leaves: the ``retracted`` flag goes with
        ``superseded`` true, and a ``context_metadata.retraction`` record only with that flag. The record
        itself is Colony's: the import writes it again from the token and the clock (who, when, whether
        the text is erased), keeping only the reason an export gave."""
        retracted = QualityFlag.RETRACTED in attrs["quality_flags"]
        if retracted and not attrs["superseded"]:
            raise serializers.ValidationError(
                {
                    "quality_flags": "'retracted' goes with superseded true: a retracted thought is superseded "
                    "without a replacement. Leave 'retracted' out to import a live thought (POST "
                    "/api/v1/thoughts/{id}/retract retracts it afterwards), or send superseded true."
                }
            )
        if RETRACTION_KEY in attrs["context_metadata"] and not retracted:
            raise serializers.ValidationError(
                {
                    f"context_metadata.{RETRACTION_KEY}": f"{RETRACTION_KEY!r} is the record Colony writes when a "
                    "thought is retracted: leave it out of a live thought's context_metadata, or send the thought "
                    "retracted (quality_flags 'retracted', superseded true) and the import writes the record as "
                    "your retraction, now."
                }
            )

    def _check_identity(self, attrs: dict[str, Any]) -> None:
        """``agent``, ``contributor_id``, ``contributor_name`` and ``accessed_by`` are left out or the
        caller's own name."""
        name = self.context["agent"].name
        for field in ("agent", "contributor_id", "contributor_name"):
            if attrs[field] not in ("", name):
                raise serializers.ValidationError(
                    {
                        field: f"an import over the API stores your own thoughts: leave {field!r} out or give your own "
                        f"name ({name!r}). Only the operator's manage.py brain import restores other agents' thoughts."
                    }
                )
        if attrs["accessed_by"] not in ([], [name]):
            raise serializers.ValidationError({"accessed_by": f"{_OWN_ACCESS_ONLY} Yours is {name!r}."})


class RestoreItemSerializer(ImportItemSerializer):
    """The operator's restore (``manage.py brain import``): other agents' thoughts, any past date,
    transition markers, texts up to RESTORE_TEXT_MAX_CHARS, a context_metadata up to
    RESTORE_CONTEXT_METADATA_MAX_CHARS of JSON and id lists of any length. Numbers are
    those Colony's formulas give (a pheromone weight up to PHEROMONE_MAX, an effective confidence up to
    RESTORE_CONFIDENCE_MAX, usage and contradiction scores between 0 and 1) and a thought has at most
    MAX_TAGS tags, as every door takes: a hand-edited dump stores nothing no door of Colony could have."""

    content = strict.CharField(
        max_length=RESTORE_TEXT_MAX_CHARS,
        trim_whitespace=False,
        validators=[_not_blank],
        error_messages={
            **_CONTENT_REQUIRED,
            "max_length": "at most {max_length} characters, what the full-text index holds of one text: split "
            "it into several thoughts in the file.",
        },
    )
    thought_category = _Category(
        choices=ThoughtCategory.choices, allow_blank=True, default=ThoughtCategory.UNCATEGORIZED
    )
    tags = _texts(
        100, max_length=MAX_TAGS, error_messages={"max_length": "at most {max_length} tags, as a memory call takes."}
    )
    source_ref = serializers.DictField(default=None)
    alternatives_considered = _text(RESTORE_TEXT_MAX_CHARS)
    corrected_fact = _text(RESTORE_TEXT_MAX_CHARS)
    correct_fact = _text(RESTORE_TEXT_MAX_CHARS)
    source_ids = _Ids(max_length=None)
    supersedes = _Ids(max_length=None)
    related_thoughts = _Ids(max_length=None)
    superseded_by = _OptionalUuid(default=None)
    refined_by = _OptionalUuid(default=None)
    accessed_by = _texts(100)
    pheromone_weight = _Bounded(min_value=0, max_value=PHEROMONE_MAX, default=1.0)
    access_count = _Integer(min_value=0, max_value=INT_MAX, default=0)
    context_metadata = _Metadata(max_chars=RESTORE_CONTEXT_METADATA_MAX_CHARS, door="a restore")
    co_retrieved_with = _CoRetrieved(max_partners=None, max_count=INT_MAX, ids_only=False)
    usage_score = _Bounded(min_value=0, max_value=1, default=None)
    contradiction_score = _Bounded(min_value=0, max_value=1, default=None)
    effective_confidence = _Bounded(min_value=0, max_value=RESTORE_CONFIDENCE_MAX, default=1.0)

    checks_identity = False


def _first_error(detail: Any) -> tuple[str, str]:
    """(field, message) of the first error of a serializer's ``detail``; a nested one is named by its field."""
    field = ""
    if isinstance(detail, dict):
        field, detail = next(iter(detail.items()))
        field = "" if field == "non_field_errors" else field
    while isinstance(detail, (dict, list)):
        detail = next(iter(detail.values())) if isinstance(detail, dict) else detail[0]
    return field, str(detail)


def clean_each(rows: list[Any], clean) -> tuple[list[tuple[int, Any, dict[str, Any]]], list[tuple[int, _Bad]]]:
    """Every row through ``clean`` (``item_clean``, ``querylog_clean``...): (number, raw row, cleaned row)
    of those it accepts and (number, the refusal) of the others, numbered from 1."""
    accepted, refused = [], []
    for number, raw in enumerate(rows, start=1):
        try:
            accepted.append((number, raw, clean(raw)))
        except _Bad as bad:
            refused.append((number, bad))
    return accepted, refused


def item_clean(item: Any, serializer: ImportItemSerializer | None = None) -> dict[str, Any]:
    """One import item as model values, checked by ``serializer`` (default: the operator's restore);
    raises ``_Bad`` naming the first wrong field. An item without an id gets a new one."""
    if not isinstance(item, dict):
        raise _Bad("", "each item must be a JSON object with the thought fields of SPEC 2.1.")
    _require_storable({k: v for k, v in item.items() if k not in VECTOR_FIELDS})
    serializer = serializer or RestoreItemSerializer()
    try:  # an unknown key is refused and null is "not given" (strict.Serializer)
        row = serializer.run_validation(item)
    except serializers.ValidationError as exc:
        raise _Bad(*_first_error(exc.detail)) from None
    row.pop("kind", None)
    if row["id"] is None:
        row["id"] = uuid.uuid4()
    return row


# --- query-log rows and correction suggestions of a dump (operator only) -------------------------------
def _text_value(value: Any, name: str, max_length: int | None = None) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Bad(name, "must be a string.")
    if max_length is not None and len(value) > max_length:
        raise _Bad(name, f"at most {max_length} characters (got {len(value)}).")
    return value


def _optional_uuid(value: Any, name: str) -> uuid.UUID | None:
    return None if value in (None, "") else _uuid(value, name)


def _short_text(value: Any, name: str, max_length: int) -> str:
    """Text cut to the column's length, as the seed brain's logs need (their ids may be longer); a
    number is taken as its text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return _text_value(value, name)[:max_length]


def _choice_value(value: Any, name: str, choices: list[str], default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or value not in choices:
        raise _Bad(name, f"{value!r} is not one of: {', '.join(choices)}.")
    return value


def _confidence(value: Any) -> float:
    if not _finite_number(value) or not 0 <= value <= 1:
        raise _Bad("confidence", "must be a finite number between 0 and 1.")
    return value


def _finite_number(value: Any) -> bool:
    """Whether ``value`` is a JSON number a float holds (an integer of hundreds of digits is not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def querylog_clean(row: Any) -> dict[str, Any]:
    """One query-log row of a dump ({agent, agent_ref, session_id, query_text, results,
    stored_thought, created_at}) as model values; raises ``_Bad`` naming the first wrong field. Its text
    is at most RESTORE_TEXT_MAX_CHARS and its results at most QUERY_RESULTS_MAX, as a thought's are."""
    if not isinstance(row, dict):
        raise _Bad("", "each query-log row must be a JSON object.")
    _require_storable(row)
    results = row.get("results")
    results = [] if results is None else results
    if isinstance(results, list) and len(results) > QUERY_RESULTS_MAX:
        raise _Bad("results", f"at most {QUERY_RESULTS_MAX} results (got {len(results)}); a memory call names fewer.")
    if not isinstance(results, list) or not all(
        isinstance(r, dict) and (r.get("score") is None or _finite_number(r.get("score"))) for r in results
    ):
        raise _Bad("results", "must be a list of {id, score} objects, each score a finite number or null.")
    return {
        "agent": _short_text(row.get("agent"), "agent", 100),
        "agent_ref": _short_text(row.get("agent_ref"), "agent_ref", 100),
        "session_id": _short_text(row.get("session_id"), "session_id", 100),
        "query_text": _text_value(row.get("query_text"), "query_text", RESTORE_TEXT_MAX_CHARS),
        "results": results,
        "stored_thought": _optional_uuid(row.get("stored_thought"), "stored_thought"),
        "created_at": _past(_datetime(row.get("created_at"), "created_at")) or timezone.now(),
    }


def not_after_now(value: dt.datetime | None, *, now: dt.datetime) -> dt.datetime | None:
    """``value`` no later than ``now``: a time within CLOCK_SKEW ahead (another clock's skew) is ``now``, a
    later one a ValueError. The memory gates count a thought or a query after the task's phase began, so
    anything dated ahead would count in every later phase."""
    if value is None:
        return None
    if value > now + CLOCK_SKEW:
        raise ValueError(f"{value.isoformat()} is in the future; an import keeps times no later than now.")
    return min(value, now)


def _past(value: dt.datetime | None, name: str = "created_at") -> dt.datetime | None:
    """A query-log row's or a suggestion's time, by :func:`not_after_now`."""
    try:
        return not_after_now(value, now=timezone.now())
    except ValueError as exc:
        raise _Bad(name, str(exc)) from None


def suggestion_clean(row: Any) -> dict[str, Any]:
    """One correction suggestion of a Colony export as model values; raises ``_Bad``. Its texts are at
    most RESTORE_TEXT_MAX_CHARS, its confidence between 0 and 1, its times no later than now."""
    if not isinstance(row, dict):
        raise _Bad("", "each correction suggestion must be a JSON object.")
    _require_storable(row)
    if row.get("thought") in (None, ""):
        raise _Bad("thought", "is required: the id of the thought the suggestion is about.")
    draft = row.get("draft")
    draft = {} if draft is None else draft
    problem = draft_problem(draft)
    if problem:
        raise _Bad("draft", f"{problem}.")
    return {
        "id": _optional_uuid(row.get("id"), "id") or uuid.uuid4(),
        "thought": _uuid(row["thought"], "thought"),
        "statement": _text_value(row.get("statement"), "statement", RESTORE_TEXT_MAX_CHARS),
        "contradicting_thought": _optional_uuid(row.get("contradicting_thought"), "contradicting_thought"),
        "draft": draft,
        "origin": _choice_value(
            row.get("origin"), "origin", SuggestionOrigin.values, SuggestionOrigin.CONTRADICTION_DETECTOR
        ),
        "confidence": _confidence(row.get("confidence", 0.0)),
        "reason": _text_value(row.get("reason"), "reason", RESTORE_TEXT_MAX_CHARS),
        "agent": _text_value(row.get("agent"), "agent", 100),
        "session_id": _text_value(row.get("session_id"), "session_id", 100),
        "status": _choice_value(row.get("status"), "status", SuggestionStatus.values, SuggestionStatus.PENDING),
        "created_at": _past(_datetime(row.get("created_at"), "created_at")) or timezone.now(),
        "resolved_at": _past(_datetime(row.get("resolved_at"), "resolved_at"), "resolved_at"),
        "resolved_by": _text_value(row.get("resolved_by"), "resolved_by", 200),
        "correction": _optional_uuid(row.get("correction"), "correction"),
    }
