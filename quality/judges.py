"""Judges: does one text contradict, concern or use another? (SPEC 2.5, 4.2)

One interface, two implementations, shared by the brain's contradiction detector and the quality
loop's turn scoring:

- :class:`EmbeddingJudge` — the offline default. Sentence similarity (all-MiniLM-L6-v2) plus a few
  surface cues. It needs no network and no key and is deterministic.
- :class:`LLMJudge` — asks a language model (Anthropic's Messages API, or any OpenAI-compatible
  ``/chat/completions`` endpoint) for a strict JSON verdict. Never required: nothing in Colony
  needs it to run or to be tested.

:func:`get_judge` picks one from ``settings.QUALITY_JUDGE`` (``embedding`` | ``llm``). A judge that
cannot answer right now (endpoint down, timeout, unparseable answer, embedding model failing)
raises :class:`JudgeUnavailable`; callers are Celery jobs, which retry it.

How the offline judge answers (every threshold is a named constant below, with its reason):

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

Measured agreement (``manage.py validate_judge quality/fixtures/judge_validation.jsonl --judge
embedding``, 53 turns / 148 items; thresholds tuned on the odd-numbered turns only, ``--split``):

=============  =========================  ==========================  =================
metric         tune half (27 t, 75 items)  held-out (26 t, 73 items)   whole file
=============  =========================  ==========================  =================
on_topic       96.0%                       84.9%                       90.5%
used           92.0%                       82.2%                       87.2%
contradicted   97.3% (found 5 of 7)        82.2% (found 2 of 10)       89.9% (7 of 17)
=============  =========================  ==========================  =================

Before this version (whole-response similarity, whole-text cues): 70.9% / 81.8% / 86.5% with 0 of
17 contradictions found. The held-out column is the honest estimate for unseen turns: below 85% on
every metric, and its contradiction agreement is *below* answering "no" always (86.3% there). The
whole-file figure, which the trust rule reads, is lifted by the half the thresholds were tuned on.

Limits of the offline judge — read these before trusting it:

- It only sees contradictions that look like each other. It misses those that need knowledge or
  paraphrase: "Redis is the broker" vs "RabbitMQ is the broker" (different names, no cue), "runs
  once a day" vs "scheduled hourly", "must call the Anthropic API in CI" vs "is never required to
  run", antonyms outside its small list, contradictions across languages.
- A negation of the same words about another subject fools it: "A snapshot older than 14 days is
  flagged stale" vs "The snapshot from yesterday was not flagged" counts as a contradiction; so do
  double negations and numbers that are ids rather than values ("task 12 done" vs "task 13 done").
- ``used`` is similarity, not understanding: a response that talks about the same thing without
  relying on the item counts as using it, one that acts on an item in other words (a command whose
  effect the item explains) does not.
- ``on_topic`` from the prompt alone is weak (70.9% on the file): short prompts ("run the tests")
  share nothing with the item that matters for them. Most of its agreement comes from the
  used-or-contradicted rule.
- English cues, with a handful of German negations (nicht, kein, nie) because the seed's brain is
  bilingual.

Agreement with hand labels is measured by ``manage.py validate_judge`` (quality loop), which decides
whether a judge is trusted for ranking.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Verdict:
    """A judge's answer: the yes/no, how sure it is (0..1) and why, in words for humans."""

    verdict: bool
    confidence: float
    reason: str


class JudgeUnavailable(RuntimeError):
    """The judge could not answer now (endpoint down, timeout, bad answer): transient, jobs retry."""


@runtime_checkable
class Judge(Protocol):
    name: str

    def contradicts(self, a: str, b: str) -> Verdict:
        """Does ``b`` contradict ``a`` (can they not both be true)?"""
        ...

    def on_topic(self, prompt: str, item: str) -> Verdict:
        """Is ``item`` relevant to ``prompt``?"""
        ...

    def used(self, response: str, item: str) -> Verdict:
        """Did ``response`` use (build on) ``item``?"""
        ...


