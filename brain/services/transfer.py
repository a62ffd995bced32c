"""Bulk import and export of a space's brain (issue 14 item 4).

Imports restore knowledge, they are not contributions: every note is kept however short (no
contribution threshold), categories need not carry their required fields, and quality flags,
pheromones and access counts are taken as given (nothing is computed from the agent's searches).
Two modes (:class:`ImportMode`): the operator's CLI restore keeps everything an export carries (other
agents, dates, markers, ids); an agent's import over the API restores its own thoughts only, every
value checked by :func:`agent_item_check` and stored under new ids.

- :func:`thoughts_import` stores one batch (at most ``settings.IMPORT_BATCH_MAX_ITEMS`` items) in
  one transaction, all or nothing: every item is validated first and the per-line errors come back
  together; then the items without a vector are embedded in one ``embed_many`` call (before the
  transaction opens), and the rows are written with one ``COPY`` (:func:`_copy_thoughts`).
- References (``source_ids``, ``supersedes``, ``refined_by``, ``superseded_by``, ``contradicted_by``,
  ``related_thoughts``) must name a thought of the same batch or of the caller's space; an id of
  another space is reported exactly like an unknown one. With ``derive_lineage`` (the API, Mem0 and
  seed-brain dumps) an imported refinement/consolidation supersedes its sources and an imported
  correction the thoughts it names, as a live contribution would. Colony's own export carries those
  states explicitly and is imported as it is (``derive_lineage=False``, links applied after the
  last batch by :func:`thoughts_import_links`).
- :func:`space_export_rows` yields Colony's own export: a header, then every thought (vectors
  included), query-log row and correction suggestion of the space. Importing it into an empty
  space gives back the same export, row for row.
"""

from __future__ import annotations

import datetime as dt
import enum
import heapq
import json
import logging
import math
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import DatabaseError, DataError, IntegrityError, connection, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from brain import embedding as embedder
from brain.choices import QualityFlag, SuggestionOrigin, SuggestionStatus, ThoughtCategory, ThoughtType, topic_normal
from brain.inputs import PROMPT_MAX_CHARS
from brain.models import EMBEDDING_DIMENSIONS, CorrectionSuggestion, QueryLog, Thought
from brain.ranking import PHEROMONE_MAX
from brain.services import pheromones
from brain.services.thoughts import thought_columns
from core.errors import ApplicationError, ServiceFailure, name_hint
from core.fields import UNKNOWN_NAMED
from core.models import Agent, Space
from core.parsers import unstorable_paths

logger = logging.getLogger("colony.brain.transfer")

EXPORT_FORMAT = "colony-export"
EXPORT_VERSION = 1

#: Plain (non-reference) thought fields an import item may carry, with Colony's own names (SPEC 2.1).
VALUE_FIELDS = (
    "content",
    "context_metadata",
    "contributor_id",
    "contributor_name",
    "created_at",
    "thought_type",
    "tags",
    "thought_category",
    "topic",
    "temporal_scope",
    "source_ref",
    "alternatives_considered",
    "corrected_fact",
    "correct_fact",
    "quality_flags",
    "superseded",
    "superseded_at",
    "embedding_model",
    "pheromone_weight",
    "access_count",
    "last_accessed",
    "accessed_by",
    "co_retrieved_with",
    "usage_score",
    "contradiction_score",
    "effective_confidence",
)
#: Array references (stored as arrays of ids) and foreign-key references.
ARRAY_REFS = ("source_ids", "supersedes")
FK_REFS = ("refined_by", "superseded_by", "contradicted_by")
#: Vectors are stored as float32: a value beyond this would not stay finite (a little below float32's largest).
FLOAT32_MAX = 3.4e38
VECTOR_FIELDS = ("embedding", "corrected_fact_embedding")
#: How far in the future an agent's import may date a thought (its clock and the server's differ a little).
CLOCK_SKEW = dt.timedelta(minutes=5)
#: The largest effective confidence SPEC 4.4's formula gives: ``1 + ALPHA·usage − BETA·contradiction``
#: with usage 1 and contradiction 0 (quality.formulas: ALPHA = 0.5). brain can't import quality.
EFFECTIVE_CONFIDENCE_MAX = 1.5
COUNTER_MAX = pheromones.COUNTER_MAX
ITEM_FIELDS = frozenset(("id", "agent", "related_thoughts", *VALUE_FIELDS, *ARRAY_REFS, *FK_REFS, *VECTOR_FIELDS))


class ImportInvalid(ApplicationError):
    """400: some lines of the batch are invalid; nothing of the batch was stored."""

    default_code = "IMPORT_INVALID"


class ImportConflict(ImportInvalid):
    """409: the batch is valid but some of its ids are taken by existing thoughts; nothing was stored."""

    status_code = 409
    default_code = "IMPORT_CONFLICT"


class ImportTooLarge(ApplicationError):
    status_code = 413
    default_code = "IMPORT_TOO_LARGE"


@dataclass
class LineError:
    line: int
    message: str
    field: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "field": self.field, "message": self.message}


class ImportMode(enum.StrEnum):
    """Who is importing, which decides what a batch may carry (SPEC 6)."""

    #: ``POST /thoughts/import``: an agent restoring its own thoughts (see :func:`agent_item_check`).
    AGENT = "agent"
    #: ``manage.py brain import``: the operator's full-fidelity restore of an export or a dump.
    OPERATOR = "operator"


#: Names the id an agent's import stores for an item that gives one: uuid5(this, space + given id).
#: The same item sent again gets the same id, which is then taken in the space: a 409, not a copy.
AGENT_ID_NAMESPACE = uuid.UUID("6f6c6f6e-792d-4269-8d70-6f7274000002")


@dataclass
class ImportResult:
    ids: list[str] = field(default_factory=list)
    id_map: dict[str, str] = field(default_factory=dict)  # an agent import: {id given: id stored}
    embedded: int = 0
    deferred_links: list[tuple[str, str, str]] = field(default_factory=list)


# --- validation -------------------------------------------------------------------------------------
class _Bad(Exception):
    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name
        self.message = message


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
            parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            raise _Bad(name, f"{value!r} is not an ISO 8601 date-time.")
    if timezone.is_naive(parsed):
        return timezone.make_aware(parsed, dt.UTC)
    try:  # in UTC: PostgreSQL takes offsets up to 15:59 only, ISO 8601 allows 23:59
        return parsed.astimezone(dt.UTC)
    except OverflowError:
        raise _Bad(name, f"{value!r} is out of range.")


def _date(value: Any, name: str) -> dt.date | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):  # 20260101 is not the date "20260101"
        raise _Bad(name, f"{value!r} is not an ISO date (YYYY-MM-DD, a string).")
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError:
        raise _Bad(name, f"{value!r} is not an ISO date (YYYY-MM-DD).")


def _text(value: Any, name: str, max_length: int | None = None) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Bad(name, "must be a string.")
    if max_length is not None and len(value) > max_length:
        raise _Bad(name, f"at most {max_length} characters (got {len(value)}).")
    return value


def _string_list(value: Any, name: str, max_length: int) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Bad(name, "must be a list of strings.")
    for v in value:
        if len(v) > max_length:
            raise _Bad(name, f"each entry at most {max_length} characters.")
    return value


