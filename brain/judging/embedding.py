"""The offline judge: sentence similarity (all-MiniLM-L6-v2) plus the cues of :mod:`brain.judging.cues`.

How it answers (every threshold is a named constant below, with its reason; measured agreement
and limits: :mod:`brain.judging`):

- ``on_topic(prompt, item)``: cosine similarity of prompt and item >= ``ON_TOPIC_MIN_SIMILARITY``
  (0.35). Scoring and validation then add the rule explicit feedback follows: an item the response
  used or contradicted was on topic (``quality.services.scoring.item_judge``).
- ``used(response, item)``: the response is split into sentences (after . ! ? ; : and at line breaks,
  so each tool call is one). Used = no sentence contradicts the item (see below) AND either the most
  similar sentence reaches ``USED_MIN_SENTENCE_SIMILARITY`` (0.5) or at least
  ``USED_MIN_WORD_OVERLAP`` (0.5) of the item's distinctive words occur in the response.
- ``contradicts(a, b)``: when ``b`` is one sentence (the brain's detector comparing two statements),
  the statement rule: similarity >= ``CONTRADICTION_MIN_SIMILARITY`` (0.75) and a negation on one
  side only whose scope touches words of the other ("uses Postgres 15" / "does not use Postgres
  15"), an opposite term from ``ANTONYMS`` ("enabled"/"disabled"), or different numbers in nearly
  identical wording (>= ``NUMBER_MISMATCH_MIN_SIMILARITY``, word Jaccard >=
  ``NUMBER_MISMATCH_MIN_WORD_OVERLAP``). When ``b`` has several sentences (a turn's response), only a
  sentence about the item's fact (similarity >= ``SENTENCE_CONTRADICTION_MIN_SIMILARITY``, 0.4) can
  contradict it: by a strong negation (``SENTENCE_NEGATIONS``: not "without"), an opposite term, or,
  at >= ``SENTENCE_NUMBER_MISMATCH_MIN_SIMILARITY`` (0.5), another value where the item states exactly
  one value that the response repeats nowhere ("after 7 days" / "after 14 days"; "30%" equals 0.3;
  0 and 1 are ignored as bounds). A negated opposite term agrees ("never required" / "optional").
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import secrets
import threading
from dataclasses import dataclass

import numpy as np
from django.db import transaction

from brain import embedding
from brain.judging.base import JudgeUnavailable, Verdict
from brain.judging.cues import (
    negation_cue,
    number_cue,
    opposition_cue,
    sentence_negation_cue,
    sentence_number_mismatch,
    sentences,
    word_overlap,
)

CONTRADICTION_MIN_SIMILARITY = 0.75
"""Two statements must be at least this similar to be about the same fact. Negated and antonym
pairs of all-MiniLM-L6-v2 score 0.81–0.95 ("uses Postgres 15"/"does not use Postgres 15": 0.91);
unrelated statements that merely share a negation score below 0.3."""

NUMBER_MISMATCH_MIN_SIMILARITY = 0.85
"""Different numbers only count as a contradiction between statements at least this similar..."""
NUMBER_MISMATCH_CONFIDENCE_FACTOR = 0.8
"""A number mismatch is a weaker cue than a negation (ids and dates change too): its confidence is
the similarity times this factor."""
ON_TOPIC_MIN_SIMILARITY = 0.35
"""An item is on topic when its cosine similarity to the prompt is at least this (all-MiniLM-L6-v2:
related question/fact pairs mostly score 0.4–0.7, unrelated ones below 0.2)."""

USED_MIN_SENTENCE_SIMILARITY = 0.5
"""A response used an item when its most similar sentence is at least this similar to the item
(and no sentence contradicts it), or..."""

USED_MIN_WORD_OVERLAP = 0.5
"""...when at least this share of the item's distinctive words appears in the response."""
SENTENCE_CONTRADICTION_MIN_SIMILARITY = 0.4
"""A response sentence at least this similar to an item is about the item's fact, so a negation or
an opposite term in it contradicts the item."""