def get_judge(name: str | None = None) -> Judge:
    """The judge named ``name``, or the one ``settings.QUALITY_JUDGE`` names."""
    chosen = (name or settings.QUALITY_JUDGE or "embedding").strip().lower()
    if chosen == "embedding":
        return EmbeddingJudge()
    if chosen == "llm":
        return LLMJudge.from_settings()
    raise ImproperlyConfigured(f"QUALITY_JUDGE must be 'embedding' or 'llm', not {chosen!r}.")


# --- offline judge --------------------------------------------------------------------------------

CONTRADICTION_MIN_SIMILARITY = 0.75
"""Two statements must be at least this similar to be about the same fact. Negated and antonym
pairs of all-MiniLM-L6-v2 score 0.81–0.95 ("uses Postgres 15"/"does not use Postgres 15": 0.91);
unrelated statements that merely share a negation score below 0.3."""

NUMBER_MISMATCH_MIN_SIMILARITY = 0.85
"""Different numbers only count as a contradiction between statements at least this similar..."""

NUMBER_MISMATCH_MIN_WORD_OVERLAP = 0.6
"""...whose words other than the numbers overlap (Jaccard) at least this much: the same sentence
with another value, not two sentences that happen to contain numbers."""

NUMBER_MISMATCH_CONFIDENCE_FACTOR = 0.8
"""A number mismatch is a weaker cue than a negation (ids and dates change too): its confidence is
the similarity times this factor."""

NEGATION_SCOPE_WORDS = 3
"""A negation counts when one of the next this-many content words also occurs in the other
statement: "does not use Postgres" negates what the other says, "..., not MySQL" does not."""

ON_TOPIC_MIN_SIMILARITY = 0.35
"""An item is on topic when its cosine similarity to the prompt is at least this (all-MiniLM-L6-v2:
related question/fact pairs mostly score 0.4–0.7, unrelated ones below 0.2)."""

USED_MIN_SENTENCE_SIMILARITY = 0.5
"""A response used an item when its most similar sentence is at least this similar to the item
(and no sentence contradicts it), or..."""

USED_MIN_WORD_OVERLAP = 0.5
"""...when at least this share of the item's distinctive words appears in the response."""

DISTINCTIVE_WORD_MIN_LENGTH = 4
"""Words shorter than this (and stop words) are not distinctive enough to show use."""

SENTENCE_CONTRADICTION_MIN_SIMILARITY = 0.4
"""A response sentence at least this similar to an item is about the item's fact, so a negation or
an opposite term in it contradicts the item."""

SENTENCE_NUMBER_MISMATCH_MIN_SIMILARITY = 0.5
"""Another number contradicts only in a sentence at least this similar (numbers differ for many
harmless reasons: counts, ids, versions of other things)."""

MIN_SENTENCE_CHARS = 4
"""Fragments shorter than this ("ok", "(1)") are not statements."""

NOT_SIMILAR_CONFIDENCE_FLOOR = 0.5
"""Confidence of "no contradiction" when the statements are similar but no cue was found: the
offline judge cannot tell, so it says so with a coin-flip confidence rather than pretending."""

NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "cannot",
        "without",
        "nicht",
        "kein",
        "keine",
        "keinen",
        "keiner",
        "nie",
    }
)
"""Words that negate what follows. ``n't`` contractions ("isn't", "doesn't") count too."""

SENTENCE_NEGATIONS = NEGATIONS - {"without"}
"""Negations that count inside one sentence of a longer response. "without" is left out: in a
narrative ("started without Redis", "used w * 0.5 without the floor") it describes what happened,
it does not deny the item's fact."""