def _number(value: Any, name: str, *, nullable: bool = False, integer: bool = False, minimum: float | None = None):
    if value is None and nullable:
        return None
    if integer and isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON's 3.0 is the integer 3, as everywhere in the API
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise _Bad(name, "must be an integer." if integer else "must be a number.")
    if not math.isfinite(value):
        raise _Bad(name, "must be a finite number.")
    if minimum is not None and value < minimum:
        raise _Bad(name, f"must be at least {minimum}.")
    if integer and value > 2**31 - 1:
        raise _Bad(name, "is too large.")
    return value


def _vector(value: Any, name: str):
    """A 384-float vector as a numpy array (checked in C: the import's hot loop). A float32 array is
    one a file reader compacted with :func:`vector_compact`."""
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.dtype == np.float32 and value.shape == (EMBEDDING_DIMENSIONS,):
        if not np.isfinite(value).all():
            raise _Bad(name, f"must hold finite numbers between -{FLOAT32_MAX:g} and {FLOAT32_MAX:g} only.")
        return value
    if not isinstance(value, list) or len(value) != EMBEDDING_DIMENSIONS or not set(map(type, value)) <= {int, float}:
        raise _Bad(name, f"must be a list of {EMBEDDING_DIMENSIONS} numbers (or left out to embed on import).")
    exact = np.asarray(value, dtype=np.float64)
    if not (np.abs(exact) <= FLOAT32_MAX).all():  # NaN fails the comparison too
        raise _Bad(name, f"must hold finite numbers between -{FLOAT32_MAX:g} and {FLOAT32_MAX:g} only.")
    return exact.astype(np.float32)


def vector_compact(value: Any) -> Any:
    """``value`` as the float32 array :func:`_vector` makes of it (1.5 KB, where a list of 384 Python
    floats takes ~12 KB), or unchanged when it is not a vector, for :func:`item_clean` to report with
    its item. File readers call it as they read (``brain.importers``)."""
    try:
        return _vector(value, "embedding")
    except _Bad:
        return value


def _choice(value: Any, name: str, choices: Iterable[str], default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or value not in set(choices):
        raise _Bad(name, f"{value!r} is not one of: {', '.join(choices)}.")
    return value


def _require_storable(fields: dict[str, Any]) -> None:
    """Raise ``_Bad`` naming the first text PostgreSQL can't store: a NUL, or a lone surrogate (which
    psycopg can't encode: it was a 500 for the whole batch)."""
    found = unstorable_paths(fields)
    if found:
        path, message = next(iter(found.items()))
        raise _Bad(path, message)


def _given(item: dict, name: str, default):
    """``item[name]``, or ``default`` when it is missing or null."""
    value = item.get(name)
    return default if value is None else value


#: Other dumps' names for an import item's fields: a Mem0 get_all() item's "memory", a hand-written "text".
#: The API takes Colony's own fields; ``manage.py brain import FILE`` reads Mem0 and seed-brain dumps as they are.
ITEM_FIELD_HINTS = {
    "memory": "the text goes in 'content' (a Mem0 get_all() dump is read as it is by manage.py brain import FILE).",
    **dict.fromkeys(("text", "prompt", "body"), "the text goes in 'content'."),
}


def item_clean(item: Any) -> dict[str, Any]:
    """One import item as model values; raises ``_Bad`` naming the first wrong field."""
    if not isinstance(item, dict):
        raise _Bad("", "each item must be a JSON object with the thought fields of SPEC 2.1.")
    _require_storable({k: v for k, v in item.items() if k not in VECTOR_FIELDS})
    unknown = set(item) - ITEM_FIELDS - {"kind"}
    if unknown:  # the first few by name, with hints, and how many more: bounded whatever the line holds
        named = heapq.nsmallest(UNKNOWN_NAMED, unknown)
        hints = "".join(f" {name}:{hint}" for name in named if (hint := name_hint(name, ITEM_FIELDS, ITEM_FIELD_HINTS)))
        more = f" and {len(unknown) - len(named)} more" if len(unknown) > len(named) else ""
        raise _Bad(
            named[0],
            f"unknown field(s) {', '.join(named)}{more};{hints} allowed: {', '.join(sorted(ITEM_FIELDS))}.",
        )
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        raise _Bad("content", "is required: the text of the thought (any length).")
    out: dict[str, Any] = {"content": content}
    out["id"] = _uuid(item["id"], "id") if item.get("id") not in (None, "") else uuid.uuid4()
    metadata = item.get("context_metadata")
    if metadata is None:
        metadata = {}
    elif isinstance(metadata, str):
        metadata = {"text": metadata}
    elif not isinstance(metadata, dict):
        raise _Bad("context_metadata", "must be an object (a string is kept as {'text': ...}).")
    out["context_metadata"] = metadata
    out["contributor_id"] = _text(item.get("contributor_id"), "contributor_id", 100)
    out["contributor_name"] = _text(item.get("contributor_name"), "contributor_name", 200)
    out["agent"] = _text(item.get("agent"), "agent", 100)
    out["created_at"] = _datetime(item.get("created_at"), "created_at")
    out["thought_type"] = _choice(item.get("thought_type"), "thought_type", ThoughtType.values, ThoughtType.ORIGINAL)
    out["tags"] = _string_list(item.get("tags"), "tags", 100)
    out["thought_category"] = _choice(
        item.get("thought_category"), "thought_category", ThoughtCategory.values, ThoughtCategory.UNCATEGORIZED
    )
    out["topic"] = topic_normal(_text(item.get("topic"), "topic", 200))
    out["temporal_scope"] = _date(item.get("temporal_scope"), "temporal_scope")
    source_ref = item.get("source_ref")
    if source_ref is not None and not isinstance(source_ref, dict):
        raise _Bad("source_ref", "must be an object {type, value, project}.")
    out["source_ref"] = source_ref
    for name in ("alternatives_considered", "corrected_fact", "correct_fact"):
        out[name] = _text(item.get(name), name)
    flags = _string_list(item.get("quality_flags"), "quality_flags", 40)
    for flag in flags:
        _choice(flag, "quality_flags", QualityFlag.values, "")
    out["quality_flags"] = flags
    # null is "not given" for every optional field (as the API reads it, core.fields.Serializer): the default.
    superseded = _given(item, "superseded", False)
    if not isinstance(superseded, bool):
        raise _Bad("superseded", "must be true or false.")
    out["superseded"] = superseded
    out["superseded_at"] = _datetime(item.get("superseded_at"), "superseded_at")
    out["embedding_model"] = _text(item.get("embedding_model"), "embedding_model", 200)
    out["pheromone_weight"] = _number(_given(item, "pheromone_weight", 1.0), "pheromone_weight", minimum=0)
    out["access_count"] = _number(_given(item, "access_count", 0), "access_count", integer=True, minimum=0)
    out["last_accessed"] = _datetime(item.get("last_accessed"), "last_accessed")
    out["accessed_by"] = _string_list(item.get("accessed_by"), "accessed_by", 100)
    co = _given(item, "co_retrieved_with", {})
    if isinstance(co, list):  # the seed brain's [{thought_id, count}]; the counts are checked below
        if not all(
            isinstance(entry, dict) and entry.keys() >= {"thought_id", "count"} and isinstance(entry["thought_id"], str)
            for entry in co
        ):
            raise _Bad("co_retrieved_with", "must be {id: count} or [{thought_id, count}].")
        co = {entry["thought_id"]: entry["count"] for entry in co}
    if isinstance(co, dict):
        co = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in co.items()}
    if not isinstance(co, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**31 for v in co.values()
    ):
        raise _Bad("co_retrieved_with", "must be {id: count} or [{thought_id, count}].")
    out["co_retrieved_with"] = co
    out["usage_score"] = _number(item.get("usage_score"), "usage_score", nullable=True)
    out["contradiction_score"] = _number(item.get("contradiction_score"), "contradiction_score", nullable=True)
    out["effective_confidence"] = _number(_given(item, "effective_confidence", 1.0), "effective_confidence", minimum=0)
    for name in ARRAY_REFS:
        values = _given(item, name, [])
        if not isinstance(values, list):
            raise _Bad(name, "must be a list of thought ids.")
        out[name] = list(dict.fromkeys(_uuid(v, name) for v in values))
    for name in FK_REFS:
        out[name] = _uuid(item[name], name) if item.get(name) not in (None, "") else None
    related = item.get("related_thoughts")
    related = [] if related is None else related
    if not isinstance(related, list):
        raise _Bad("related_thoughts", "must be a list of thought ids.")
    out["related_thoughts"] = list(dict.fromkeys(_uuid(v, "related_thoughts") for v in related))
    if out["id"] in out["related_thoughts"]:
        raise _Bad("related_thoughts", "a thought can't be related to itself.")
    for name in VECTOR_FIELDS:
        out[name] = _vector(item.get(name), name)
    return out


