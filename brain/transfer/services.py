"""Import services: a batch of thoughts, the deferred links, query-log rows and correction suggestions.

Imports restore knowledge, they are not contributions: every note is kept however short (no
contribution threshold), categories need not carry their required fields, and quality flags,
pheromones and access counts are taken as given (nothing is computed from the agent's searches). One
flag is added as to a contribution: an agent's thought that repeats a correction's corrected fact is
flagged ``contradicts_correction`` (:func:`_guard_corrections`, by the server's vector of its text).
Two modes (:class:`ImportMode`): the operator's CLI restore keeps everything an export carries (other
agents, dates, markers, ids); an agent's import over the API restores its own thoughts only, every
value checked by :class:`~brain.transfer.serializers.ImportItemSerializer` and stored under new ids.

- :func:`thoughts_import` stores one batch (at most ``settings.IMPORT_BATCH_MAX_ITEMS`` items) in
  one transaction, all or nothing: every item is validated first and the per-line errors come back
  together; then the items without a vector are embedded in one ``embed_many`` call (before the
  transaction opens), and the rows are written with one ``COPY`` (:func:`_copy_thoughts`).
- References (``source_ids``, ``supersedes``, ``refined_by``, ``superseded_by``, ``contradicted_by``,
  ``related_thoughts``) must name a thought of the same batch or of the caller's space; an id of
  another space is reported exactly like an unknown one. With ``derive_lineage`` (the API, Mem0 and
  seed-brain dumps) an imported refinement/consolidation supersedes its sources and an imported
  correction the thoughts it names and the live corrections they had, as a live contribution would
  (:func:`_derive_lineage`); an agent's ``refined_by``/``superseded_by`` may only say so again
  (:func:`_pointer_errors`). Colony's own export carries those states explicitly and is imported as
  it is (``derive_lineage=False``, links applied after the last batch by :func:`thoughts_import_links`).
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Any

import numpy as np
import psycopg
from django.conf import settings
from django.db import DatabaseError, DataError, IntegrityError, connection, transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from api.errors import ApplicationError, ServiceFailure
from brain import embedding as embedder
from brain.choices import IMPORTED_KEY, QualityFlag, ThoughtCategory, ThoughtType
from brain.models import EMBEDDING_DIMENSIONS, CorrectionSuggestion, QueryLog, Thought
from brain.selectors import activity
from brain.services import flags
from brain.services.corrections import corrections_replaced
from brain.services.lineage import unrelated_refuse
from brain.services.retraction import REASON_MAX_CHARS, REDACTED_CONTENT, RETRACTION_KEY, retraction_record
from brain.services.suggestions import suggestions_close_superseded
from brain.services.thoughts import thought_columns, thoughts_lock_in_space
from brain.transfer.serializers import (
    ARRAY_REFS,
    FK_REFS,
    VALUE_FIELDS,
    ImportItemSerializer,
    RestoreItemSerializer,
    _Bad,
    clean_each,
    item_clean,
    querylog_clean,
    suggestion_clean,
)
from core.models import Agent, Space

logger = logging.getLogger("colony.brain.transfer")


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

    #: ``POST /thoughts/import``: an agent restoring its own thoughts (see ``ImportItemSerializer``).
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


#: What a refinement or consolidation may not name in its source_ids (``lineage.corrections_refuse``).
_CORRECTION_REFUSED = (
    "is a correction, and only a correction supersedes a correction: import a correction whose supersedes "
    "names it (with corrected_fact and correct_fact), or leave it out of source_ids."
)


def _superseding_refs(row: dict[str, Any]) -> list[tuple[str, uuid.UUID]]:
    """(field, id) of each thought an imported row supersedes when lineage is derived (:func:`_derive_lineage`)."""
    refs = []
    if row["thought_type"] in (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION):
        refs += [("source_ids", ref) for ref in row["source_ids"]]
    if row["thought_category"] == ThoughtCategory.CORRECTION:
        refs += [("supersedes", ref) for ref in row["supersedes"]]
    return refs


#: The pointer :func:`_derive_lineage` sets on a thought that a row supersedes through each field.
_POINTER_OF = {"source_ids": "refined_by", "supersedes": "superseded_by"}
#: Which items of the batch each pointer may name.
_POINTED_BY = {
    "refined_by": "a refinement or consolidation of this batch whose source_ids list this item",
    "superseded_by": "a correction of this batch whose supersedes list this item",
}


def _pointer_errors(cleaned: list[tuple[int, dict[str, Any]]], known: set[uuid.UUID]) -> list[LineError]:
    """An agent's ``refined_by`` / ``superseded_by`` may only name an item of the batch that supersedes
    this one (the pointer the import derives anyway): retrieval serves the thought a superseded one
    points to as its live replacement, so a pointer at any other thought would make that thought the
    answer to whatever matches the item. A pointer to no ``known`` thought is reported as unknown
    already."""
    derivable = {
        (ref, _POINTER_OF[name], row["id"])
        for _, row in cleaned
        for name, ref in _superseding_refs(row)
        if ref != row["id"]
    }
    return [
        LineError(
            line,
            f"{row[pointer]} does not supersede this item: {pointer} names {_POINTED_BY[pointer]} "
            "(and is derived from it when left out).",
            pointer,
        )
        for line, row in cleaned
        for pointer in ("refined_by", "superseded_by")
        if row[pointer] in known and (row["id"], pointer, row[pointer]) not in derivable
    ]


def _cycle_errors(cleaned: list[tuple[int, dict[str, Any]]]) -> list[LineError]:
    """Items whose ``source_ids`` / ``supersedes`` lead back to themselves within the batch (an item naming
    itself, or a ring of items naming each other): no door of Colony makes such a lineage, every item of
    it would be superseded with no live version, and walks over it only end at their caps. One cycle is
    reported, on each of its items (``graphlib`` finds it)."""
    line_of = {row["id"]: line for line, row in cleaned}
    graph = {row["id"]: {ref for name in ARRAY_REFS for ref in row[name] if ref in line_of} for _, row in cleaned}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        cycle = exc.args[1]  # [a, b, ..., a]: each names the one before it
        rows = {row["id"]: row for _, row in cleaned}
        errors = []
        for named, pk in zip(cycle, cycle[1:], strict=False):
            name = next(n for n in ARRAY_REFS if named in rows[pk][n])
            said = "names itself" if named == pk else f"forms a cycle ({' -> '.join(str(i) for i in cycle)})"
            errors.append(LineError(line_of[pk], f"{named} {said}: a lineage leads back to no thought.", name))
        return errors
    return []


def _not_a_correction(ref: Any) -> str:
    return f"{ref} is not a correction: contradicted_by names the correction whose corrected_fact this thought repeats."


def _contradicted_by_errors(cleaned: list[tuple[int, dict[str, Any]]], known: set[uuid.UUID]) -> list[LineError]:
    """A ``contradicted_by`` names a correction (of the batch or of the space, ``known``): the flag it goes
    with says the thought repeats that correction's corrected fact, and retracting the correction clears
    both (``flags.correction_unflag``). Pointed at a marker or an ordinary thought it would tie the thought
    to something that corrects nothing. A reference to no known thought is reported as unknown already."""
    named = {row["contradicted_by"] for _, row in cleaned if row["contradicted_by"] in known}
    if not named:
        return []
    corrections = {row["id"] for _, row in cleaned if row["thought_category"] == ThoughtCategory.CORRECTION}
    corrections |= set(
        Thought.objects.filter(pk__in=named - corrections, thought_category=ThoughtCategory.CORRECTION).values_list(
            "pk", flat=True
        )
    )
    return [
        LineError(line, _not_a_correction(row["contradicted_by"]), "contradicted_by")
        for line, row in cleaned
        if row["contradicted_by"] in named and row["contradicted_by"] not in corrections
    ]


def _guard_corrections(*, space: Space, rows: list[dict[str, Any]], vectors: dict[int, Any]) -> None:
    """Flag ``contradicts_correction`` (and ``contradicted_by``) on the rows that repeat a correction's
    corrected fact, by the re-contamination guard of a memory contribution (``flags.correction_guard``).
    ``vectors`` holds the server's vector of a row's content where the row brought its own vector
    (keyed by ``id(row)``): the guard never reads a vector the caller chose."""
    for row in rows:
        vector = vectors.get(id(row), row["embedding"])
        correction = flags.correction_guard(space=space, vector=vector, text=row["content"])
        if correction is None:
            continue
        row["contradicted_by"] = correction.pk
        if QualityFlag.CONTRADICTS_CORRECTION not in row["quality_flags"]:
            row["quality_flags"] = [*row["quality_flags"], QualityFlag.CONTRADICTS_CORRECTION.value]


#: The reason of an imported retracted thought's record when the item gave none.
IMPORTED_RETRACTION_REASON = "retracted before it was exported; restored by an import"


def _server_owned_written(values: dict[str, Any], *, agent: Agent, now: dt.datetime) -> dict[str, Any]:
    """An agent's imported thought's ``context_metadata`` with the keys Colony owns written from the token
    and the clock, whatever the item carried (SPEC 6): ``imported`` ({by, at}) on every thought, and on a
    retracted one (``ImportItemSerializer`` lets ``retracted`` through only with ``superseded``) the
    retraction record, as the caller's own retraction now. The reason an export's record gave is kept
    as the caller's words; who, when and whether the text is erased are not taken from it: ``redacted``
    is written only when the content is Colony's erased text and nothing else holds any."""
    metadata = {**(values["context_metadata"] or {}), IMPORTED_KEY: {"by": agent.name, "at": now.isoformat()}}
    given = metadata.pop(RETRACTION_KEY, None)
    if QualityFlag.RETRACTED not in values["quality_flags"]:
        return metadata
    reason = given.get("reason") if isinstance(given, dict) else None
    if not isinstance(reason, str) or not reason.strip():
        reason = IMPORTED_RETRACTION_REASON
    record = retraction_record(reason=reason[:REASON_MAX_CHARS], by=agent.name, by_kind="agent", at=now)
    erased = values["content"] == REDACTED_CONTENT and not (
        values["corrected_fact"] or values["correct_fact"] or values["alternatives_considered"]
    )
    if erased and set(metadata) <= {IMPORTED_KEY}:
        record["redacted"] = True
    metadata[RETRACTION_KEY] = record
    return metadata


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

    ``mode`` AGENT (the API; ``agent`` is the caller) checks each item with ``ImportItemSerializer``,
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
    serializer = ImportItemSerializer(context={"agent": agent, "now": now}) if agent_mode else RestoreItemSerializer()
    for offset, item in enumerate(items):
        if item is None:
            continue  # a line that failed to parse; its error is in parse_errors
        try:
            row = item if precleaned else item_clean(item, serializer)
            if agent_mode:
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
    corrections = {row["id"] for _, row in cleaned if row["thought_category"] == ThoughtCategory.CORRECTION}
    if any(superseding.values()):
        named = {ref for refs in superseding.values() for _, ref in refs} & in_space
        for category, pk in Thought.objects.filter(
            pk__in=named,
            thought_category__in=[ThoughtCategory.TRANSITION_MARKER, ThoughtCategory.CORRECTION],
        ).values_list("thought_category", "pk"):
            (markers if category == ThoughtCategory.TRANSITION_MARKER else corrections).add(pk)
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
            elif name == "source_ids" and ref in corrections:
                errors.append(LineError(line, f"{ref} {_CORRECTION_REFUSED}", name))
        for name in (*ARRAY_REFS, "related_thoughts", *FK_REFS):
            values = row[name] if isinstance(row[name], list) else ([row[name]] if row[name] else [])
            for ref in values:
                if ref in batch_ids or ref in in_space:
                    continue
                if defer_links and name in (*FK_REFS, "related_thoughts"):
                    deferred.append((str(row["id"]), name, str(ref)))
                    continue
                if defer_links and name in ARRAY_REFS:
                    continue  # a later batch of the file: dump_plan checked them against the file and the space
                errors.append(LineError(line, f"no thought {ref} in this import or in this space.", name))
    if agent_mode:
        errors += _pointer_errors(cleaned, known=set(batch_ids) | in_space)
    errors += _contradicted_by_errors(cleaned, known=set(batch_ids) | in_space)
    errors += _cycle_errors(cleaned)
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
        if agent_mode:
            # An agent's thought is searched by the server's vector of its text: a vector the caller chose
            # would make it answer questions its text is not about (an operator's restore keeps its own).
            row["embedding"] = None
        if row["embedding"] is None:
            to_embed.append((row, "embedding", row["content"]))
        if row["thought_category"] == ThoughtCategory.CORRECTION and agent_mode:
            # The guard's vector is the server's vector of the corrected fact the correction shows, never
            # one the caller chose (which could guard a fact the correction does not name).
            row["corrected_fact_embedding"] = None
        if (
            row["corrected_fact_embedding"] is None
            and row["thought_category"] == ThoughtCategory.CORRECTION
            and row["corrected_fact"].strip()
        ):
            to_embed.append((row, "corrected_fact_embedding", row["corrected_fact"]))
    # An agent's thought that repeats a corrected fact is flagged as a contribution would be (SPEC 2.5).
    guarded = []
    if agent_mode and _space_has_corrections(space):
        guarded = [row for _, row in cleaned if row["thought_category"] != ThoughtCategory.CORRECTION]
    label = embedder.current_model_label()
    if to_embed:
        try:
            with embedder.stored_texts():  # thoughts' texts, not queries: kept out of the query cache
                vectors = embedder.embed_many([text for _, _, text in to_embed])
        except embedder.EmbeddingError as exc:
            raise ServiceFailure(f"Could not embed the imported thoughts: {exc}", code="EMBEDDING_FAILED")
        for (row, name, _), vector in zip(to_embed, vectors, strict=True):
            row[name] = vector
            if name == "embedding":
                row["embedding_model"] = label
    _guard_corrections(space=space, rows=guarded, vectors={id(row): row["embedding"] for row in guarded})
    if agent_mode:
        _unrelated_refuse(space=space, agent=agent, rows=[row for _, row in cleaned])
    for _, row in cleaned:
        if not row["embedding_model"]:
            row["embedding_model"] = label

    agents = {}
    names = {row["agent"] for _, row in cleaned if row["agent"]}
    if agent_mode:
        agents = dict.fromkeys(names | {""}, agent)  # every row is the caller's (ImportItemSerializer)
    elif names:
        agents = {a.name: a for a in Agent.objects.filter(space=space, name__in=names)}
    default_name = agent.name if agent is not None else "import"
    # accessed_by comes by name (an export writes names: ids are one space's); stored by the ids of the
    # space's agents of those names (an agent's own import names only itself), other names as they are.
    if agent_mode:
        reader_ids = {agent.name: str(agent.pk)}
    else:
        readers = {name for _, row in cleaned for name in row["accessed_by"]}
        named = Agent.objects.filter(space=space, name__in=readers).values_list("name", "pk") if readers else []
        reader_ids = {name: str(pk) for name, pk in named}
    rows: list[Thought] = []
    related_pairs: list[tuple[uuid.UUID, uuid.UUID]] = []
    for _, row in cleaned:
        thought_id = row["id"]
        fk_values = {
            f"{name}_id": (None if (str(thought_id), name, str(row[name])) in deferred_keys else row[name])
            for name in FK_REFS
        }
        values = {name: row[name] for name in VALUE_FIELDS}
        values["accessed_by"] = activity.accessed_by_ids(row["accessed_by"], reader_ids)
        values["contributor_id"] = row["contributor_id"] or default_name
        values["contributor_name"] = row["contributor_name"] or row["contributor_id"] or default_name
        values["created_at"] = row["created_at"] or now
        if agent_mode:
            values["context_metadata"] = _server_owned_written(values, agent=agent, now=now)
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
                _derive_lineage(space=space, rows=rows, server_clock=agent_mode)
    except IntegrityError as exc:
        # Another import storing some of the same ids committed between the check above and the COPY.
        stored_meanwhile = set(Thought.objects.filter(pk__in=[r.pk for r in rows]).values_list("pk", flat=True))
        if isinstance(exc.__cause__, psycopg.errors.UniqueViolation) and stored_meanwhile:
            lines = [
                LineError(line, f"a thought with id {row.get('given_id') or row['id']} was stored meanwhile.", "id")
                for line, row in cleaned
                if row["id"] in stored_meanwhile
            ]
            raise ImportConflict(
                f"{len(lines)} id(s) of this batch were stored by another request meanwhile; nothing of this batch "
                "was stored. Leave 'id' out of those lines to get new ones, or don't send them again.",
                extra={"lines": [e.as_dict() for e in lines[:200]], "error_count": len(lines)},
            ) from exc
        raise _database_refused(exc) from exc
    except DataError as exc:
        raise _database_refused(exc) from exc
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
#: load make retrieve-only memory calls about twice as slow (docs/performance.md, "PostgreSQL").
ANALYZE_AFTER_SHARE = 0.1
ANALYZE_AFTER_MIN = 1000