ANTONYMS: tuple[tuple[str, str], ...] = (
    ("enabled", "disabled"),
    ("enable", "disable"),
    ("true", "false"),
    ("allowed", "forbidden"),
    ("allowed", "disallowed"),
    ("accepted", "rejected"),
    ("approved", "rejected"),
    ("passed", "failed"),
    ("passes", "fails"),
    ("succeeded", "failed"),
    ("success", "failure"),
    ("open", "closed"),
    ("online", "offline"),
    ("available", "unavailable"),
    ("active", "inactive"),
    ("valid", "invalid"),
    ("correct", "incorrect"),
    ("required", "optional"),
    ("mandatory", "optional"),
    ("supported", "unsupported"),
    ("public", "private"),
    ("synchronous", "asynchronous"),
    ("sync", "async"),
    ("increase", "decrease"),
    ("increased", "decreased"),
    ("higher", "lower"),
    ("more", "fewer"),
    ("always", "never"),
    ("included", "excluded"),
    ("present", "absent"),
    ("started", "stopped"),
    ("running", "stopped"),
    ("blocked", "unblocked"),
    ("locked", "unlocked"),
    ("safe", "unsafe"),
    ("stable", "unstable"),
    ("before", "after"),
)
"""A deliberately small list of pairs that flip a fact's meaning in engineering prose."""

STOP_WORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been
    being it its this that these those there here we you they he she i me my our your their his her
    has have had do does did will would shall should can could may might must so than too very also
    just only into onto over under about which who whom what when where why how all any each some
    such own same other per via use uses used using""".split()
)
"""Words that carry no content, for overlap and negation scope."""

_TOKEN = re.compile(r"[a-z0-9äöüß]+(?:['’][a-z]+)?(?:[.\-][a-z0-9]+)*", re.IGNORECASE)
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*$")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;:])\s+|\n+")


def _tokens(text: str) -> list[str]:
    return [t.lower().replace("’", "'") for t in _TOKEN.findall(text)]


def _stem(word: str) -> str:
    """A crude stem so that "use"/"uses"/"used" and "require"/"requires"/"required" meet."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 2 else word


def _is_negation(token: str) -> bool:
    return token in NEGATIONS or token.endswith("n't")


def _content_stems(tokens: list[str]) -> set[str]:
    return {_stem(t) for t in tokens if t not in STOP_WORDS and not _is_negation(t)}


def _scoped_negations(tokens: list[str], other_stems: set[str], negations: frozenset[str] = NEGATIONS) -> int:
    """Negations whose next NEGATION_SCOPE_WORDS content words include one the other text has."""
    count = 0
    for index, token in enumerate(tokens):
        if not (token in negations or token.endswith("n't")):
            continue
        if token == "no" and index + 1 < len(tokens) and tokens[index + 1] == "longer":
            index += 1
        scope = [t for t in tokens[index + 1 :] if t not in STOP_WORDS and not _is_negation(t)]
        if any(_stem(t) in other_stems for t in scope[:NEGATION_SCOPE_WORDS]):
            count += 1
    return count


def negation_cue(a: str, b: str) -> bool:
    """Exactly one of the two statements negates something the other one states, and it is not a
    negated opposite term ("not enabled" / "disabled", "never required" / "optional" agree)."""
    ta, tb = _tokens(a), _tokens(b)
    neg_a = _scoped_negations(ta, _content_stems(tb))
    neg_b = _scoped_negations(tb, _content_stems(ta))
    return (neg_a > 0) != (neg_b > 0) and antonym_cue(a, b) is None


def opposition_cue(a: str, b: str) -> tuple[str, str] | None:
    """An :func:`antonym_cue` pair, unless exactly one side negates: a negated opposite term says the
    same thing ("never required" / "optional")."""
    pair = antonym_cue(a, b)
    if pair is None:
        return None
    ta, tb = _tokens(a), _tokens(b)
    neg_a = _scoped_negations(ta, _content_stems(tb)) + sum(1 for t in ta if _is_negation(t))
    neg_b = _scoped_negations(tb, _content_stems(ta)) + sum(1 for t in tb if _is_negation(t))
    return pair if (neg_a > 0) == (neg_b > 0) else None