SENTENCE_NUMBER_MISMATCH_MIN_SIMILARITY = 0.5
"""Another number contradicts only in a sentence at least this similar (numbers differ for many
harmless reasons: counts, ids, versions of other things)."""
NOT_SIMILAR_CONFIDENCE_FLOOR = 0.5
"""Confidence of "no contradiction" when the statements are similar but no cue was found: the
offline judge cannot tell, so it says so with a coin-flip confidence rather than pretending."""

_VECTOR_CACHE: dict[str, tuple[float, ...]] = {}
VECTOR_CACHE_SIZE = 4096
"""Texts whose vectors a process keeps: a turn's prompt, response and sentences are asked about once
per item, and the brain's detector compares one new thought with several old ones."""

# A text forgotten (a redaction erased it) is not cached again from a copy read before the forget: a job
# that read the text, then judges for seconds while the redaction commits, would otherwise embed it again
# and put it back for the life of the process. Each forget takes the next generation; the forgotten texts
# are kept as keyed digests (never as text) with the generation that forgot them, and a store of vectors
# of texts read at generation ``g`` skips each text forgotten after ``g``.
_LOCK = threading.Lock()
_DIGEST_KEY = secrets.token_bytes(16)
_FORGOTTEN: dict[bytes, int] = {}
FORGOTTEN_SIZE = 4096
"""Forgotten texts' digests a process keeps; past that the oldest go, and a store of texts read before
the newest one that went caches nothing (which of its texts were forgotten is unknown past that point)."""
_generation = 0
_floor = 0  # the generation of the newest digest that went
_READ_AT: contextvars.ContextVar[int | None] = contextvars.ContextVar("judge_vectors_read_at", default=None)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=_DIGEST_KEY, digest_size=16).digest()


def vectors_generation() -> int:
    """The current forget generation: take it before reading the texts to judge, for :func:`texts_read_at`."""
    return _generation


@contextlib.contextmanager
def texts_read_at(generation: int):
    """The texts judged inside were read (from the database) at ``generation`` (:func:`vectors_generation`
    taken before the read): the cache keeps no vector of one forgotten since, whenever it is embedded."""
    token = _READ_AT.set(generation)
    try:
        yield
    finally:
        _READ_AT.reset(token)


def _read_at() -> int:
    """The generation the texts being judged were read at: the caller's (:func:`texts_read_at`), else now."""
    read_at = _READ_AT.get()
    return _generation if read_at is None else read_at


def _keep(vectors: dict[str, tuple[float, ...]], *, read_at: int) -> None:
    """Cache ``vectors`` of texts read at ``read_at``, but none of a text forgotten since (hold ``_LOCK``)."""
    if read_at < _floor:
        return
    fresh = {
        text: vector
        for text, vector in vectors.items()
        if text not in _VECTOR_CACHE and (not _FORGOTTEN or _FORGOTTEN.get(_digest(text), -1) <= read_at)
    }
    if len(_VECTOR_CACHE) + len(fresh) > VECTOR_CACHE_SIZE:
        _VECTOR_CACHE.clear()
    _VECTOR_CACHE.update(fresh)


def vectors_remember(pairs) -> None:
    """Vectors already known for some texts (``(text, vector)`` pairs: stored thoughts' embeddings
    from the current embedder), so the judge doesn't embed those texts again. Same cache, same bound."""
    read_at = _read_at()
    vectors = {text: tuple(float(x) for x in vector) for text, vector in pairs}
    with _LOCK:
        _keep(vectors, read_at=read_at)


def vectors_forget(texts) -> None:
    """Drop the vectors of ``texts`` (a redacted thought's): an erased text is no key here either, and
    no copy of it read before is cached again. Inside a transaction, once more when it commits: a job
    may read the text until then."""
    texts = list(texts)
    _forget(texts)
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(lambda: _forget(texts))