def _database_refused(exc: Exception) -> ImportInvalid:
    return ImportInvalid(
        f"The database refused the batch ({str(exc).splitlines()[0]}); nothing of it was stored. "
        "Check the values of the lines and send it again.",
        extra={"lines": [], "error_count": 1},
    )


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
    finds it over ``gin_pending_list_limit`` (4 MB), or by (auto)vacuum. After a 10,000-note import
    the pending list holds ~10,000 thoughts' lexemes (315 pages), which every full-text side of a
    memory search scans: bench-compare's retrieve-only p50 is 14.8 ms until the list is merged, 9.7 ms
    after (docs/performance.md, "PostgreSQL"). An import merges what it added, in bulk, as
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

    ``bulk_create`` spends about as long in Python as the database spends inserting: every value goes
    through its field's conversion and the rows are pasted into one huge client-side-bound INSERT
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


def _unrelated_refuse(*, space: Space, agent: Agent, rows: list[dict[str, Any]]) -> None:
    """An agent's imported refinement, consolidation or correction of a thought stored before the batch
    has to be about it, as a live one (``lineage.unrelated_refuse``); a retracted item supersedes nothing."""
    batch = {row["id"] for row in rows}
    for row in rows:
        if QualityFlag.RETRACTED in row["quality_flags"]:
            continue
        if row["thought_category"] == ThoughtCategory.CORRECTION:
            field, named = "supersedes", row["supersedes"]
        elif row["thought_type"] in (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION):
            field, named = "source_ids", row["source_ids"]
        else:
            continue
        stored = [pk for pk in named if pk not in batch]
        if stored and row["embedding"] is not None:
            unrelated_refuse(space=space, agent=agent, vector=row["embedding"], source_ids=stored, field=field)