def _within(value: float | None, name: str, low: float, high: float) -> None:
    if value is not None and not low <= value <= high:
        raise _Bad(name, f"must be between {low:g} and {high:g} (got {value:g}); an import over the API refuses it.")


def agent_item_check(row: dict[str, Any], *, agent: Agent, now: dt.datetime) -> None:
    """What an agent's import may carry beyond :func:`item_clean`'s shape; raises ``_Bad`` naming the field.

    Who and when come from the token and the clock: ``agent``, ``contributor_id`` and
    ``contributor_name`` are left out or the caller's own name, dates are no later than now (plus
    ``CLOCK_SKEW``). Weights, scores and counters stay in the range their formulas give, and a value
    outside is refused, not clamped. Transition markers and long texts (over a memory call's
    ``PROMPT_MAX_CHARS``) are the operator's CLI restore's only."""
    for name in ("agent", "contributor_id", "contributor_name"):
        if row[name] not in ("", agent.name):
            raise _Bad(
                name,
                f"an import over the API stores your own thoughts: leave {name!r} out or give your own name "
                f"({agent.name!r}). Only the operator's manage.py brain import restores other agents' thoughts.",
            )
    if row["thought_category"] == ThoughtCategory.TRANSITION_MARKER:
        raise _Bad(
            "thought_category",
            "markers are written by task transitions; an operator restores them with manage.py brain import.",
        )
    if len(row["content"]) > PROMPT_MAX_CHARS:
        raise _Bad(
            "content", f"at most {PROMPT_MAX_CHARS} characters, as a memory call's prompt (got {len(row['content'])})."
        )
    for name in ("created_at", "last_accessed", "superseded_at"):
        if row[name] is not None and row[name] > now + CLOCK_SKEW:
            raise _Bad(name, f"{row[name].isoformat()} is in the future; an import keeps times no later than now.")
    _within(row["pheromone_weight"], "pheromone_weight", pheromones.DECAY_FLOOR, PHEROMONE_MAX)
    _within(row["usage_score"], "usage_score", 0, 1)
    _within(row["contradiction_score"], "contradiction_score", 0, 1)
    _within(row["effective_confidence"], "effective_confidence", 0, EFFECTIVE_CONFIDENCE_MAX)
    _within(row["access_count"], "access_count", 0, COUNTER_MAX)
    co = row["co_retrieved_with"]
    if len(co) > pheromones.CO_RETRIEVAL_PARTNERS_MAX:
        raise _Bad("co_retrieved_with", f"at most {pheromones.CO_RETRIEVAL_PARTNERS_MAX} partners (got {len(co)}).")
    for count in co.values():
        _within(count, "co_retrieved_with", 0, COUNTER_MAX)


def _agent_ids(
    cleaned: list[tuple[int, dict[str, Any]]], given: dict[int, bool], space: Space
) -> dict[uuid.UUID, uuid.UUID]:
    """Give an agent import's rows their stored ids and point the batch's references at them; returns
    {id given: id stored}. An id given names the item within the batch only: what it is elsewhere on
    the server (another space's thought, or nothing) changes nothing in the answer."""
    mapping = {
        row["id"]: uuid.uuid5(AGENT_ID_NAMESPACE, f"{space.pk} {row['id']}") for line, row in cleaned if given[line]
    }
    for _, row in cleaned:
        row["given_id"] = row["id"] if row["id"] in mapping else None
        row["id"] = mapping.get(row["id"], row["id"])
        for name in (*ARRAY_REFS, "related_thoughts"):
            row[name] = [mapping.get(ref, ref) for ref in row[name]]
        for name in FK_REFS:
            row[name] = mapping.get(row[name], row[name])
        row["co_retrieved_with"] = {
            str(mapping.get(_as_uuid(key), key)): count for key, count in row["co_retrieved_with"].items()
        }
    return mapping


def _as_uuid(value: str) -> uuid.UUID | str:
    try:
        return uuid.UUID(value)
    except ValueError:
        return value


#: What refinements, consolidations and corrections may not supersede (SPEC 6: the audit trail).
_MARKER_REFUSED = "is a transition marker: markers are the workflow's audit trail and nothing supersedes them."


def _superseding_refs(row: dict[str, Any]) -> list[tuple[str, uuid.UUID]]:
    """(field, id) of each thought an imported row supersedes when lineage is derived (:func:`_derive_lineage`)."""
    refs = []
    if row["thought_type"] in (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION):
        refs += [("source_ids", ref) for ref in row["source_ids"]]
    if row["thought_category"] == ThoughtCategory.CORRECTION:
        refs += [("supersedes", ref) for ref in row["supersedes"]]
    return refs


# --- import -----------------------------------------------------------------------------------------
def import_batch_max() -> int:
    return settings.IMPORT_BATCH_MAX_ITEMS


