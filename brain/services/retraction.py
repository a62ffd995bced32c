"""Retracting a thought: Colony's audit-safe answer to "forget this" (SPEC 5).

A retracted thought is superseded without a replacement: ``superseded=True`` with no
``superseded_by``/``refined_by``, flagged ``retracted``, and who, when and why are kept in
``context_metadata["retraction"]``. It is never deleted (seeds: thoughts stay for audit) and it
answers no memory call (the search's pools skip dead ends, ``brain.selectors.search``). What it
superseded is live again, as if it had never been contributed (its own ``source_ids`` /
``supersedes`` keep the history).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Callable, Iterable

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.db.models import F, Func, JSONField, OuterRef, Q, QuerySet, Subquery, TextField, UUIDField, Value
from django.db.models.functions import Cast, Concat, Left
from django.utils import timezone

from api.errors import Conflict, Forbidden, NotFound, ValidationFailed
from api.parsers import text_problem
from api.text import quoted
from brain import embedding as embedder
from brain.choices import IMPORTED_KEY, QualityFlag, ThoughtCategory
from brain.judging import cues as judge_cues
from brain.judging import embedding as judge_embedding
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.selectors.lineage import PREVIEW_CHARS
from brain.services import text_stats
from brain.services.flags import thoughts_unflag_contradicting
from brain.services.lineage import lineage_release, markers_refuse
from brain.services.memory.response import BEST_QUOTE_CHARS
from brain.services.pipeline import thought_content_changed
from brain.services.receipts import receipts_erase
from brain.services.suggestions import suggestions_close_superseded
from core.db import RETRACTION_LOCK_NAMESPACE
from core.models import Agent, Space

REASON_MAX_CHARS = 2000

#: What a redacted thought's content becomes (its author, time and reason stay in the retraction record).
REDACTED_CONTENT = "[redacted: this thought's text was erased when it was retracted]"

#: What a copy of a redacted thought's text becomes inside another text (a correction quoting it).
REDACTED_QUOTE = "[redacted]"

#: The key of ``context_metadata`` that holds a retraction's record ({reason, by, by_kind, at} and, once
#: its text is erased, redacted, redacted_by, redacted_reason). Colony writes it, never a caller: an
#: agent's import writes it from the token and the clock (``brain.transfer``).
RETRACTION_KEY = "retraction"

#: Texts shorter than this are not searched for elsewhere: a thought of a few characters ("yes") would
#: blank those characters in every text of the space.
QUOTE_MIN_CHARS = 12

#: Other apps' copies of a thought's text to erase with it (``thought_id`` -> rows changed); quality
#: registers its turn items' excerpts when it loads (brain does not import quality: the layers test).
REDACTION_HOOKS: list[Callable[[uuid.UUID], int]] = []

#: Other apps' records that may quote a redacted text anywhere in their free text, swept with
#: :func:`texts_erase` (``space_id=``, ``texts=``, ``agent_id=``: the author's records only, or None for
#: the whole space) -> rows changed; quality registers its turn log (prompts, responses, tool calls).
REDACTION_SWEEPS: list[Callable[..., int]] = []


@transaction.atomic
def thought_retract(
    *,
    space: Space,
    thought_id: str | uuid.UUID,
    reason: str,
    agent: Agent | None = None,
    user_name: str | None = None,
    redact: bool = False,
) -> Thought:
    """Retract a thought of ``space``; ``agent`` (its contributor) or a human (``user_name``) does it.

    An agent may retract only what it contributed (another agent's wrong fact is corrected, not
    retracted); a human member of the space may retract any thought. Transition markers are the
    workflow's audit trail and can't be retracted. Retracting twice is a 409.

    What the thought superseded (the sources of a refinement or consolidation, the thoughts a
    correction superseded) is handed back (``lineage.lineage_release``): live again unless something
    else still supersedes it, or the thought was itself refined or corrected (its successor carries
    the line on). The returned thought's ``live_again`` lists the ids that are live again. The
    ``contradicts_correction`` flags a retracted correction set on others (``contradicted_by`` it) pass
    to the correction that stands for the same thought after it (``_standing_correction``), or come off
    when none does. Pending
    suggestions on it, and those it raised against others as their contradicting statement, are closed.

    ``redact`` (a leaked secret, personal data) also erases its text where Colony keeps it: the content
    becomes REDACTED_CONTENT (full text follows; the vector is dropped and computed again from it), its
    wrong/right facts, alternatives, metadata, topic, tags and source go (the retraction and import
    records stay), the admin's log names it by the erased text, the
    query-log row of the call that stored it and the correction suggestions quoting it lose their text,
    REDACTION_HOOKS erase other apps' copies (turn items' excerpts), and the copies Colony made
    elsewhere go too (``_erase_copies``: corrections of it, kept answers quoting it). An agent's
    redaction stops there; a human's also replaces the text in every query-log prompt, suggestion
    statement and kept answer of the space. Without it the text stays for audit and is still served,
    ranked last. A thought retracted before without it can be retracted again with it (only the text
    is erased then); otherwise retracting twice is a 409. Whether it is retracted, and whether its text
    is erased, is read from what a retraction leaves (``thought_is_retracted``, ``thought_is_erased``),
    never from a flag or a record alone.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed(
            "Say why the thought is retracted (reason).", extra={"fields": {"reason": ["Required."]}}
        )
    if len(reason) > REASON_MAX_CHARS:
        raise ValidationFailed(f"The reason is longer than {REASON_MAX_CHARS} characters.")
    problem = text_problem(reason)  # the API's field refuses it first; the web form hands the reason over as typed
    if problem:
        raise ValidationFailed(f"reason: {problem}", extra={"fields": {"reason": [problem]}})
    if (agent is None) == (user_name is None):
        raise ValueError("thought_retract needs exactly one of agent or user_name")
    try:
        key = uuid.UUID(str(thought_id))
    except ValueError:
        raise NotFound(f"No thought {thought_id!r}: not a thought id (UUID).", code="THOUGHT_NOT_FOUND") from None
    # One retraction of the space at a time: a retraction moves rows' pointers onto other existing
    # thoughts (lineage_release), so two at once could each read "what points at me" before the other
    # moved a row onto it, and leave that row superseded by a retracted thought with nothing live after
    # it. Other writes only ever make rows stop pointing at an existing thought. Answers being kept for an
    # Idempotency-Key hold the lock shared (brain.services.receipts): a redaction erases them once kept.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [RETRACTION_LOCK_NAMESPACE, space.pk])
    # The thought and what it superseded, locked together in id order (a correction or refinement
    # locking some of the same rows in that order can't deadlock with it); under the lock above, the
    # set read before the row locks holds every row that may point at it.
    held = Q(refined_by_id=key) | Q(superseded_by_id=key)
    ids = [key, *Thought.objects.filter(held, space=space).values_list("pk", flat=True)]
    rows = list(Thought.objects.select_for_update().filter(space=space, pk__in=ids).order_by("pk"))
    thought = next((row for row in rows if row.pk == key), None)
    if thought is None:
        raise NotFound(f"No thought {key} in this space.", code="THOUGHT_NOT_FOUND")
    markers_refuse([thought], action="retracted")
    if agent is not None and thought.agent_id != agent.id:
        raise Forbidden(
            f"Only the agent that contributed this thought can retract it; correct it instead "
            f"(POST /api/v1/thoughts/{thought.id}/correct) if it is wrong.",
            code="NOT_CONTRIBUTOR",
        )
    broad = agent is None  # a human's redaction also sweeps the space's prompts and statements (_erase_copies)
    if thought_is_retracted(thought):
        if thought_is_erased(thought):
            raise Conflict(
                "This thought is already retracted and its text erased; nothing changed.", code="ALREADY_RETRACTED"
            )
        if not redact:
            raise Conflict(
                "This thought is already retracted; nothing changed. To erase its text too, send redact: true.",
                code="ALREADY_RETRACTED",
            )
        # Retracted before, its text kept; now it is to be erased too (a secret noticed later).
        record = thought.context_metadata[RETRACTION_KEY]
        _redact(
            thought,
            {**record, "redacted_by": agent.name if agent is not None else user_name, "redacted_reason": reason},
            broad=broad,
        )
        thought.live_again = []
        return thought
    # A thought that a live successor superseded leaves its sources to that successor's line: a
    # refinement of it carries what it improved on.
    replaced = thought.refined_by_id is not None or thought.superseded_by_id is not None
    now = timezone.now()
    thought.superseded = True
    thought.superseded_at = thought.superseded_at or now
    if QualityFlag.RETRACTED not in thought.quality_flags:
        thought.quality_flags = [*thought.quality_flags, QualityFlag.RETRACTED]
    record = retraction_record(
        reason=reason,
        by=agent.name if agent is not None else user_name,
        by_kind="agent" if agent is not None else "human",
        at=now,
    )
    thought.context_metadata = {**(thought.context_metadata or {}), RETRACTION_KEY: record}
    thought.save(update_fields=["superseded", "superseded_at", "quality_flags", "context_metadata"])
    if redact:
        _redact(thought, record, broad=broad)
    suggestions_close_superseded(
        space_id=thought.space_id, thought_ids=[thought.pk], by=None
    )  # its own and those it raised
    superseded = [row for row in rows if row.pk != key and key in (row.refined_by_id, row.superseded_by_id)]
    thought.live_again = [] if replaced else lineage_release(withdrawn=thought, locked=superseded)
    if thought.thought_category == ThoughtCategory.CORRECTION:
        thoughts_unflag_contradicting(correction=thought, heir=_standing_correction(thought))
    return thought