def _link_related(pairs: Iterable[tuple[uuid.UUID, uuid.UUID]]) -> None:
    """Symmetrical many-to-many: both directions, once each (ignore_conflicts for the second end)."""
    through = Thought.related_thoughts.through
    links = {(a, b) for a, b in pairs} | {(b, a) for a, b in pairs}
    if links:
        through.objects.bulk_create(
            [through(from_thought_id=a, to_thought_id=b) for a, b in links], ignore_conflicts=True, batch_size=1000
        )


def _derive_lineage(*, space: Space, rows: list[Thought], server_clock: bool) -> None:
    """What a live contribution does to the thoughts it builds on, oldest import first (so the newest
    refiner ends as ``refined_by``): sources of a refinement/consolidation and the ``supersedes`` of a
    correction become superseded and their pending suggestions are closed. A correction also
    supersedes the live corrections it replaces and lists them in its ``supersedes``, locked as
    ``thought_correct`` locks them, so one correction per fact stays live; a correction of the batch
    not handled yet is not replaced by an older one. A retracted row supersedes nothing, as a live
    retraction hands back what it superseded. (Only thoughts stored before the batch can have
    suggestions to close.)

    ``superseded_at`` keeps the first time: with ``server_clock`` (an agent's import: the rows may be
    other agents' thoughts, whose dates never come from the body) the server's, else the item's
    created_at (an operator's dump, which says when it happened)."""
    batch = {row.pk for row in rows}
    pending = set(batch)
    for row in sorted(rows, key=lambda r: r.created_at):
        pending.discard(row.pk)
        if QualityFlag.RETRACTED in row.quality_flags:
            continue  # withdrawn: it buries nothing, as a live retraction hands back what it superseded
        at = Coalesce(F("superseded_at"), Now() if server_clock else row.created_at)
        if row.thought_type in (ThoughtType.REFINEMENT, ThoughtType.CONSOLIDATION) and row.source_ids:
            ids = [pk for pk in row.source_ids if pk != row.pk]
            Thought.objects.filter(space=space, pk__in=ids).update(superseded=True, refined_by=row.pk, superseded_at=at)
            suggestions_close_superseded(space_id=space.pk, thought_ids=[pk for pk in ids if pk not in batch], by=row)
        if row.thought_category == ThoughtCategory.CORRECTION and row.supersedes:
            ids = [pk for pk in row.supersedes if pk != row.pk]
            earlier = Thought.objects.filter(space=space, pk__in=ids, superseded_by__isnull=False)
            ahead = set(earlier.values_list("superseded_by_id", flat=True)) - set(ids)
            locked = thoughts_lock_in_space(space_id=space.pk, ids=[*ids, *ahead], field="supersedes")
            replaced = [
                pk
                for pk in corrections_replaced(space=space, targets=[t for t in locked if t.pk in ids], listed=ids)
                if pk != row.pk and pk not in pending
            ]
            if replaced:
                row.supersedes = [*row.supersedes, *replaced]
                Thought.objects.filter(pk=row.pk).update(supersedes=row.supersedes)
            ids += replaced
            Thought.objects.filter(space=space, pk__in=ids).update(
                superseded=True, superseded_by=row.pk, superseded_at=at
            )
            suggestions_close_superseded(space_id=space.pk, thought_ids=[pk for pk in ids if pk not in batch], by=row)