def sentence_negation_cue(item: str, sentence: str) -> bool:
    """:func:`negation_cue` for an item and one sentence of a response, where the response's side
    needs a strong negation (SENTENCE_NEGATIONS): "without" in the item still counts as the item
    negating (so "works without a JS build step" / "there is no JS build step" agree), but a
    narrative "without" in the response does not raise a contradiction."""
    if not negation_cue(item, sentence):
        return False
    ti, ts = _tokens(item), _tokens(sentence)
    item_negates = _scoped_negations(ti, _content_stems(ts)) > 0
    return item_negates or _scoped_negations(ts, _content_stems(ti), SENTENCE_NEGATIONS) > 0


def antonym_cue(a: str, b: str) -> tuple[str, str] | None:
    """A pair from ANTONYMS with one word only in ``a`` and the other only in ``b`` (either order)."""
    wa, wb = set(_tokens(a)), set(_tokens(b))
    for left, right in ANTONYMS:
        for x, y in ((left, right), (right, left)):
            if x in wa and y in wb and x not in wb and y not in wa:
                return x, y
    return None


def number_cue(a: str, b: str) -> bool:
    """The same wording with different numbers ("Postgres 15" / "Postgres 16")."""
    ta, tb = _tokens(a), _tokens(b)
    na = {t for t in ta if _NUMBER.match(t)}
    nb = {t for t in tb if _NUMBER.match(t)}
    if not na or not nb or na == nb:
        return False
    wa = {t for t in ta if not _NUMBER.match(t)}
    wb = {t for t in tb if not _NUMBER.match(t)}
    if not wa or not wb:
        return False
    return len(wa & wb) / len(wa | wb) >= NUMBER_MISMATCH_MIN_WORD_OVERLAP


def distinctive_words(text: str) -> set[str]:
    return {t for t in _tokens(text) if len(t) >= DISTINCTIVE_WORD_MIN_LENGTH and t not in STOP_WORDS}


def word_overlap(response: str, item: str) -> float:
    """Share of the item's distinctive words (by crude stem) that the response contains."""
    item_words = {_stem(w) for w in distinctive_words(item)}
    if not item_words:
        return 0.0
    response_words = {_stem(w) for w in _tokens(response)}
    return len(item_words & response_words) / len(item_words)


_VECTOR_CACHE: dict[str, tuple[float, ...]] = {}
VECTOR_CACHE_SIZE = 4096
"""Texts whose vectors a process keeps: a turn's prompt, response and sentences are asked about once
per item, and the brain's detector compares one new thought with several old ones."""


def _vectors(texts: list[str]) -> list[tuple[float, ...]]:
    """Normalised vectors of ``texts``; the ones not cached are embedded in one batch."""
    from brain import embedding

    missing = list(dict.fromkeys(t for t in texts if t not in _VECTOR_CACHE))
    if missing:
        try:
            computed = embedding.embed_many(missing)
        except embedding.EmbeddingError as exc:
            raise JudgeUnavailable(f"Embedding model failed: {exc}") from exc
        if len(_VECTOR_CACHE) + len(missing) > VECTOR_CACHE_SIZE:
            _VECTOR_CACHE.clear()
        _VECTOR_CACHE.update((text, tuple(vector)) for text, vector in zip(missing, computed, strict=True))
    return [_VECTOR_CACHE[t] for t in texts]


def _similarities(a: str, others: list[str]) -> list[float]:
    """Cosine similarity of ``a`` with each of ``others`` (normalised vectors: the dot product)."""
    va, *rest = _vectors([a, *others])
    return [float(sum(x * y for x, y in zip(va, vb, strict=True))) for vb in rest]


def _similarity(a: str, b: str) -> float:
    return _similarities(a, [b])[0]