def thoughts_import(
    *,
    space: Space,
    agent: Agent | None,
    items: list[Any],
    mode: ImportMode,
    first_line: int = 1,
    derive_lineage: bool = True,
    defer_links: bool = False,
    parse_errors: list[LineError] | None = None,
    precleaned: bool = False,
) -> ImportResult:
    """Store one batch of thoughts in ``space``, all or nothing; see the module docstring.

    ``mode`` AGENT (the API; ``agent`` is the caller) checks each item with :func:`agent_item_check`,
    stores every thought as the caller's, under a new id (:func:`_agent_ids`; the result's ``id_map``),
    and refuses only ids of the caller's own space (409). OPERATOR (the CLI) keeps what the items say.
    ``parse_errors`` are lines the caller could not even parse (JSONL); they fail the batch too.
    With ``defer_links`` (the CLI's multi-batch Colony import) references to thoughts that are not
    stored yet are returned in ``deferred_links`` for :func:`thoughts_import_links` instead of
    being refused. ``precleaned``: the items are :func:`item_clean`'s rows already (a file import,
    checked whole by :func:`dump_plan`).
    """
    if len(items) > import_batch_max():
        raise ImportTooLarge(
            f"A batch holds at most {import_batch_max()} items (got {len(items)}); split the file and send "
            "several requests (manage.py brain import does that for you).",
            extra={"max_items": import_batch_max()},
        )
    agent_mode = mode == ImportMode.AGENT
    if agent_mode and agent is None:
        raise ValueError("an agent's import needs the agent")
    now = timezone.now()
    errors = list(parse_errors or [])
    cleaned: list[tuple[int, dict[str, Any]]] = []
    given: dict[int, bool] = {}
    for offset, item in enumerate(items):
        if item is None:
            continue  # a line that failed to parse; its error is in parse_errors
        try:
            row = item if precleaned else item_clean(item)
            if agent_mode:
                agent_item_check(row, agent=agent, now=now)
                given[first_line + offset] = item.get("id") not in (None, "")
            cleaned.append((first_line + offset, row))
        except _Bad as bad:
            errors.append(LineError(first_line + offset, bad.message, bad.field))

    batch_ids: dict[uuid.UUID, int] = {}
    for line, row in cleaned:
        if row["id"] in batch_ids:
            errors.append(
                LineError(
                    line,
                    f"id {row['id']} appears twice in this batch (first on line {batch_ids[row['id']]}).",
                    "id",
                )
            )
        batch_ids.setdefault(row["id"], line)
    id_map = _agent_ids(cleaned, given, space) if agent_mode else {}
    if agent_mode:
        batch_ids = {id_map.get(pk, pk): line for pk, line in batch_ids.items()}

    # One query for every id the batch names: its own (must be new) and its references.
    referenced = {
        ref
        for _, row in cleaned
        for ref in (*row["source_ids"], *row["supersedes"], *row["related_thoughts"], *(row[n] for n in FK_REFS))
        if ref is not None
    }
    lookup = set(batch_ids) | set(id_map) | referenced
    # An agent's import looks in its own space only: another space's id is answered as a free one.
    stored = Thought.objects.filter(space=space) if agent_mode else Thought.objects
    taken = set(stored.filter(pk__in=lookup).values_list("pk", flat=True)) if lookup else set()
    in_space = set(Thought.objects.filter(space=space, pk__in=taken).values_list("pk", flat=True)) if taken else set()
    superseding = {line: _superseding_refs(row) for line, row in cleaned} if derive_lineage else {}
    markers = {row["id"] for _, row in cleaned if row["thought_category"] == ThoughtCategory.TRANSITION_MARKER}
    if any(superseding.values()):
        markers |= set(
            Thought.objects.filter(pk__in=in_space, thought_category=ThoughtCategory.TRANSITION_MARKER).values_list(
                "pk", flat=True
            )
        )
    deferred: list[tuple[str, str, str]] = []
    conflicts: list[LineError] = []
    for line, row in cleaned:
        if row.get("given_id") in taken:
            conflicts.append(LineError(line, f"a thought with id {row['given_id']} already exists.", "id"))
        elif row["id"] in taken:
            what = (
                f"id {row['given_id']} was imported before" if row.get("given_id") else f"id {row['id']} already exists"
            )
            conflicts.append(LineError(line, f"a thought with {what}; leave 'id' out to get a new one.", "id"))
        for name, ref in superseding.get(line, []):
            if ref in markers:
                errors.append(LineError(line, f"{ref} {_MARKER_REFUSED}", name))
        for name in (*ARRAY_REFS, "related_thoughts", *FK_REFS):
            values = row[name] if isinstance(row[name], list) else ([row[name]] if row[name] else [])
            for ref in values:
                if ref in batch_ids or ref in in_space:
                    continue
                if defer_links and name in (*FK_REFS, "related_thoughts"):
                    deferred.append((str(row["id"]), name, str(ref)))
                    continue
                if defer_links and name in ARRAY_REFS:
                    continue  # plain arrays of ids: kept as given, checked by the final link pass
                errors.append(LineError(line, f"no thought {ref} in this import or in this space.", name))
    if errors or conflicts:
        # Only taken ids: a conflict with what is stored (409); anything else wrong: 400, every line listed.
        error_class = ImportInvalid if errors else ImportConflict
        errors = sorted([*errors, *conflicts], key=lambda e: e.line)
        raise error_class(
            f"{len(errors)} problem(s) in lines {first_line}-{first_line + len(items) - 1}; nothing of this batch "
            "was stored. Fix the lines listed in error.lines and send the batch again.",
            extra={"lines": [e.as_dict() for e in errors[:200]], "error_count": len(errors)},
        )
    deferred_keys = {(thought, name, ref) for thought, name, ref in deferred}

    # Embed what has no vector, in one model call, before the transaction opens.
    to_embed: list[tuple[dict[str, Any], str, str]] = []
    for _, row in cleaned:
        if row["embedding"] is None:
            to_embed.append((row, "embedding", row["content"]))
        if (
            row["corrected_fact_embedding"] is None
            and row["thought_category"] == ThoughtCategory.CORRECTION
            and row["corrected_fact"].strip()
        ):
            to_embed.append((row, "corrected_fact_embedding", row["corrected_fact"]))
    label = embedder.current_model_label()
    if to_embed:
        try:
            vectors = embedder.embed_many([text for _, _, text in to_embed])
        except embedder.EmbeddingError as exc:
            raise ServiceFailure(f"Could not embed the imported thoughts: {exc}", code="EMBEDDING_FAILED")
        for (row, name, _), vector in zip(to_embed, vectors, strict=True):
            row[name] = vector
            if name == "embedding":
                row["embedding_model"] = label
    for _, row in cleaned:
        if not row["embedding_model"]:
            row["embedding_model"] = label

    agents = {}
    names = {row["agent"] for _, row in cleaned if row["agent"]}
    if agent_mode:
        agents = dict.fromkeys(names | {""}, agent)  # every row is the caller's (agent_item_check)
    elif names:
        agents = {a.name: a for a in Agent.objects.filter(space=space, name__in=names)}
    default_name = agent.name if agent is not None else "import"
    rows: list[Thought] = []
    related_pairs: list[tuple[uuid.UUID, uuid.UUID]] = []
    for _, row in cleaned:
        thought_id = row["id"]
        fk_values = {
            f"{name}_id": (None if (str(thought_id), name, str(row[name])) in deferred_keys else row[name])
            for name in FK_REFS
        }
        values = {name: row[name] for name in VALUE_FIELDS}
        values["contributor_id"] = row["contributor_id"] or default_name
        values["contributor_name"] = row["contributor_name"] or row["contributor_id"] or default_name
        values["created_at"] = row["created_at"] or now
        rows.append(
            Thought(
                id=thought_id,
                space=space,
                agent=agents.get(row["agent"]),
                source_ids=row["source_ids"],
                supersedes=row["supersedes"],
                embedding=row["embedding"],
                corrected_fact_embedding=row["corrected_fact_embedding"],
                **values,
                **fk_values,
            )
        )
        for other in row["related_thoughts"]:
            if (str(thought_id), "related_thoughts", str(other)) not in deferred_keys:
                related_pairs.append((thought_id, other))

    try:
        with transaction.atomic():
            _copy_thoughts(rows)
            _link_related(related_pairs)
            if derive_lineage:
                _derive_lineage(space=space, rows=rows)
    except (DataError, IntegrityError) as exc:
        raise ImportInvalid(
            f"The database refused the batch ({str(exc).splitlines()[0]}); nothing of it was stored. "
            "Check the values of the lines and send it again.",
            extra={"lines": [], "error_count": 1},
        )
    thoughts_analyze_if_stale()
    thoughts_gin_flush()
    return ImportResult(
        ids=[str(r.id) for r in rows],
        id_map={str(old): str(new) for old, new in id_map.items()},
        embedded=sum(1 for _, n, _ in to_embed if n == "embedding"),
        deferred_links=deferred,
    )