def _standing_correction(withdrawn: Thought) -> Thought | None:
    """The live correction that stands, after ``withdrawn`` (a correction, its lineage just released) is
    retracted, for what it corrected: the live correction that now supersedes one of its ``supersedes``
    (the one that replaced it, or an earlier one handed back), the newest if several; None when none
    does."""
    superseding = Thought.objects.filter(space_id=withdrawn.space_id, pk__in=withdrawn.supersedes).values(
        "superseded_by_id"
    )
    return (
        Thought.objects.filter(
            space_id=withdrawn.space_id,
            pk__in=superseding,
            thought_category=ThoughtCategory.CORRECTION,
            superseded=False,
        )
        .order_by("-created_at", "-pk")
        .only("id")
        .first()
    )


def retraction_record(*, reason: str, by: str, by_kind: str, at: dt.datetime) -> dict:
    """The record of a retraction, as Colony writes it in ``context_metadata[RETRACTION_KEY]``."""
    return {"reason": reason, "by": by, "by_kind": by_kind, "at": at.isoformat()}


def thought_is_retracted(thought: Thought) -> bool:
    """Whether ``thought`` is retracted: what a retraction leaves, all of it (superseded, the ``retracted``
    flag and the record). A flag alone on a live thought retracts nothing, and blocks no retraction."""
    record = (thought.context_metadata or {}).get(RETRACTION_KEY)
    return thought.superseded and QualityFlag.RETRACTED in thought.quality_flags and isinstance(record, dict)