def sentences(text: str) -> list[str]:
    """The statements of a response: split after . ! ? ; : and at line breaks (each tool call is a
    line). Fragments shorter than MIN_SENTENCE_CHARS are dropped; a text without any split is one
    sentence."""
    parts = [part.strip() for part in _SENTENCE_SPLIT.split(text or "")]
    kept = [part for part in parts if len(part) >= MIN_SENTENCE_CHARS]
    return kept or ([text.strip()] if text and text.strip() else [])


_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")


def _numbers(text: str) -> set[str]:
    """The values a text states, normalised so that equal values meet: "30%" also counts as 0.3,
    "0.30" as 0.3. 0 and 1 are left out: they are bounds, flags and "one thing" far more often than
    a stated value ("count > 0", "max(1.0, w)")."""
    values = set()
    raw = [t for t in _tokens(text) if _NUMBER.match(t)]
    raw += [str(float(m) / 100) for m in _PERCENT.findall(text)]
    for token in raw:
        try:
            value = float(token.replace(",", "")) if token.count(".") <= 1 else None
        except ValueError:
            value = None
        if value is None:
            values.add(token)  # a version like 3.12.1: compared as written
        elif value not in (0.0, 1.0):
            values.add(f"{value:g}")
    return values


def sentence_number_mismatch(item: str, sentence: str, whole: str) -> bool:
    """``sentence`` states a different value for what ``item`` quantifies: the item states exactly one
    value, the sentence holds numbers, and the item's value occurs nowhere in ``whole`` (the full
    response), so the response does not repeat it elsewhere ("14 days" in reply to "after 7 days")."""
    item_numbers, sentence_numbers = _numbers(item), _numbers(sentence)
    if len(item_numbers) != 1 or not sentence_numbers:
        return False  # only an item stating one value: formulas and configs differ from worked examples
    return not (item_numbers & _numbers(whole))


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


# --- LLM judge ------------------------------------------------------------------------------------

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_BASE_URLS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
LLM_MAX_TOKENS = 300

SYSTEM_PROMPT = (
    "You are a strict evaluator for a knowledge base used by AI agents. Answer ONLY with one JSON "
    'object of the form {"verdict": true|false, "confidence": <number from 0 to 1>, "reason": "<one '
    'short sentence>"} and nothing else.'
)

QUESTIONS = {
    "contradicts": (
        "Statement A:\n{a}\n\nStatement B:\n{b}\n\n"
        "Does statement B contradict statement A, i.e. can they not both be true? Different topics, "
        "or B adding detail, are NOT contradictions."
    ),
    "on_topic": (
        "Request:\n{a}\n\nKnowledge item:\n{b}\n\nIs the knowledge item relevant to the request, i.e. "
        "would it help to answer it?"
    ),
    "used": (
        "Response:\n{a}\n\nKnowledge item:\n{b}\n\nDid the response use the knowledge item: does it "
        "rely on, repeat or build on information that the item provides?"
    ),
}


def parse_verdict(text: str) -> Verdict:
    """The first JSON object in ``text`` as a Verdict; code fences and chatter around it are ignored.

    Strict about meaning: ``verdict`` must be a boolean (or "true"/"false"), ``confidence`` a number
    (clamped to 0..1; missing = 0.5), ``reason`` a string (missing = ""). Anything else raises
    JudgeUnavailable, so the job retries instead of storing a guess.
    """
    decoder = json.JSONDecoder()
    data = None
    for match in re.finditer(r"\{", text or ""):
        try:
            candidate, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(candidate, dict) and "verdict" in candidate:
            data = candidate
            break
    if data is None:
        raise JudgeUnavailable(f"The judge's answer holds no JSON verdict: {str(text)[:200]!r}")
    raw_verdict = data["verdict"]
    if isinstance(raw_verdict, str) and raw_verdict.strip().lower() in {"true", "false"}:
        raw_verdict = raw_verdict.strip().lower() == "true"
    if not isinstance(raw_verdict, bool):
        raise JudgeUnavailable(f"The judge's verdict is not a boolean: {raw_verdict!r}")
    raw_confidence = data.get("confidence", 0.5)
    if isinstance(raw_confidence, bool) or not isinstance(raw_confidence, (int, float)):
        try:
            raw_confidence = float(raw_confidence)
        except (TypeError, ValueError):
            raise JudgeUnavailable(f"The judge's confidence is not a number: {raw_confidence!r}")
    if raw_confidence != raw_confidence:  # NaN
        raise JudgeUnavailable("The judge's confidence is NaN")
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        reason = json.dumps(reason)
    return Verdict(raw_verdict, min(1.0, max(0.0, float(raw_confidence))), reason)