def _forget(texts: list[str]) -> None:
    global _generation, _floor
    digests = [_digest(text) for text in texts]
    with _LOCK:
        _generation += 1
        for text, digest in zip(texts, digests, strict=True):
            _VECTOR_CACHE.pop(text, None)
            _FORGOTTEN.pop(digest, None)  # re-inserted last: the newest forget of it counts
            _FORGOTTEN[digest] = _generation
        while len(_FORGOTTEN) > FORGOTTEN_SIZE:
            _floor = _FORGOTTEN.pop(next(iter(_FORGOTTEN)))


def _vectors(texts: list[str]) -> list[tuple[float, ...]]:
    """Normalised vectors of ``texts``; the ones not cached are embedded in one batch."""
    read_at = _read_at()
    with _LOCK:
        known = {text: _VECTOR_CACHE[text] for text in texts if text in _VECTOR_CACHE}
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if missing:
        try:
            computed = embedding.embed_many(missing)
        except embedding.EmbeddingError as exc:
            raise JudgeUnavailable(f"Embedding model failed: {exc}") from exc
        fresh = {text: tuple(vector) for text, vector in zip(missing, computed, strict=True)}
        known.update(fresh)
        with _LOCK:
            _keep(fresh, read_at=read_at)
    return [known[t] for t in texts]


def _similarities(a: str, others: list[str]) -> list[float]:
    """Cosine similarity of ``a`` with each of ``others`` (normalised vectors: the dot product)."""
    va, *rest = _vectors([a, *others])
    if not rest:
        return []
    # In double precision, as the plain Python sum it replaces (~40 µs per pair, in the worker's hot loop).
    return (np.asarray(rest, dtype=np.float64) @ np.asarray(va, dtype=np.float64)).tolist()


def _similarity(a: str, b: str) -> float:
    return _similarities(a, [b])[0]


@dataclass(frozen=True)
class SentenceMatch:
    """The response sentence most similar to an item, and whether some similar sentence contradicts it."""

    best_sentence: str
    best_similarity: float
    contradiction: str | None  # why, if a sentence contradicts the item
    contradicting_sentence: str | None
    contradiction_similarity: float


def sentence_match(item: str, response: str) -> SentenceMatch:
    """Compare ``item`` with every sentence of ``response``.

    A sentence contradicts the item when it is about the same fact (similarity at least
    SENTENCE_CONTRADICTION_MIN_SIMILARITY) and either negates it (negation cue), uses an opposite
    term (antonym cue), or, when at least SENTENCE_NUMBER_MISMATCH_MIN_SIMILARITY similar, states
    another number (see :func:`sentence_number_mismatch`). The most similar contradicting sentence
    is reported.
    """
    parts = sentences(response)
    if not parts:
        return SentenceMatch("", 0.0, None, None, 0.0)
    scored = sorted(zip(_similarities(item, parts), parts, strict=True), key=lambda pair: -pair[0])
    best_similarity, best_sentence = scored[0]
    for similarity, sentence in scored:
        if similarity < SENTENCE_CONTRADICTION_MIN_SIMILARITY:
            break
        why = None
        if sentence_negation_cue(item, sentence):
            why = "negates it"
        elif (pair := opposition_cue(item, sentence)) is not None:
            why = f"opposite terms {pair[0]!r}/{pair[1]!r}"
        elif similarity >= SENTENCE_NUMBER_MISMATCH_MIN_SIMILARITY and sentence_number_mismatch(
            item, sentence, response
        ):
            why = "states another number"
        if why is not None:
            return SentenceMatch(best_sentence, best_similarity, why, sentence, similarity)
    return SentenceMatch(best_sentence, best_similarity, None, None, 0.0)