#: After an import, brain_thought's planner statistics are refreshed when more than this share of
#: its rows changed since the last ANALYZE (and at least ANALYZE_AFTER_MIN rows): autovacuum gets to it
#: only on its next round, and until then the planner's estimates for a table that just grew by a bulk
#: load made retrieve-only memory calls ~2.5x slower (bench-compare at 10,000 notes: p50 73 ms right
#: after the import, 29 ms once analysed).
ANALYZE_AFTER_SHARE = 0.1
ANALYZE_AFTER_MIN = 1000


def thoughts_analyze_if_stale() -> bool:
    """ANALYZE brain_thought if imports changed much of it since its last analysis (see above)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_mod_since_analyze, n_live_tup FROM pg_stat_user_tables WHERE relid = %s::regclass",
            [Thought._meta.db_table],
        )
        row = cursor.fetchone()
        if row is None:
            return False
        changed, live = row
        if changed < max(ANALYZE_AFTER_MIN, ANALYZE_AFTER_SHARE * live):
            return False
        try:
            with transaction.atomic():  # a savepoint: a refused ANALYZE (not the owner) changes nothing
                cursor.execute(f"ANALYZE {Thought._meta.db_table}")
        except DatabaseError as exc:
            logger.warning("ANALYZE %s after an import failed (autovacuum will do it): %s", Thought._meta.db_table, exc)
            return False
    return True


def thoughts_gin_flush() -> int:
    """Merge brain_thought's GIN pending lists into their indexes; the number of pages merged.

    A GIN index with ``fastupdate`` (PostgreSQL's default) puts new entries in a pending list, and
    every search through the index reads that whole list until it is merged: by an insert that
    finds it over ``gin_pending_list_limit`` (4 MB), or by (auto)vacuum. After an import it held
    ~10,000 thoughts' lexemes (315 pages at 10,000 notes), which every full-text side of a memory
    search scanned: bench-compare's retrieve-only calls ran p50 14.8 ms until autovacuum came, 9.7 ms
    once merged (docs/performance.md, "PostgreSQL"). An import merges what it added, in bulk, as
    the list is meant to be; a refused call (not the index's owner) is logged and changes nothing."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:  # a savepoint inside a caller's transaction
            cursor.execute(
                """
                SELECT COALESCE(sum(gin_clean_pending_list(i.indexrelid)), 0)
                FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
                WHERE i.indrelid = %s::regclass AND a.amname = 'gin'
                """,
                [Thought._meta.db_table],
            )
            return int(cursor.fetchone()[0])
    except DatabaseError as exc:
        logger.warning("Merging %s's GIN pending lists after an import failed: %s", Thought._meta.db_table, exc)
        return 0


#: pgvector's text form of a stored vector (EMBEDDING_DIMENSIONS values, checked before it gets here).
_VECTOR_TEXT = "[" + ",".join(["%.9g"] * EMBEDDING_DIMENSIONS) + "]"


def vector_text(item: Any) -> str:
    """A vector (float32 values, as a list or a numpy array) in pgvector's text form, as COPY takes it.

    Nine significant digits give every float32 back exactly (the column stores float4), and one ``%``
    over the whole vector is ~3x faster than ``str()`` of each value (0.17 against 0.57 s of the web
    process per 1,000 vectors) and shorter for PostgreSQL to parse (0.20 against 0.29 s): half a
    millisecond of an import's ~7 ms of CPU a note (docs/performance.md, "Import")."""
    return _VECTOR_TEXT % tuple(item.tolist() if isinstance(item, np.ndarray) else item)


def _copy_thoughts(rows: list[Thought]) -> None:
    """Write new thoughts with one ``COPY ... FROM STDIN`` (the import's bulk insert).

    ``bulk_create`` spent about as long in Python as the database spent inserting: every value went
    through its field's conversion and the rows were pasted into one huge client-side-bound INSERT
    text. COPY streams the values instead; the insert triggers (BM25 statistics) fire as for an
    INSERT. Database errors come out as Django's (DataError, IntegrityError), as from bulk_create.
    """
    if not rows:
        return
    from psycopg.types.json import Jsonb

    fields, columns = thought_columns()
    vectors = {"embedding", "corrected_fact_embedding"}
    json_fields = {f.attname for f in fields if f.get_internal_type() == "JSONField"}

    def value(row: Thought, field) -> Any:
        item = getattr(row, field.attname)
        if item is None:
            return None
        if field.attname in vectors:
            return vector_text(item)
        if field.attname in json_fields:
            return Jsonb(item)
        return item

    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(f"COPY {Thought._meta.db_table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([value(row, field) for field in fields])


def _link_related(pairs: Iterable[tuple[uuid.UUID, uuid.UUID]]) -> None:
    """Symmetrical many-to-many: both directions, once each (ignore_conflicts for the second end)."""
    through = Thought.related_thoughts.through
    links = {(a, b) for a, b in pairs} | {(b, a) for a, b in pairs}
    if links:
        through.objects.bulk_create(
            [through(from_thought_id=a, to_thought_id=b) for a, b in links], ignore_conflicts=True, batch_size=1000
        )


def _derive_lineage(*, space: Space, rows: list[Thought]) -> None:
    """What a live contribution does to the thoughts it builds on, oldest import first (so the newest
    refiner ends as ``refined_by``): sources of a refinement/consolidation and the ``supersedes`` of a
    correction become superseded; ``superseded_at`` keeps the first time (the import's created_at)."""
    for row in sorted(rows, key=lambda r: r.created_at):
        if row.thought_type in (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION) and row.source_ids:
            Thought.objects.filter(space=space, pk__in=row.source_ids).exclude(pk=row.pk).update(
                superseded=True, refined_by=row.pk, superseded_at=Coalesce(F("superseded_at"), row.created_at)
            )
        if row.thought_category == ThoughtCategory.CORRECTION and row.supersedes:
            Thought.objects.filter(space=space, pk__in=row.supersedes).exclude(pk=row.pk).update(
                superseded=True, superseded_by=row.pk, superseded_at=Coalesce(F("superseded_at"), row.created_at)
            )


def thoughts_import_links(*, space: Space, links: list[tuple[str, str, str]]) -> list[str]:
    """Apply the references deferred by multi-batch imports; returns the ones that named no thought
    of ``space`` (reported, not applied)."""
    if not links:
        return []
    targets = {uuid.UUID(ref) for _, _, ref in links}
    existing = {str(pk) for pk in Thought.objects.filter(space=space, pk__in=targets).values_list("pk", flat=True)}
    dangling = [f"{thought} {name} -> {ref}" for thought, name, ref in links if ref not in existing]
    with transaction.atomic():
        pairs = []
        for thought, name, ref in links:
            if ref not in existing:
                continue
            if name == "related_thoughts":
                pairs.append((uuid.UUID(thought), uuid.UUID(ref)))
            else:
                Thought.objects.filter(space=space, pk=thought).update(**{f"{name}_id": ref})
        _link_related(pairs)
    return dangling


# --- query log and suggestions ------------------------------------------------------------------------
def _optional_uuid(value: Any, name: str) -> uuid.UUID | None:
    return None if value in (None, "") else _uuid(value, name)


def _short_text(value: Any, name: str, max_length: int) -> str:
    """Text cut to the column's length, as the seed brain's logs need (their ids may be longer); a
    number is taken as its text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return _text(value, name)[:max_length]


def querylog_clean(row: Any) -> dict[str, Any]:
    """One query-log row of a dump ({agent, agent_ref, session_id, query_text, results,
    stored_thought, created_at}) as model values; raises ``_Bad`` naming the first wrong field."""
    if not isinstance(row, dict):
        raise _Bad("", "each query-log row must be a JSON object.")
    _require_storable(row)
    results = row.get("results")
    results = [] if results is None else results
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise _Bad("results", "must be a list of {id, score} objects.")
    return {
        "agent": _short_text(row.get("agent"), "agent", 100),
        "agent_ref": _short_text(row.get("agent_ref"), "agent_ref", 100),
        "session_id": _short_text(row.get("session_id"), "session_id", 100),
        "query_text": _text(row.get("query_text"), "query_text"),
        "results": results,
        "stored_thought": _optional_uuid(row.get("stored_thought"), "stored_thought"),
        "created_at": _datetime(row.get("created_at"), "created_at") or timezone.now(),
    }


def querylog_key(*, session_id: str, query_text: str, created_at: dt.datetime) -> tuple[str, str, str]:
    """What tells a query-log row from another (rows have no id of their own in an export)."""
    return (session_id, query_text, created_at.isoformat())


def querylog_keys(*, space: Space) -> set[tuple[str, str, str]]:
    return {
        querylog_key(session_id=s, query_text=q, created_at=c)
        for s, q, c in QueryLog.objects.filter(space=space).values_list("session_id", "query_text", "created_at")
    }


def suggestion_clean(row: Any) -> dict[str, Any]:
    """One correction suggestion of a Colony export as model values; raises ``_Bad``."""
    if not isinstance(row, dict):
        raise _Bad("", "each correction suggestion must be a JSON object.")
    _require_storable(row)
    if row.get("thought") in (None, ""):
        raise _Bad("thought", "is required: the id of the thought the suggestion is about.")
    draft = row.get("draft")
    draft = {} if draft is None else draft
    if not isinstance(draft, dict):
        raise _Bad("draft", "must be an object.")
    return {
        "id": _optional_uuid(row.get("id"), "id") or uuid.uuid4(),
        "thought": _uuid(row["thought"], "thought"),
        "statement": _text(row.get("statement"), "statement"),
        "contradicting_thought": _optional_uuid(row.get("contradicting_thought"), "contradicting_thought"),
        "draft": draft,
        "origin": _choice(
            row.get("origin"), "origin", SuggestionOrigin.values, SuggestionOrigin.CONTRADICTION_DETECTOR
        ),
        "confidence": _number(row.get("confidence", 0.0), "confidence", minimum=0),
        "reason": _text(row.get("reason"), "reason"),
        "agent": _text(row.get("agent"), "agent", 100),
        "session_id": _text(row.get("session_id"), "session_id", 100),
        "status": _choice(row.get("status"), "status", SuggestionStatus.values, SuggestionStatus.PENDING),
        "created_at": _datetime(row.get("created_at"), "created_at") or timezone.now(),
        "resolved_at": _datetime(row.get("resolved_at"), "resolved_at"),
        "resolved_by": _text(row.get("resolved_by"), "resolved_by", 200),
        "correction": _optional_uuid(row.get("correction"), "correction"),
    }


def _refuse_rows(errors: list[LineError], what: str) -> ImportInvalid:
    return ImportInvalid(
        f"{len(errors)} problem(s) in the {what}; none of them was stored.",
        extra={"lines": [e.as_dict() for e in sorted(errors, key=lambda e: e.line)[:200]], "error_count": len(errors)},
    )


def _cleaned(rows: list[Any], clean, what: str) -> list[dict[str, Any]]:
    problems: list[DumpProblem] = []
    out = [row for _, _, row in _clean_each(rows, clean, "row", problems)]
    if problems:
        raise _refuse_rows([LineError(p.number, p.message, p.field) for p in problems], what)
    return out


def querylogs_import(*, space: Space, rows: list[Any], precleaned: bool = False) -> int:
    """Bulk insert query-log rows (see :func:`querylog_clean`), all or nothing; ``stored_thought``
    must be a thought of the space or it is dropped. ``precleaned``: the rows are
    :func:`querylog_clean`'s already (a file import, checked whole by :func:`dump_plan`)."""
    if not precleaned:
        rows = _cleaned(rows, querylog_clean, "query-log rows")
    names = {r["agent"] for r in rows if r["agent"]}
    agents = {a.name: a for a in Agent.objects.filter(space=space, name__in=names)} if names else {}
    stored = {r["stored_thought"] for r in rows if r["stored_thought"]}
    known = set(Thought.objects.filter(space=space, pk__in=stored).values_list("pk", flat=True)) if stored else set()
    objs = [
        QueryLog(
            space=space,
            agent=agents.get(r["agent"]),
            agent_ref=r["agent_ref"],
            session_id=r["session_id"],
            query_text=r["query_text"],
            results=r["results"],
            stored_thought_id=r["stored_thought"] if r["stored_thought"] in known else None,
            created_at=r["created_at"],
        )
        for r in rows
    ]
    QueryLog.objects.bulk_create(objs, batch_size=1000)
    return len(objs)


def suggestions_import(*, space: Space, rows: list[Any], precleaned: bool = False) -> int:
    """Bulk insert correction suggestions (see :func:`suggestion_clean`), all or nothing: each must
    be about a thought of the space; a contradicting thought or correction that is not in the space
    is dropped (null), as deleting it would have done. ``precleaned`` as for :func:`querylogs_import`."""
    if not precleaned:
        rows = _cleaned(rows, suggestion_clean, "correction suggestions")
    names = {r["agent"] for r in rows if r["agent"]}
    agents = {a.name: a for a in Agent.objects.filter(space=space, name__in=names)} if names else {}
    named = {r[n] for r in rows for n in ("thought", "contradicting_thought", "correction") if r[n]}
    known = set(Thought.objects.filter(space=space, pk__in=named).values_list("pk", flat=True)) if named else set()
    taken = set(CorrectionSuggestion.objects.filter(pk__in=[r["id"] for r in rows]).values_list("pk", flat=True))
    errors = [
        LineError(n, f"no thought {r['thought']} in this space.", "thought")
        for n, r in enumerate(rows, start=1)
        if r["thought"] not in known
    ] + [
        LineError(n, f"a correction suggestion with id {r['id']} already exists.", "id")
        for n, r in enumerate(rows, start=1)
        if r["id"] in taken
    ]
    if errors:
        raise _refuse_rows(errors, "correction suggestions")
    objs = [
        CorrectionSuggestion(
            space=space,
            agent=agents.get(r["agent"]),
            **{k: v for k, v in r.items() if k not in ("agent", "thought", "contradicting_thought", "correction")},
            thought_id=r["thought"],
            contradicting_thought_id=r["contradicting_thought"] if r["contradicting_thought"] in known else None,
            correction_id=r["correction"] if r["correction"] in known else None,
        )
        for r in rows
    ]
    CorrectionSuggestion.objects.bulk_create(objs, batch_size=1000)
    return len(objs)


# --- whole dumps (manage.py brain import) ------------------------------------------------------------
#: Names the ids a file import gives its items: an item without an id gets uuid5(this, space + item
#: number + the item's JSON), and --new-ids maps an id to uuid5(this, space + old id). The same file
#: imported into the same space gives the same ids, so a second run knows what the first one stored.
IMPORT_ID_NAMESPACE = uuid.UUID("6f6c6f6e-792d-4269-8d70-6f7274000001")


@dataclass
class DumpPlan:
    """What a file import will store, every row already checked (see :func:`dump_plan`)."""

    thoughts: list[dict[str, Any]]  # item_clean's rows: thoughts_import(..., precleaned=True)
    numbers: list[int]  # each of those thoughts' item number in the file
    query_logs: list[dict[str, Any]]  # querylog_clean's rows: querylogs_import(..., precleaned=True)
    suggestions: list[dict[str, Any]]  # suggestion_clean's rows: suggestions_import(..., precleaned=True)
    skipped: dict[str, int] = field(default_factory=dict)


@dataclass
class DumpProblem:
    what: str  # "item", "query-log row", "correction suggestion"
    number: int  # from 1, among the file's rows of that kind
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.what} {self.number}"
        return f"{where} {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class DumpInvalid(Exception):
    """The file can't be imported as it is; nothing was stored. ``problems`` lists why."""

    def __init__(self, message: str, problems: list[DumpProblem]):
        super().__init__(message)
        self.message = message
        self.problems = problems


def _remap_ids(items: list[Any], logs: list[Any], suggestions: list[Any], new_id) -> None:
    """Give every thought of the file a new id, the file's references following (--new-ids)."""
    mapping = {
        str(item["id"]).lower(): str(new_id(item["id"]))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]
    }

    def ref(value: Any) -> Any:
        return mapping.get(value.lower(), value) if isinstance(value, str) else value

    for item in items:
        if not isinstance(item, dict):
            continue
        for name in ("id", *FK_REFS):
            if name in item:
                item[name] = ref(item[name])
        for name in (*ARRAY_REFS, "related_thoughts"):
            if isinstance(item.get(name), list):
                item[name] = [ref(v) for v in item[name]]
        co = item.get("co_retrieved_with")
        if isinstance(co, dict):
            item["co_retrieved_with"] = {ref(k): v for k, v in co.items()}
        elif isinstance(co, list):
            for entry in co:
                if isinstance(entry, dict) and "thought_id" in entry:
                    entry["thought_id"] = ref(entry["thought_id"])
    for log in logs:
        if isinstance(log, dict):
            log["stored_thought"] = ref(log.get("stored_thought"))
            for result in log.get("results") or []:
                if isinstance(result, dict) and "id" in result:
                    result["id"] = ref(result["id"])
    for suggestion in suggestions:
        if isinstance(suggestion, dict):
            if suggestion.get("id"):
                suggestion["id"] = str(new_id(f"suggestion {suggestion['id']}"))
            for name in ("thought", "contradicting_thought", "correction"):
                suggestion[name] = ref(suggestion.get(name))


def _in_chunks(model, ids: set, chunk: int = 10_000) -> dict[Any, Any]:
    """{pk: space_id} of the rows of ``model`` among ``ids``, asked in chunks."""
    ordered, found = list(ids), {}
    for start in range(0, len(ordered), chunk):
        found.update(model.objects.filter(pk__in=ordered[start : start + chunk]).values_list("pk", "space_id"))
    return found


def _clean_each(rows: list[Any], clean, what: str, problems: list[DumpProblem]) -> list[tuple[int, Any, dict]]:
    """(number, raw row, cleaned row) of every row ``clean`` accepts; the others go to ``problems``."""
    out = []
    for number, raw in enumerate(rows, start=1):
        try:
            out.append((number, raw, clean(raw)))
        except _Bad as bad:
            problems.append(DumpProblem(what, number, bad.field, bad.message))
    return out


def _stable_json(value: Any) -> Any:
    """JSON for what ``json`` can't write: a compacted vector as its numbers, anything else as text."""
    return value.tolist() if isinstance(value, np.ndarray) else str(value)


def _plan_thoughts(space: Space, thoughts: list[Any], skip_existing: bool, problems: list[DumpProblem]):
    """(rows to store, their item numbers, item number of every id in the file, how many left out)."""
    first_seen: dict[uuid.UUID, int] = {}
    cleaned = _clean_each(thoughts, item_clean, "item", problems)
    for number, item, row in cleaned:
        if item.get("id") in (None, ""):
            stable = json.dumps(item, sort_keys=True, default=_stable_json)
            row["id"] = uuid.uuid5(IMPORT_ID_NAMESPACE, f"{space.pk} {number} {stable}")
        if row["id"] in first_seen:
            problems.append(
                DumpProblem("item", number, "id", f"{row['id']} is also the id of item {first_seen[row['id']]}.")
            )
        first_seen.setdefault(row["id"], number)

    stored = _in_chunks(Thought, set(first_seen))
    here = {pk for pk, owner in stored.items() if owner == space.pk}
    elsewhere = sorted((first_seen[pk], pk) for pk, owner in stored.items() if owner != space.pk)
    if elsewhere:
        number, pk = elsewhere[0]
        problems.append(
            DumpProblem(
                "item",
                number,
                "id",
                f"{pk} is the id of a thought of another space ({len(elsewhere)} such item(s)); ids are unique "
                "on a server. To copy an export into another space, import it with --new-ids.",
            )
        )
    if here and not skip_existing:
        problems.append(
            DumpProblem(
                "item",
                min(first_seen[pk] for pk in here),
                "id",
                f"{len(here)} of the file's thoughts are already in space {space.slug} (an earlier import?). "
                "Run the import again with --skip-existing to store only what is missing.",
            )
        )
    kept = [(number, row) for number, _, row in cleaned if not (skip_existing and row["id"] in here)]
    return [row for _, row in kept], [number for number, _ in kept], first_seen, len(cleaned) - len(kept)


def _plan_query_logs(space: Space, rows: list[Any], skip_existing: bool, problems: list[DumpProblem]):
    """(rows to store, how many left out: already in the space by session, text and time)."""
    known = querylog_keys(space=space) if skip_existing and rows else set()
    kept, skipped = [], 0
    for _, _, log in _clean_each(rows, querylog_clean, "query-log row", problems):
        key = querylog_key(session_id=log["session_id"], query_text=log["query_text"], created_at=log["created_at"])
        if key in known:
            skipped += 1
        else:
            kept.append(log)
    return kept, skipped


def _plan_suggestions(space: Space, rows: list[Any], in_file: dict, skip_existing: bool, problems: list[DumpProblem]):
    """(rows to store, how many left out); each must be about a thought of the file or the space."""
    cleaned = _clean_each(rows, suggestion_clean, "correction suggestion", problems)
    taken = _in_chunks(CorrectionSuggestion, {s["id"] for _, _, s in cleaned})
    outside = {s["thought"] for _, _, s in cleaned} - set(in_file)
    present = {pk for pk, owner in _in_chunks(Thought, outside).items() if owner == space.pk}
    kept, skipped = [], 0
    for number, _, suggestion in cleaned:
        what, owner = "correction suggestion", taken.get(suggestion["id"])
        if suggestion["thought"] not in in_file and suggestion["thought"] not in present:
            message = f"no thought {suggestion['thought']} in the file or in space {space.slug}."
            problems.append(DumpProblem(what, number, "thought", message))
        elif owner == space.pk and skip_existing:
            skipped += 1
        elif owner is not None:
            where = (
                f"in space {space.slug}; run the import again with --skip-existing."
                if owner == space.pk
                else "in another space; import the file with --new-ids."
            )
            message = f"a correction suggestion with id {suggestion['id']} exists {where}"
            problems.append(DumpProblem(what, number, "id", message))
        else:
            kept.append(suggestion)
    return kept, skipped


def dump_plan(
    *,
    space: Space,
    thoughts: list[Any],
    query_logs: list[Any],
    suggestions: list[Any],
    skip_existing: bool = False,
    new_ids: bool = False,
) -> DumpPlan:
    """Check a whole dump before anything of it is stored; raises :class:`DumpInvalid` listing every
    problem (fields, ids repeated in the file, ids taken by other spaces' thoughts or already in this
    one, suggestions about thoughts that are nowhere), so a file import fails before its first batch
    rather than half-way. Items without an id get a stable one (:data:`IMPORT_ID_NAMESPACE`); with
    ``skip_existing`` what is already in the space (thoughts and suggestions by id, query-log rows
    by session, text and time) is left out, so a stopped import can be finished by running it again."""
    if new_ids:
        _remap_ids(
            thoughts,
            query_logs,
            suggestions,
            lambda old: uuid.uuid5(IMPORT_ID_NAMESPACE, f"{space.pk} {str(old).lower()}"),
        )
    problems: list[DumpProblem] = []
    rows, numbers, in_file, thoughts_skipped = _plan_thoughts(space, thoughts, skip_existing, problems)
    logs, logs_skipped = _plan_query_logs(space, query_logs, skip_existing, problems)
    kept_suggestions, suggestions_skipped = _plan_suggestions(space, suggestions, in_file, skip_existing, problems)
    if problems:
        raise DumpInvalid(f"{len(problems)} problem(s) in the file; nothing was imported.", problems)
    return DumpPlan(
        thoughts=rows,
        numbers=numbers,
        query_logs=logs,
        suggestions=kept_suggestions,
        skipped={
            "thoughts": thoughts_skipped,
            "query_logs": logs_skipped,
            "correction_suggestions": suggestions_skipped,
        },
    )


# --- export -----------------------------------------------------------------------------------------
def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, (dt.datetime, dt.date)) else value