class LLMJudge:
    """A judge that asks a language model. ``provider`` is ``anthropic`` or ``openai`` (any
    OpenAI-compatible endpoint: OpenAI, vLLM, Ollama, LiteLLM...)."""

    name = "llm"

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float = 20.0,
        transport: httpx.BaseTransport | None = None,
    ):
        provider = (provider or "").strip().lower()
        if provider not in DEFAULT_BASE_URLS:
            raise ImproperlyConfigured(f"QUALITY_LLM_PROVIDER must be 'anthropic' or 'openai', not {provider!r}.")
        if not model:
            raise ImproperlyConfigured("QUALITY_LLM_MODEL must name the model the LLM judge asks.")
        self.provider = provider
        self.base_url = (base_url or DEFAULT_BASE_URLS[provider]).rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = float(timeout)
        self._transport = transport

    @classmethod
    def from_settings(cls) -> LLMJudge:
        return cls(
            provider=settings.QUALITY_LLM_PROVIDER,
            base_url=settings.QUALITY_LLM_BASE_URL,
            api_key=settings.QUALITY_LLM_API_KEY,
            model=settings.QUALITY_LLM_MODEL,
            timeout=settings.QUALITY_LLM_TIMEOUT,
        )

    def contradicts(self, a: str, b: str) -> Verdict:
        return self.ask("contradicts", a, b)

    def on_topic(self, prompt: str, item: str) -> Verdict:
        return self.ask("on_topic", prompt, item)

    def used(self, response: str, item: str) -> Verdict:
        return self.ask("used", response, item)

    def ask(self, question: str, a: str, b: str) -> Verdict:
        """Ask one question about a pair of texts and parse the model's JSON answer."""
        user = QUESTIONS[question].format(a=a, b=b)
        if self.provider == "anthropic":
            url = f"{self.base_url}/v1/messages"
            headers = {"x-api-key": self.api_key, "anthropic-version": ANTHROPIC_VERSION}
            body = {
                "model": self.model,
                "max_tokens": LLM_MAX_TOKENS,
                "temperature": 0,
                "system": SYSTEM_PROMPT,
                "messages": [{"role": "user", "content": user}],
            }
        else:
            url = f"{self.base_url}/chat/completions"
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            body = {
                "model": self.model,
                "max_tokens": LLM_MAX_TOKENS,
                "temperature": 0,
                "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
            }
        try:
            with httpx.Client(timeout=self.timeout, transport=self._transport) as client:
                response = client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise JudgeUnavailable(f"LLM judge at {url} did not answer: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise JudgeUnavailable(f"LLM judge at {url} answered HTTP {response.status_code}: {response.text[:200]}")
        try:
            payload = response.json()
        except ValueError as exc:
            raise JudgeUnavailable(f"LLM judge at {url} answered non-JSON: {response.text[:200]!r}") from exc
        return parse_verdict(self._answer_text(payload))

    def _answer_text(self, payload) -> str:
        """The model's text from a Messages or a Chat Completions response."""
        try:
            if self.provider == "anthropic":
                return "".join(part.get("text", "") for part in payload["content"] if part.get("type") == "text")
            return payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise JudgeUnavailable(f"Unexpected {self.provider} response shape: {str(payload)[:200]}") from exc