def thought_is_erased(thought: Thought) -> bool:
    """Whether ``thought``'s text is erased, judged by what is stored, never by a record's word: its content
    is REDACTED_CONTENT, its facts, alternatives, topic, tags and source are empty and its metadata is the
    retraction record only."""
    return (
        thought.content == REDACTED_CONTENT
        and not (thought.corrected_fact or thought.correct_fact or thought.alternatives_considered)
        and not (thought.topic or thought.tags or thought.source_ref)
        and set(thought.context_metadata or {}) <= {RETRACTION_KEY, IMPORTED_KEY}
    )


def _admin_history_rename(thought_ids: Iterable[uuid.UUID]) -> None:
    """The admin's log names a thought by ``str(thought)`` (its id and the first 60 characters of its content):
    each entry about one of ``thought_ids`` is renamed after the thought's text as it is now, in one UPDATE."""
    named = Thought.objects.filter(pk=Cast(OuterRef("object_id"), UUIDField())).values(
        repr=Concat(Cast("id", TextField()), Value(" "), Left("content", 60), output_field=TextField())
    )
    LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(Thought), object_id__in=[str(pk) for pk in thought_ids]
    ).update(object_repr=Subquery(named[:1]))


def text_pattern(text: str, *, in_json: bool = False) -> str:
    """A PostgreSQL regular expression matching ``text`` as one row per fact reads it (case aside, any run
    of whitespace between its words), for ``~*`` and ``regexp_replace(..., 'gi')``. ``in_json``: as it
    reads inside a JSON value's text (quotes and backslashes escaped, a line break written ``\\n``)."""
    words = text.split()
    if in_json:
        words = [json.dumps(word, ensure_ascii=False)[1:-1] for word in words]
    gap = r"(?:\s|\\[nrt])+" if in_json else r"\s+"
    return gap.join(re.escape(word) for word in words)