def thought_export_row(thought: Thought, related: list[str], *, embeddings: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {"kind": "thought", "id": str(thought.id)}
    row["agent"] = thought.agent.name if thought.agent_id else ""
    for name in VALUE_FIELDS:
        row[name] = _iso(getattr(thought, name))
    for name in ARRAY_REFS:
        row[name] = [str(v) for v in getattr(thought, name)]
    for name in FK_REFS:
        value = getattr(thought, f"{name}_id")
        row[name] = str(value) if value else None
    row["related_thoughts"] = sorted(related)
    for name in VECTOR_FIELDS:
        vector = getattr(thought, name)
        row[name] = [float(v) for v in vector] if (embeddings and vector is not None) else None
    if not embeddings:
        row["embedding_model"] = ""
    return row


def space_export_counts(*, space: Space) -> dict[str, int]:
    return {
        "thoughts": Thought.objects.filter(space=space).count(),
        "query_logs": QueryLog.objects.filter(space=space).count(),
        "correction_suggestions": CorrectionSuggestion.objects.filter(space=space).count(),
    }


def space_export_rows(*, space: Space, embeddings: bool = True, chunk: int = 1000) -> Iterator[dict[str, Any]]:
    """Colony's own export, oldest first: header, thoughts, query logs, correction suggestions.

    The space's accesses not counted yet are folded first (``pheromones.reinforcement_fold_all``), so
    the thoughts written carry every access their query logs name, and the logs import as counted."""
    pheromones.reinforcement_fold_all(space=space)
    yield {
        "kind": "header",
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "space": space.slug,
        "exported_at": timezone.now().isoformat(),
        "embedding_model": embedder.current_model_label(),
        "counts": space_export_counts(space=space),
    }
    through = Thought.related_thoughts.through
    thoughts = Thought.objects.filter(space=space).select_related("agent").order_by("created_at", "id")
    if not embeddings:
        thoughts = thoughts.defer("embedding", "corrected_fact_embedding")
    batch: list[Thought] = []

    def flush(batch: list[Thought]) -> Iterator[dict[str, Any]]:
        related: dict[Any, list[str]] = {}
        for a, b in through.objects.filter(from_thought_id__in=[t.id for t in batch]).values_list(
            "from_thought_id", "to_thought_id"
        ):
            related.setdefault(a, []).append(str(b))
        for thought in batch:
            yield thought_export_row(thought, related.get(thought.id, []), embeddings=embeddings)

    for thought in thoughts.iterator(chunk_size=chunk):
        batch.append(thought)
        if len(batch) >= chunk:
            yield from flush(batch)
            batch = []
    if batch:
        yield from flush(batch)
    for log in QueryLog.objects.filter(space=space).select_related("agent").order_by("created_at", "id").iterator():
        yield {
            "kind": "query_log",
            "agent": log.agent.name if log.agent_id else "",
            "agent_ref": log.agent_ref,
            "session_id": log.session_id,
            "query_text": log.query_text,
            "results": log.results,
            "stored_thought": str(log.stored_thought_id) if log.stored_thought_id else None,
            "created_at": log.created_at.isoformat(),
        }
    for s in CorrectionSuggestion.objects.filter(space=space).select_related("agent").order_by("created_at", "id"):
        yield {
            "kind": "correction_suggestion",
            "id": str(s.id),
            "thought": str(s.thought_id),
            "statement": s.statement,
            "contradicting_thought": str(s.contradicting_thought_id) if s.contradicting_thought_id else None,
            "draft": s.draft,
            "origin": s.origin,
            "confidence": s.confidence,
            "reason": s.reason,
            "agent": s.agent.name if s.agent_id else "",
            "session_id": s.session_id,
            "status": s.status,
            "created_at": s.created_at.isoformat(),
            "resolved_at": _iso(s.resolved_at),
            "resolved_by": s.resolved_by,
            "correction": str(s.correction_id) if s.correction_id else None,
        }