class EmbeddingJudge:
    """The offline default judge: similarity thresholds plus negation/antonym/number cues, applied to
    the whole text and to each sentence of a response (see the module docstring for its limits)."""

    name = "embedding"

    def contradicts(self, a: str, b: str) -> Verdict:
        if len(sentences(b)) < 2:
            return self._contradicts_whole(a, b)
        # A response of several sentences: only a sentence about the item's fact can contradict it.
        # The whole-text rule would find "a negation somewhere" in any long reply that is similar
        # overall.
        match = sentence_match(a, b)
        if match.contradiction is None:
            return Verdict(
                False,
                NOT_SIMILAR_CONFIDENCE_FLOOR,
                f"no sentence about it (most similar {match.best_similarity:.2f}) negates, opposes or renumbers it",
            )
        return Verdict(
            True,
            round(match.contradiction_similarity, 3),
            f"a sentence of the response {match.contradiction} (similarity {match.contradiction_similarity:.2f}): "
            f"{match.contradicting_sentence[:120]!r}",
        )

    def _contradicts_whole(self, a: str, b: str) -> Verdict:
        """Two statements about the same fact, one negating/opposing/renumbering the other."""
        similarity = _similarity(a, b)
        if similarity < CONTRADICTION_MIN_SIMILARITY:
            return Verdict(
                False,
                round(min(1.0, 1.0 - max(similarity, 0.0)), 3),
                f"not about the same fact (similarity {similarity:.2f} < {CONTRADICTION_MIN_SIMILARITY})",
            )
        if negation_cue(a, b):
            return Verdict(True, round(similarity, 3), f"one statement negates the other (similarity {similarity:.2f})")
        pair = opposition_cue(a, b)
        if pair is not None:
            return Verdict(
                True, round(similarity, 3), f"opposite terms {pair[0]!r}/{pair[1]!r} (similarity {similarity:.2f})"
            )
        if similarity >= NUMBER_MISMATCH_MIN_SIMILARITY and number_cue(a, b):
            return Verdict(
                True,
                round(similarity * NUMBER_MISMATCH_CONFIDENCE_FACTOR, 3),
                f"same statement with different numbers (similarity {similarity:.2f})",
            )
        return Verdict(
            False,
            NOT_SIMILAR_CONFIDENCE_FLOOR,
            f"similar (similarity {similarity:.2f}) but no negation, antonym or number cue",
        )

    def on_topic(self, prompt: str, item: str) -> Verdict:
        similarity = _similarity(prompt, item)
        ok = similarity >= ON_TOPIC_MIN_SIMILARITY
        return Verdict(
            ok,
            _threshold_confidence(similarity, ON_TOPIC_MIN_SIMILARITY),
            f"similarity {similarity:.2f} {'>=' if ok else '<'} {ON_TOPIC_MIN_SIMILARITY}",
        )

    def used(self, response: str, item: str) -> Verdict:
        match = sentence_match(item, response)
        if match.contradiction is not None:
            return Verdict(
                False,
                round(match.contradiction_similarity, 3),
                f"the response contradicts it rather than using it: a sentence {match.contradiction}",
            )
        overlap = word_overlap(response, item)
        if overlap >= USED_MIN_WORD_OVERLAP:
            return Verdict(
                True,
                _threshold_confidence(overlap, USED_MIN_WORD_OVERLAP),
                f"word overlap {overlap:.2f} >= {USED_MIN_WORD_OVERLAP}",
            )
        similarity = match.best_similarity
        ok = similarity >= USED_MIN_SENTENCE_SIMILARITY
        return Verdict(
            ok,
            _threshold_confidence(similarity, USED_MIN_SENTENCE_SIMILARITY),
            f"most similar sentence {similarity:.2f} {'>=' if ok else '<'} {USED_MIN_SENTENCE_SIMILARITY}, "
            f"word overlap {overlap:.2f}: {match.best_sentence[:80]!r}",
        )


def _threshold_confidence(value: float, threshold: float) -> float:
    """0.5 at the threshold, rising linearly to 1.0 at 0 or 1 on whichever side the value fell."""
    value = min(1.0, max(0.0, value))
    if value >= threshold:
        span = 1.0 - threshold
        return round(0.5 + 0.5 * ((value - threshold) / span if span else 1.0), 3)
    return round(0.5 + 0.5 * ((threshold - value) / threshold if threshold else 1.0), 3)
