"""Corrections: a wrong fact loses to one correction at once and does not creep back (SPEC 2.5, seeds/000 7).

- :func:`thought_correct` stores a correction and supersedes every thought it names, in one
  transaction: all or nothing.
- :func:`suggestion_accept` turns a pending correction suggestion into a correction.
- The re-contamination guard (a new contribution that looks like a corrected, wrong, fact gets the
  ``contradicts_correction`` flag) is a flag rule: ``brain.services.flags.correction_guard``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.db import OperationalError, connection, transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from api.errors import Conflict, ServiceFailure, ValidationFailed
from api.text import quoted, storable
from brain import embedding as embedder
from brain.choices import DEFAULT_TOPIC, QualityFlag, SuggestionStatus, ThoughtCategory
from brain.inputs import PROMPT_MAX_CHARS
from brain.models import CorrectionSuggestion, Thought
from brain.selectors.lineage import thought_get
from brain.services.categories import category_validate
from brain.services.correction_text import correction_default_content, correction_replaced_fact
from brain.services.flags import correction_guard, thoughts_flag_repeating
from brain.services.lineage import markers_refuse, unrelated_refuse
from brain.services.pheromones import DEADLOCK_RETRIES
from brain.services.suggestions import draft_problem, suggestion_lock_pending, suggestions_close_superseded
from brain.services.thoughts import parse_thought_ids, thought_create, thoughts_lock_in_space
from core.db import CORRECTION_LOCK_NAMESPACE, is_deadlock
from core.models import Agent, Space


def corrections_lock(*, space_id: int) -> None:
    """Take the space's correction lock, exclusive, until the transaction ends: after every contribution
    storing into the space meanwhile (they hold it shared: ``flags.correction_guard_under_lock``), so a
    correction's sweep for repeats sees them, and one that stores later checks the guard under the lock.
    Taken before any row lock of the transaction (a contribution holds it while it locks its sources)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [CORRECTION_LOCK_NAMESPACE, space_id])


