"""Storing thoughts and computing their embeddings.

``thought_create`` is the one low-level write every other path uses (the memory endpoint,
transition markers, imports, corrections). It schedules nothing: the follow-up jobs (embedding of
a thought stored without a vector, contradiction detection) are ``brain.services.pipeline``'s.

``related_thoughts`` links are written by :func:`thought_link_related` only, whichever path stores
the thought. :func:`thought_known` finds the live thought that already says what a memory call
would store (one row per fact; imports and lineage don't ask it).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction

from api.errors import NotFound, ValidationFailed
from brain import embedding as embedder
from brain.choices import QualityFlag, ThoughtCategory, ThoughtType, topic_normal
from brain.models import Thought
from core.db import KNOWN_LOCK_NAMESPACE, binary_vector, prepared_cursor
from core.models import Agent, Space

logger = logging.getLogger("colony.brain")


#: No savepoint inside a caller's transaction (the memory call's, a correction's, a transition's): it
#: joins it, all or nothing with it, and saves the SAVEPOINT/RELEASE round trips (~0.4 ms a contribution).
@transaction.atomic(savepoint=False)
def thought_create(
    *,
    space: Space,
    content: str,
    contributor_id: str,
    contributor_name: str,
    agent: Agent | None = None,
    thought_category: str = ThoughtCategory.UNCATEGORIZED,
    thought_type: str = ThoughtType.ORIGINAL,
    embedding: list[float] | None = None,
    related_thoughts: Iterable[Any] = (),
    **fields: Any,
) -> Thought:
    """Insert one thought, a plain write: the caller schedules what follows (the embedding job when
    ``embedding`` is None, contradiction detection) with ``brain.services.pipeline``.

    ``related_thoughts`` (ids of the same space) become bidirectional links, all or nothing.
    """
    if "topic" in fields:
        fields["topic"] = topic_normal(fields["topic"])
    thought = Thought(
        space=space,
        content=content,
        contributor_id=contributor_id,
        contributor_name=contributor_name,
        agent=agent,
        thought_category=thought_category,
        thought_type=thought_type,
        embedding=embedding,
        embedding_model=embedder.current_model_label() if embedding is not None else "",
        **fields,
    )
    _thought_insert(thought)
    related = list(related_thoughts or ())
    if related:
        thought_link_related(thought=thought, related_ids=related)
    return thought


@functools.cache
def thought_columns() -> tuple[list, str]:
    """The fields a write of a thought sends (every concrete one but the generated ``search_vector``)
    and their quoted column names: :func:`thought_create`'s INSERT and the import's COPY
    (``brain.transfer.services``)."""
    fields = [f for f in Thought._meta.concrete_fields if not f.generated]
    return fields, ", ".join(connection.ops.quote_name(f.column) for f in fields)


@functools.cache
def _insert_statement() -> tuple[str, list]:
    fields, columns = thought_columns()
    return f"INSERT INTO {Thought._meta.db_table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})", fields  # noqa: S608 - names from the model


def _thought_insert(thought: Thought) -> None:
    """INSERT a built, unsaved thought: what ``save()`` sends, from one statement text built once per
    process and prepared on the connection (core.db.prepared_cursor).

    ``save()`` compiled the INSERT anew each time and pasted every value into its text, so the server
    parsed and planned ~8 KB of statement (the vector formatted twice) per contribution: ~0.5 ms of
    the web process's CPU (docs/performance.md). Values go through each field's
    ``get_db_prep_save`` as with ``save()``, except the vector, sent in binary
    (``core.db.binary_vector``). The generated ``search_vector`` is left to the database, unread.
    Thought has no save signal receivers (``tests/test_brain_thought_create.py`` checks that a stored
    thought reads back field for field)."""
    sql, fields = _insert_statement()
    values = []
    for field in fields:
        value = getattr(thought, field.attname)
        if field.attname == "embedding" and value is not None:
            values.append(binary_vector(value))
        else:
            values.append(field.get_db_prep_save(value, connection))
    with prepared_cursor() as cursor:
        cursor.execute(sql, values)
    thought._state.adding = False
    thought._state.db = connection.alias


# --- one row per fact -------------------------------------------------------------------------------
#: Held until the storing transaction ends: two contributions of one fact to one space take turns, so
#: the second one's lookup (a statement of its own, with a snapshot taken once the lock is granted)
#: sees the first one's row. Keys that share a hashtext only wait for each other.
_KNOWN_LOCK_SQL = (
    "SELECT pg_advisory_xact_lock(%(namespace)s, hashtext(%(space)s::text || brain_content_key(%(content)s)))"
)

#: The oldest live thought of the space with the text's key (``brain.models.content_key``; an index probe
#: of ``thought_space_content_key``), but not a correction or a transition marker (they keep their own
#: rules) nor one that repeats a corrected fact (flagged ``contradicts_correction``): repeating a wrong
#: fact never reinforces it. The rows with the key are read first (MATERIALIZED) and then ordered: with
#: ``ORDER BY created_at LIMIT 1`` on the table itself the planner walked the created_at index, filtering
#: every thought of the space (108 ms at 20,000 thoughts, against 0.07 ms for the probe).
_KNOWN_SQL = """
WITH same AS MATERIALIZED (
    SELECT t.id, t.created_at FROM brain_thought t
    WHERE t.space_id = %(space)s AND NOT t.superseded
          AND brain_content_key(t.content) = brain_content_key(%(content)s)
          AND NOT (t.thought_category = ANY(%(categories)s::text[]))
          AND NOT (%(flag)s = ANY(t.quality_flags))
          AND (%(sources)s::uuid[] IS NULL OR t.source_ids @> %(sources)s::uuid[])
)
SELECT id FROM same ORDER BY created_at, id LIMIT 1
"""


def thought_known(*, space: Space, content: str, sources: list | None = None) -> uuid.UUID | None:
    """The id of the live thought of ``space`` that says what ``content`` says (the same text once case,
    Unicode forms, whitespace and look-alike letters are normalised: ``brain.models.content_key``), or
    None: then the caller stores ``content``. For a refinement or a consolidation (``sources``: the
    thoughts it supersedes), only a live thought that already supersedes all of them with that text
    counts (the same refinement sent twice).

    Call it inside the transaction that stores the contribution: it locks the text's key in the space
    until that transaction ends (see ``_KNOWN_LOCK_SQL``), so concurrent identical contributions leave
    one row. The lock and the lookup are sent together (one round trip)."""
    if not connection.in_atomic_block:
        raise RuntimeError("thought_known locks until the transaction ends: call it inside transaction.atomic().")
    params = {
        "namespace": KNOWN_LOCK_NAMESPACE,
        "space": space.pk,
        "content": content,
        "categories": [ThoughtCategory.CORRECTION.value, ThoughtCategory.TRANSITION_MARKER.value],
        "flag": QualityFlag.CONTRADICTS_CORRECTION.value,
        "sources": [str(source) for source in sources] if sources else None,
    }
    with prepared_cursor() as lock_cursor, prepared_cursor() as cursor:
        with cursor.connection.pipeline():
            lock_cursor.execute(_KNOWN_LOCK_SQL, params)
            cursor.execute(_KNOWN_SQL, params)
        row = cursor.fetchone()
    return row[0] if row else None


def human_contributor(user) -> tuple[str, str]:
    """(contributor_id, contributor_name) of what a human writes to the brain (a correction from the
    web UI, the marker of a transition a human made): ``human-<username>`` and the full name."""
    return f"human-{user.get_username()}", user.get_full_name() or user.get_username()


# --- related thoughts -------------------------------------------------------------------------------
def parse_thought_ids(values: Iterable[Any], *, field: str) -> list[uuid.UUID]:
    """UUIDs from the wire, in order, without duplicates; 400 VALIDATION_ERROR for a malformed one."""
    out: dict[uuid.UUID, None] = {}  # ordered, and each id once in linear time
    for value in values:
        try:
            parsed = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        except (TypeError, ValueError, AttributeError):
            raise ValidationFailed(
                f"{field}: {value!r} is not a thought id (UUID).", extra={"fields": {field: [str(value)]}}
            )
        out[parsed] = None
    return list(out)


def thoughts_lock_in_space(*, space_id: int, ids: list[uuid.UUID], field: str) -> list[Thought]:
    """Lock the rows (in id order, so concurrent writers can't deadlock) or 404 naming the missing.

    A thought of another space is reported exactly like an unknown one: spaces don't leak.
    """
    found = list(Thought.objects.select_for_update().filter(space_id=space_id, pk__in=ids).order_by("pk"))
    found_ids = {t.pk for t in found}
    missing = [str(i) for i in ids if i not in found_ids]
    if missing:
        raise NotFound(
            f"{field}: no thought {', '.join(missing)} in this space; nothing was changed.",
            code="THOUGHT_NOT_FOUND",
            extra={"missing": missing},
        )
    return found


def thought_link_related(*, thought: Thought, related_ids: Iterable[Any]) -> int:
    """Link ``thought`` with each of ``related_ids`` both ways; returns how many thoughts it linked.

    Every id must be a thought of the same space (404 THOUGHT_NOT_FOUND otherwise, nothing linked);
    a thought can't be related to itself (400). ``related_thoughts`` is a symmetrical many-to-many,
    so one insert per pair is visible from both ends.
    """
    ids = parse_thought_ids(related_ids, field="related_thoughts")
    if thought.pk in ids:
        raise ValidationFailed("related_thoughts: a thought can't be related to itself.")
    if not ids:
        return 0
    with transaction.atomic():
        others = thoughts_lock_in_space(space_id=thought.space_id, ids=ids, field="related_thoughts")
        thought.related_thoughts.add(*others)
    return len(others)


# --- embeddings -----------------------------------------------------------------------------------
def thought_embed(*, thought_id: str, force: bool = False) -> bool:
    """Compute and store the embedding of one thought; returns False when there was nothing to do."""
    thought = Thought.objects.filter(pk=thought_id).only("id", "embedding", "embedding_model").first()
    if thought is None:
        return False
    if thought.embedding is not None and thought.embedding_model == embedder.current_model_label() and not force:
        return False
    return thoughts_embed_batch(thought_ids=[thought_id]) == 1


def thoughts_missing_embedding(*, limit: int = 64) -> list[tuple[str, str]]:
    """Ids and categories of up to ``limit`` thoughts that still have no vector (their embedding job
    was lost: no worker when they were stored, a broker outage)."""
    rows = Thought.objects.filter(embedding__isnull=True).values_list("id", "thought_category")[:limit]
    return [(str(pk), category) for pk, category in rows]


def thoughts_embed_batch(*, thought_ids: list[str]) -> int:
    """Embed many thoughts in one model call (re-embedding); returns how many were written.

    A correction's ``corrected_fact_embedding`` is recomputed in the same call: the re-contamination
    guard compares new contributions with it, so it must come from the same model as they do.
    The model runs before the transaction opens; the writes are one bulk update, of the rows whose
    text is still the text embedded (checked under their row locks): a thought edited or redacted
    while the model ran keeps the vector its own re-embedding job computes, never the old text's.
    """
    thoughts = list(
        Thought.objects.filter(pk__in=thought_ids).only("id", "content", "thought_category", "corrected_fact")
    )
    if not thoughts:
        return 0
    with_fact = [t for t in thoughts if t.thought_category == ThoughtCategory.CORRECTION and t.corrected_fact.strip()]
    # Stored texts, not queries: kept out of the query cache, where the job's put would keep a text a
    # redaction erased (and discarded from the cache) while the model ran.
    with embedder.stored_texts():
        vectors = embedder.embed_many([t.content for t in thoughts] + [t.corrected_fact for t in with_fact])
    label = embedder.current_model_label()
    for thought, vector in zip(thoughts, vectors[: len(thoughts)], strict=True):
        thought.embedding = vector
        thought.embedding_model = label
    for thought, vector in zip(with_fact, vectors[len(thoughts) :], strict=True):
        thought.corrected_fact_embedding = vector
    with transaction.atomic():
        thoughts_lock(ids=[t.pk for t in thoughts])
        now = {
            pk: (content, fact)
            for pk, content, fact in Thought.objects.filter(pk__in=[t.pk for t in thoughts]).values_list(
                "pk", "content", "corrected_fact"
            )
        }
        thoughts = [t for t in thoughts if now.get(t.pk, (None, None))[0] == t.content]
        with_fact = [t for t in with_fact if now.get(t.pk, (None, None))[1] == t.corrected_fact]
        if thoughts:
            Thought.objects.bulk_update(thoughts, ["embedding", "embedding_model"])
        if with_fact:
            Thought.objects.bulk_update(with_fact, ["corrected_fact_embedding"])
    return len(thoughts)


#: Row locks on thoughts, always taken in id order: the one order every writer of several thoughts
#: uses (suggestions here; reinforcement and implicit feedback lock the same way inside their own
#: statements, brain.services.pheromones), so two writers touching overlapping thoughts wait for each
#: other instead of deadlocking.
_LOCK_SQL = "SELECT id FROM brain_thought WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR UPDATE"


def thoughts_lock(*, ids: Iterable[str | uuid.UUID]) -> None:
    """Lock these thoughts FOR UPDATE in id order, until the caller's transaction ends. One prepared
    statement."""
    with prepared_cursor() as cursor:
        cursor.execute(_LOCK_SQL, {"ids": sorted({str(i) for i in ids})})