def _erased(expression, pattern: str) -> Func:
    return Func(
        expression, Value(pattern), Value(REDACTED_QUOTE), Value("gi"), function="REGEXP_REPLACE",
        output_field=TextField(),
    )  # fmt: skip


def texts_erase(rows: QuerySet, texts: Iterable[str], *, fields: Iterable[str] = (), json_fields: Iterable[str] = ()):
    """Replace each copy of ``texts`` in ``fields`` (text) and ``json_fields`` (JSON, matched in its text) of
    ``rows`` with REDACTED_QUOTE, whatever its case and spacing (:func:`text_pattern`); the ids of the rows
    changed. A row is read only if it holds the text's longest word (a cheap ``ILIKE`` first: the pattern
    of a long text is slow to match against every row of a space)."""
    fields, json_fields = list(fields), list(json_fields)
    changed: set = set()
    for text in texts:
        if len(text.strip()) < QUOTE_MIN_CHARS:
            continue
        plain, in_json = text_pattern(text), text_pattern(text, in_json=True)
        longest = max(text.split(), key=len)
        longest_in_json = json.dumps(longest, ensure_ascii=False)[1:-1]
        found = Q()
        for field in fields:
            found |= Q(**{f"{field}__icontains": longest, f"{field}__iregex": plain})
        annotated = rows.annotate(**{f"{field}_as_text": Cast(field, TextField()) for field in json_fields})
        for field in json_fields:
            found |= Q(**{f"{field}_as_text__icontains": longest_in_json, f"{field}_as_text__iregex": in_json})
        ids = list(annotated.filter(found).values_list("pk", flat=True))
        if not ids:
            continue
        updates = {field: _erased(F(field), plain) for field in fields}
        for field in json_fields:
            updates[field] = Cast(_erased(Cast(field, TextField()), in_json), JSONField())
        rows.model.objects.filter(pk__in=ids).update(**updates)
        changed.update(ids)
    return changed


def _redact(thought: Thought, record: dict, *, broad: bool) -> None:
    """Erase ``thought``'s text where Colony keeps it (see thought_retract's ``redact``); ``broad`` (a
    human's redaction) also where others quote it (``_erase_copies``)."""
    texts = _texts_of(thought)
    lexemes = text_stats.thought_lexemes(thought_id=thought.pk)
    thought.content = REDACTED_CONTENT
    thought.corrected_fact = thought.correct_fact = thought.alternatives_considered = thought.topic = ""
    thought.corrected_fact_embedding = thought.source_ref = None
    thought.tags = []
    kept = {key: value for key, value in (thought.context_metadata or {}).items() if key == IMPORTED_KEY}  # {by, at}
    thought.context_metadata = {**kept, RETRACTION_KEY: {**record, "redacted": True}}
    thought.save(
        update_fields=[
            "content", "corrected_fact", "correct_fact", "alternatives_considered", "corrected_fact_embedding",
            "context_metadata", "topic", "tags", "source_ref",
        ]
    )  # fmt: skip
    thought_content_changed(thought_id=str(thought.pk))  # the vector of the old text goes now, a new one after commit
    _admin_history_rename([thought.pk])
    QueryLog.objects.filter(stored_thought=thought).update(query_text=REDACTED_CONTENT)
    # Its draft and a judge's reason quote the text (an LLM judge's reason quotes the excerpt it read).
    CorrectionSuggestion.objects.filter(thought=thought).update(draft={}, reason=REDACTED_CONTENT)
    CorrectionSuggestion.objects.filter(contradicting_thought=thought).update(
        statement=REDACTED_CONTENT, draft={}, reason=REDACTED_CONTENT
    )
    for hook in REDACTION_HOOKS:
        hook(thought.pk)
    _erase_copies(thought, texts, broad=broad)
    # The search statistics hold the text's words as +1/-1 rows until they are folded: folded now, so a
    # word only this text held leaves no row; and this process's query cache forgets its vectors.
    text_stats.lexemes_fold(space_id=thought.space_id, lexemes=lexemes)
    embedder.query_cache.discard(texts)
    judge_embedding.vectors_forget(texts)
    judge_cues.texts_forget()