def thought_correct(
    *,
    space: Space,
    agent: Agent | None,
    content: str,
    topic: str,
    corrected_fact: str,
    correct_fact: str,
    supersedes: Iterable[Any],
    source_ref: dict | None = None,
    vector: list[float] | None = None,
    contributor_id: str | None = None,
    contributor_name: str | None = None,
    context_metadata: dict | None = None,
    tags: list[str] | None = None,
    related_thoughts: Iterable[Any] = (),
    quality_flags: list[str] | None = None,
    read_as: dict[uuid.UUID, str] | None = None,
) -> tuple[Thought, int]:
    """Store a correction and supersede every thought in ``supersedes``; returns (correction, count).

    All or nothing, in one transaction: the superseded rows are locked first, and an unknown id or
    one of another space rejects the whole correction (404 THOUGHT_NOT_FOUND, nothing stored, nothing
    superseded), and so does a transition marker (403 MARKER_NOT_RETRACTABLE: the audit trail). Each
    superseded thought gets ``superseded=true``, ``superseded_by=<correction>`` and keeps the time it
    was FIRST superseded (the discovery metric measures from it).

    Live thoughts it does not name that repeat the wrong fact (the guard's rule) are flagged
    ``contradicts_correction``; the returned correction's ``repeats_flagged`` lists them. The correction
    itself is flagged so when its ``correct_fact`` is what another live correction, one it doesn't
    replace, declared wrong (and its ``contradicted_by`` names that correction).

    A thought corrected before is corrected again: the live correction that superseded it says the
    fact the new one replaces, so it is superseded too (listed in the new ``supersedes``, counted),
    and one correction per fact stays live instead of two answering with different facts. Two
    corrections of one thought at once: the second waits for the first's lock and supersedes it.

    ``vector`` is the embedding of ``content`` when the caller already has it (the memory endpoint
    embeds the prompt once); otherwise both ``content`` and ``corrected_fact`` are embedded here, in
    one model call, before the transaction opens (no row lock is held while the model runs). The
    ``corrected_fact`` embedding is stored with the correction so that ``flags.correction_guard``
    catches the wrong fact from the very next contribution on.

    ``read_as``: the texts of targets the caller read to write the correction (its wrong fact); one
    changed by the time it is locked (retracted and redacted meanwhile) is a 409 and nothing is stored,
    so no erased text is copied into the correction.

    Its three texts are stored as the API stores text (``api.text.storable``), whoever calls: the API,
    the pages, ``manage.py brain correct``.
    """
    content, corrected_fact, correct_fact = (storable(text or "") for text in (content, corrected_fact, correct_fact))
    too_long = {
        name: [f"At most {PROMPT_MAX_CHARS} characters."]
        for name, value in (("content", content), ("corrected_fact", corrected_fact), ("correct_fact", correct_fact))
        if len(value or "") > PROMPT_MAX_CHARS
    }
    if too_long:  # the API's serializers hold these first; the CLI and other callers reach here
        raise ValidationFailed(
            f"{', '.join(too_long)}: at most {PROMPT_MAX_CHARS} characters each. Nothing was stored.",
            extra={"fields": too_long},
        )
    if corrected_fact.strip() and _same_fact(corrected_fact, correct_fact):
        problem = (
            "correct_fact says what corrected_fact says (case, spacing and look-alike letters aside): a "
            "correction states another fact."
        )
        raise ValidationFailed(f"{problem} Nothing was stored.", extra={"fields": {"correct_fact": [problem]}})
    supersede_ids = parse_thought_ids(supersedes, field="supersedes")
    related_ids = parse_thought_ids(related_thoughts, field="related_thoughts")
    category_validate(
        category=ThoughtCategory.CORRECTION,
        fields={
            "topic": topic,
            "supersedes": supersede_ids,
            "corrected_fact": corrected_fact,
            "correct_fact": correct_fact,
        },
    )
    if not content or not content.strip():
        content = correction_default_content(corrected_fact=corrected_fact, correct_fact=correct_fact)

    try:
        if vector is None:
            vector, fact_vector, right_vector = embedder.embed_many([content, corrected_fact, correct_fact])
        else:
            fact_vector, right_vector = embedder.embed_many([corrected_fact, correct_fact])
    except embedder.EmbeddingError as exc:
        raise ServiceFailure(f"Could not embed the correction: {exc}", code="EMBEDDING_FAILED")

    name = agent.name if agent is not None else "colony"
    unrelated_refuse(space=space, agent=agent, vector=vector, source_ids=supersede_ids, field="supersedes")

    def store() -> tuple[Thought, int]:
        corrections_lock(space_id=space.pk)
        ids = list(supersede_ids)  # the named ones, then the corrections they replace
        # The named thoughts and the corrections now superseding them, locked in one id order (another
        # correction naming some of the same rows locks them in that order too: no deadlock); then the
        # replaced corrections are read from the locked rows (one committed meanwhile is locked there).
        earlier = Thought.objects.filter(space=space, pk__in=supersede_ids, superseded_by__isnull=False)
        ahead = set(earlier.values_list("superseded_by_id", flat=True)) - set(ids)
        locked = thoughts_lock_in_space(space_id=space.pk, ids=[*ids, *ahead], field="supersedes")
        targets = [row for row in locked if row.pk in set(ids)]
        changed = [str(row.pk) for row in targets if read_as and row.pk in read_as and row.content != read_as[row.pk]]
        if changed:
            raise Conflict(
                f"Thought {', '.join(changed)} changed while the correction was made (retracted or edited); "
                "read it again and send the correction again.",
                code="CONFLICT",
            )
        markers_refuse(targets, action="corrected")
        ids = [*ids, *corrections_replaced(space=space, targets=targets, listed=ids)]
        # What it declares right, a live correction it doesn't replace declared wrong: two corrections
        # would answer with opposite facts, so it is flagged as any repeat of a corrected fact is.
        contradicted_by = correction_guard(space=space, vector=right_vector, text=correct_fact, exclude=ids)
        own_flags = list(quality_flags or [])
        if contradicted_by is not None and QualityFlag.CONTRADICTS_CORRECTION not in own_flags:
            own_flags.append(QualityFlag.CONTRADICTS_CORRECTION.value)
        correction = thought_create(
            space=space,
            content=content,
            contributor_id=contributor_id or name,
            contributor_name=contributor_name or name,
            agent=agent,
            thought_category=ThoughtCategory.CORRECTION,
            embedding=vector,
            topic=topic,  # thought_create normalizes it
            corrected_fact=corrected_fact.strip(),
            correct_fact=correct_fact.strip(),
            supersedes=ids,
            source_ref=source_ref,
            corrected_fact_embedding=fact_vector,
            context_metadata=context_metadata or {},
            tags=tags or [],
            quality_flags=own_flags,
            contradicted_by=contradicted_by,
            related_thoughts=related_ids,
        )
        count = Thought.objects.filter(space=space, pk__in=ids).update(
            superseded=True,
            superseded_by=correction,
            superseded_at=Coalesce(F("superseded_at"), Now()),
        )
        suggestions_close_superseded(space_id=space.pk, thought_ids=ids, by=correction)
        correction.repeats_flagged = thoughts_flag_repeating(correction=correction, fact_vector=fact_vector)
        return correction, count

    # A correction committed while this one waited for a row is locked after the others, out of their
    # order: with many corrections of overlapping thoughts at once, PostgreSQL may break a cycle by
    # failing one. Nothing of it happened, so it is run again (not inside a caller's transaction,
    # which the failure has spoilt: there the error goes up as before).
    outer = transaction.get_connection().in_atomic_block
    for attempt in range(DEADLOCK_RETRIES + 1):
        try:
            with transaction.atomic():
                return store()
        except OperationalError as exc:
            if outer or attempt == DEADLOCK_RETRIES or not is_deadlock(exc):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def corrections_replaced(*, space: Space, targets: Iterable[Thought], listed: list[uuid.UUID]) -> list[uuid.UUID]:
    """The live corrections that superseded one of ``targets`` and are not ``listed``, locked in id order.

    A new correction of a thought that a correction superseded replaces that correction: its
    ``correct_fact`` is what the new one says is wrong now. Refinements and consolidations built on a
    target are not touched (they may have fixed the fact; nothing says they repeat it).
    """
    earlier = {t.superseded_by_id for t in targets if t.superseded_by_id is not None} - set(listed)
    if not earlier:
        return []
    return list(
        Thought.objects.select_for_update()
        .filter(space=space, pk__in=earlier, thought_category=ThoughtCategory.CORRECTION, superseded=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def thought_correct_by_id(
    *,
    space: Space,
    agent: Agent | None,
    thought_id: uuid.UUID | str,
    correct_fact: str,
    corrected_fact: str | None = None,
    content: str | None = None,
    topic: str | None = None,
    extra_supersedes: Iterable[Any] = (),
    source_ref: dict | None = None,
) -> tuple[Thought, int]:
    """Correct one thought (``POST /thoughts/{id}/correct``, ``brain correct``): returns (correction, count).

    Defaults come from the thought: the wrong fact is :func:`correction_replaced_fact` (its content, or
    for a correction the fact it said was correct), the topic its topic ("general" when it has none).
    ``extra_supersedes`` adds more wrong copies of the same fact.
    """
    target = thought_get(space=space, thought_id=thought_id)  # unknown, malformed, other space: 404
    wrong = correction_replaced_fact(target)
    return thought_correct(
        space=space,
        agent=agent,
        content=content or "",
        topic=(topic or "").strip() or target.topic or DEFAULT_TOPIC,
        corrected_fact=(corrected_fact or "").strip() or wrong,
        correct_fact=correct_fact,
        supersedes=[target.pk, *extra_supersedes],
        source_ref=source_ref,
        read_as={target.pk: target.content},
    )


def correction_guidance(correction: Thought) -> str:
    """The warning the memory response gives at once when a contribution repeats a corrected fact."""
    return (
        f"WARNING: this contribution repeats a fact that was corrected. Correction {correction.id}: "
        f"{quoted(correction.correct_fact)} (wrong: {quoted(correction.corrected_fact)}). "
        "Your contribution was stored flagged contradicts_correction; verify your source is current, "
        "and contribute a correction if the correction itself is wrong."
    )


def correction_supersede_guidance(*, count: int, repeats: list[uuid.UUID] | None = None) -> str:
    """What the response of a correction says (seeds/000 7b.4), and which live thoughts it did not
    name repeat the wrong fact (``repeats_flagged``)."""
    noun = "thought" if count == 1 else "thoughts"
    said = f"This correction supersedes {count} previous {noun}; they stay for audit but rank below it."
    if repeats:
        shown = ", ".join(str(pk) for pk in repeats[:REPEATS_NAMED])
        more = f" and {len(repeats) - REPEATS_NAMED} more" if len(repeats) > REPEATS_NAMED else ""
        said += (
            f" {len(repeats)} other live thought{'s' if len(repeats) != 1 else ''} repeat the wrong fact and "
            f"{'were' if len(repeats) != 1 else 'was'} flagged contradicts_correction (ranked below it): "
            f"{shown}{more}. If they should be superseded, name them in another correction's supersedes."
        )
    return said


#: How many of the flagged repeats the guidance names (the answer's repeats_flagged lists them all).
REPEATS_NAMED = 10


def _same_fact(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one fact as one-row-per-fact reads it (``brain.models.content_key``: case,
    NFKC forms, whitespace and look-alike letters aside)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT brain_content_key(%s) = brain_content_key(%s)", [a, b])
        return cursor.fetchone()[0]


@transaction.atomic
def suggestion_accept(
    *,
    suggestion: CorrectionSuggestion,
    resolved_by: str,
    agent: Agent | None = None,
    correct_fact: str | None = None,
    content: str | None = None,
) -> Thought:
    """Accept a pending suggestion: create the correction its draft describes and supersede the old thought.

    One transaction: the suggestion row is locked, the correction goes through ``thought_correct``
    (which supersedes the draft's ``supersedes``), and the suggestion is marked accepted with a link
    to the correction. ``correct_fact``/``content`` let the accepting agent word the correct fact
    better than the contradicting statement did. The correction is what ``POST /thoughts/{id}/correct``
    of the thought would store: its wrong fact is :func:`correction_replaced_fact` of the thought (read
    under the lock), its text, when none is given, :func:`correction_default_content` (within
    PROMPT_MAX_CHARS). 409 when the suggestion is no longer pending, or when its contradicting thought
    was superseded or retracted since (its statement no longer stands: superseding it closes the
    suggestion, and this holds for one left pending from before that rule).
    """
    corrections_lock(space_id=suggestion.space_id)  # before the suggestion's thoughts (see corrections_lock)
    locked = suggestion_lock_pending(suggestion=suggestion, action="accepted")
    statement_refuse_replaced(locked)
    if Thought.objects.filter(pk=locked.thought_id, superseded=True).exists():
        raise Conflict(
            f"Correction suggestion {locked.id} is about thought {locked.thought_id}, which was corrected, refined, "
            "consolidated or retracted since: there is no live thought left for it to correct. Nothing was changed; "
            "dismiss it.",
            code="CONFLICT",
        )
    draft = {} if draft_problem(locked.draft) else locked.draft  # a broken draft: the statement and the thought
    # A draft with an empty correct fact: the suggestion has no statement (a turn that reported the thought
    # contradicted without saying what is right); the accepting agent or human writes the fact.
    fact = (correct_fact or "").strip() or (draft["correct_fact"] if "correct_fact" in draft else locked.statement)
    if not fact.strip():
        problem = "This suggestion has no statement to take as the correct fact: send correct_fact."
        raise ValidationFailed(f"{problem} Nothing was changed.", extra={"fields": {"correct_fact": [problem]}})
    correction, _count = thought_correct(
        space=locked.space,
        agent=agent,
        content=(content or "").strip(),  # none: thought_correct words it as /correct does
        topic=draft.get("topic") or locked.thought.topic or DEFAULT_TOPIC,
        corrected_fact=correction_replaced_fact(locked.thought),
        correct_fact=fact,
        supersedes=draft.get("supersedes") or [str(locked.thought_id)],
        contributor_id=resolved_by if agent is None else None,
        contributor_name=resolved_by if agent is None else None,
        context_metadata={"accepted_suggestion": str(locked.id)},
    )
    CorrectionSuggestion.objects.filter(pk=locked.pk).update(
        status=SuggestionStatus.ACCEPTED,
        resolved_at=timezone.now(),
        resolved_by=resolved_by,
        correction=correction,
    )
    return correction


def statement_refuse_replaced(suggestion: CorrectionSuggestion) -> None:
    """409 CONFLICT when the suggestion's contradicting thought (its statement) was superseded or
    retracted: accepting it would store as the correct fact a statement Colony no longer holds. Call it
    with the suggestion's thoughts locked (``suggestion_lock_pending``)."""
    statement_id = suggestion.contradicting_thought_id
    if statement_id is None or not Thought.objects.filter(pk=statement_id, superseded=True).exists():
        return
    raise Conflict(
        f"Correction suggestion {suggestion.id} rests on thought {statement_id}, which was corrected, refined, "
        "consolidated or retracted since; its statement is no longer what Colony holds. Nothing was changed. "
        f"If thought {suggestion.thought_id} is still wrong, correct it: "
        f"POST /api/v1/thoughts/{suggestion.thought_id}/correct with the correct_fact.",
        code="CONFLICT",
    )