def _space_has_corrections(space: Space) -> bool:
    """Whether a correction of ``space`` can guard anything (the guard needs its corrected fact's vector)."""
    return Thought.objects.filter(
        space=space, thought_category=ThoughtCategory.CORRECTION, corrected_fact_embedding__isnull=False
    ).exists()


def thoughts_import_links(*, space: Space, links: list[tuple[str, str, str]]) -> list[str]:
    """Apply the references deferred by multi-batch imports; returns the ones that named no thought
    of ``space``, or a ``contradicted_by`` that names no correction (reported, not applied)."""
    if not links:
        return []
    targets = {uuid.UUID(ref) for _, _, ref in links}
    found = Thought.objects.filter(space=space, pk__in=targets).values_list("pk", "thought_category")
    existing = {str(pk) for pk, _ in found}
    corrections = {str(pk) for pk, category in found if category == ThoughtCategory.CORRECTION}
    wrong = {
        (thought, name, ref)
        for thought, name, ref in links
        if ref in existing and name == "contradicted_by" and ref not in corrections
    }
    dangling = [
        f"{thought} {name} -> {ref}: "
        + (_not_a_correction(ref) if (thought, name, ref) in wrong else "no such thought in the space.")
        for thought, name, ref in links
        if ref not in existing or (thought, name, ref) in wrong
    ]
    with transaction.atomic():
        pairs = []
        for thought, name, ref in links:
            if ref not in existing or (thought, name, ref) in wrong:
                continue
            if name == "related_thoughts":
                pairs.append((uuid.UUID(thought), uuid.UUID(ref)))
            else:
                Thought.objects.filter(space=space, pk=thought).update(**{f"{name}_id": ref})
        _link_related(pairs)
    return dangling


def _refuse_rows(errors: list[LineError], what: str) -> ImportInvalid:
    return ImportInvalid(
        f"{len(errors)} problem(s) in the {what}; none of them was stored.",
        extra={"lines": [e.as_dict() for e in sorted(errors, key=lambda e: e.line)[:200]], "error_count": len(errors)},
    )


def _cleaned(rows: list[Any], clean, what: str) -> list[dict[str, Any]]:
    accepted, refused = clean_each(rows, clean)
    if refused:
        raise _refuse_rows([LineError(number, bad.message, bad.field) for number, bad in refused], what)
    return [row for _, _, row in accepted]


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
    # A pending suggestion about a thought that is superseded here was settled by what superseded it (as
    # a live supersede closes it): accepting it would correct a thought nobody is served, over that.
    stale = Thought.objects.filter(space=space, superseded=True, pk__in={o.thought_id for o in objs})
    suggestions_close_superseded(space_id=space.pk, thought_ids=list(stale.values_list("pk", flat=True)), by=None)
    return len(objs)