def _texts_of(thought: Thought) -> list[str]:
    """The texts of ``thought`` that others may quote, as stored and stripped (an imported text may begin
    with a line break, which a source's preview keeps), longest first (a text inside another is
    replaced after it)."""
    fields = (thought.content, thought.corrected_fact, thought.correct_fact, thought.alternatives_considered)
    texts = {form for text in fields if text for form in (text, text.strip()) if len(form.strip()) >= QUOTE_MIN_CHARS}
    return sorted(texts, key=len, reverse=True)


def _unquote(value: str, texts: list[str]) -> str:
    """``value`` with every copy of ``texts`` erased: whole, or cut and ended with "…" (a correction's
    default content keeps the start of a long wrong fact so, ``correction_text.correction_default_content``)."""
    for text in texts:
        value = _uncut(value.replace(text, REDACTED_QUOTE), text)
    return value


def _uncut(value: str, text: str) -> str:
    """``value`` with each start of ``text`` (QUOTE_MIN_CHARS at least) that is followed by "…" erased."""
    head = text[:QUOTE_MIN_CHARS]
    start = value.find(head)
    while start != -1:
        end, matched = start + len(head), len(head)
        while end < len(value) and matched < len(text) and value[end] == text[matched]:
            end, matched = end + 1, matched + 1
        if value.startswith("…", end):
            value = value[:start] + REDACTED_QUOTE + value[end + 1 :]
            start = value.find(head, start + len(REDACTED_QUOTE))
        else:
            start = value.find(head, start + 1)
    return value


def _erase_copies(thought: Thought, texts: list[str], *, broad: bool) -> None:
    """Erase the copies of ``thought``'s texts that Colony itself made elsewhere.

    - Corrections that superseded it: made without a ``corrected_fact`` (``POST .../correct`` with only
      the right fact, an accepted suggestion), they copied its text into ``corrected_fact`` and their
      default content. The quoted text becomes REDACTED_QUOTE; a ``corrected_fact`` that was only the
      copy is emptied (the re-contamination guard then has no wrong fact to compare with: the wrong fact
      is the erased text), its vector goes, the content's vector is computed again, and their turn
      excerpts, query-log prompts, suggestion drafts and the statements of suggestions they raised are
      erased as the thought's are.
    - Idempotency receipts (answers kept for a replay) quoting a text or its start (a source's preview,
      the best source's sentence), or a changed correction's: within the part of an answer about one of
      these thoughts or their suggestions (an entry naming its id), and anywhere in the author's own
      answers. A request sent again with that key is answered with the erased answer.
    - The author's own records: its query-log prompts and what REDACTION_SWEEPS keep of it (its turn
      log), wherever they quote a text, case and spacing aside (:func:`texts_erase`).

    Text other agents wrote themselves (their prompts, turns and thoughts, the statements of suggestions
    they raised against some other thought, their own answers' other parts) is not searched for: an
    agent's redaction of a few common words must not rewrite others' records. ``broad`` (a human's
    redaction: staff removing a leaked secret) also replaces each text, case and spacing aside, in every
    thought (``_erase_in_thoughts``; not transition markers), query-log prompt, suggestion statement and
    turn of the space, and in every kept answer.
    """
    if not texts:
        return
    space_id = thought.space_id
    # What the kept answers (receipts) quote, and what each quote becomes: a text whole or its start
    # (a source's preview, the best source's sentence), and a changed correction's old text or start.
    quoted = {quote: REDACTED_QUOTE for text in texts for quote in _starts(text)}
    about = {thought.pk}
    corrections = Thought.objects.filter(
        space_id=space_id, thought_category=ThoughtCategory.CORRECTION, supersedes__contains=[thought.pk]
    )
    for correction in corrections.select_for_update().order_by("pk"):
        content = _unquote(correction.content, texts)
        fact = "" if correction.corrected_fact.strip() in texts else _unquote(correction.corrected_fact, texts)
        right = _unquote(correction.correct_fact, texts)
        if (content, fact, right) == (correction.content, correction.corrected_fact, correction.correct_fact):
            continue
        about.add(correction.pk)
        quoted.update(zip(_starts(correction.content), _starts(content), strict=True))
        Thought.objects.filter(pk=correction.pk).update(
            content=content, corrected_fact=fact, correct_fact=right, corrected_fact_embedding=None
        )
        thought_content_changed(thought_id=str(correction.pk))
        _admin_history_rename([correction.pk])
        QueryLog.objects.filter(stored_thought=correction).update(query_text=REDACTED_CONTENT)
        CorrectionSuggestion.objects.filter(thought=correction).update(draft={})
        for hook in REDACTION_HOOKS:
            hook(correction.pk)
    if broad:
        about |= _erase_in_thoughts(thought, texts)
    # Suggestions a changed correction raised against others quote its content as their statement.
    raised = CorrectionSuggestion.objects.filter(space_id=space_id, contradicting_thought_id__in=about - {thought.pk})
    prompts = QueryLog.objects.filter(space_id=space_id)
    author = None if broad else thought.agent_id
    if broad:
        raised = CorrectionSuggestion.objects.filter(space_id=space_id)
    elif author is not None:
        prompts = prompts.filter(agent_id=author)
    else:
        prompts = prompts.none()  # an operator's restore has no author whose records these are
    texts_erase(prompts, texts, fields=["query_text"])
    texts_erase(raised, texts, fields=["statement"])
    if broad or author is not None:
        for sweep in REDACTION_SWEEPS:
            sweep(space_id=space_id, texts=texts, agent_id=author)
    suggestions = CorrectionSuggestion.objects.filter(
        Q(thought_id__in=about) | Q(contradicting_thought_id__in=about), space_id=space_id
    ).values_list("pk", flat=True)
    receipts_erase(
        space_id=space_id,
        replacements={old: new for old, new in quoted.items() if old != new and len(old) >= QUOTE_MIN_CHARS},
        about=None if broad else {str(pk) for pk in (*about, *suggestions)},
        author_id=thought.agent_id,
    )


def _erase_in_thoughts(thought: Thought, texts: list[str]) -> set[uuid.UUID]:
    """A human's redaction: every other thought of the space quoting ``texts`` (a refinement or consolidation
    repeating it, any note pasting it) has each copy replaced, whatever its case and spacing, its vectors
    computed again and its turn excerpts erased; the ids changed. Transition markers are the workflow's
    audit trail and are left as they are."""
    others = Thought.objects.filter(space_id=thought.space_id).exclude(pk=thought.pk)
    others = others.exclude(thought_category=ThoughtCategory.TRANSITION_MARKER)
    changed = texts_erase(
        others, texts, fields=["content", "corrected_fact", "correct_fact", "alternatives_considered"]
    )
    if changed:
        Thought.objects.filter(pk__in=changed).update(corrected_fact_embedding=None)
        for pk in changed:
            thought_content_changed(thought_id=str(pk))
            for hook in REDACTION_HOOKS:
                hook(pk)
        _admin_history_rename(changed)
    return changed


def _starts(text: str) -> tuple[str, ...]:
    """A text and the starts of it that answers quote (a source's preview, the best source's sentence),
    each also as Colony's sentences quote it (``api.text.quoted``: on one line, its quotes escaped)."""
    starts = (text, text[:BEST_QUOTE_CHARS], text[:PREVIEW_CHARS])
    return (*starts, *(quoted(start)[1:-1] for start in starts))


def retraction_guidance(thought: Thought) -> str:
    """What the answer to a retraction says (API; the thought page says the same)."""
    said = "Retracted: kept for audit, marked superseded without a replacement; memory calls don't return it."
    if (thought.context_metadata or {}).get("retraction", {}).get("redacted"):
        said = (
            "Retracted and redacted: its text was erased (the thought with its topic, tags and source, its "
            "query-log entry, the excerpts the quality loop kept, the copies corrections of it made, kept answers "
            "quoting it, its author's own prompts and turns quoting it); who retracted it, when and why are kept."
        )
    if thought.live_again:
        noun = "thought it had superseded is" if len(thought.live_again) == 1 else "thoughts it had superseded are"
        said += f" The {len(thought.live_again)} {noun} live again: {', '.join(map(str, thought.live_again))}."
    return said + " If a right version exists, contribute it (refines) or correct the fact instead."
