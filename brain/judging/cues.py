"""Sentence cues of the offline judge: tokens, negation, opposite terms, numbers, word overlap.

Pure text functions (no model, no database): the embedding judge combines them with sentence
similarity (:mod:`brain.judging.embedding`), and the brain's correction guard uses
:func:`negation_cue` on its own. Every constant says why it has its value.

The per-text steps (tokens, stems, numbers, sentences) are memoized per process (``TEXT_CACHE_SIZE``
texts): the detector compares one new thought with up to 30 others, each a few cues that tokenize
both sides again, and a turn's response is compared with every injected item (profiled under the
soak's contributions, re-tokenizing each time is a quarter of a contradiction job).
"""

from __future__ import annotations

import re
from functools import lru_cache

NUMBER_MISMATCH_MIN_WORD_OVERLAP = 0.6
"""...whose words other than the numbers overlap (Jaccard) at least this much: the same sentence
with another value, not two sentences that happen to contain numbers."""

NEGATION_SCOPE_WORDS = 3
"""A negation counts when one of the next this-many content words also occurs in the other
statement: "does not use Postgres" negates what the other says, "..., not MySQL" does not."""

DISTINCTIVE_WORD_MIN_LENGTH = 4
"""Words shorter than this (and stop words) are not distinctive enough to show use."""

MIN_SENTENCE_CHARS = 4
"""Fragments shorter than this ("ok", "(1)") are not statements."""

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

TEXT_CACHE_SIZE = 4096
"""Texts whose tokens, numbers and sentences a process keeps (the judge's vector cache holds as many)."""

_TOKEN = re.compile(r"[a-z0-9äöüß]+(?:['’][a-z]+)?(?:[.\-][a-z0-9]+)*", re.IGNORECASE)
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*$")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;:])\s+|\n+")


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(t.lower().replace("’", "'") for t in _TOKEN.findall(text))


@lru_cache(maxsize=4 * TEXT_CACHE_SIZE)
def _stem(word: str) -> str:
    """A crude stem so that "use"/"uses"/"used" and "require"/"requires"/"required" meet."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 2 else word


def _is_negation(token: str) -> bool:
    return token in NEGATIONS or token.endswith("n't")


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _content_stems(tokens: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_stem(t) for t in tokens if t not in STOP_WORDS and not _is_negation(t))


def _scoped_negations(
    tokens: tuple[str, ...], other_stems: frozenset[str], negations: frozenset[str] = NEGATIONS
) -> int:
    """Negations whose next NEGATION_SCOPE_WORDS content words include one the other text has."""
    count = 0
    for index, token in enumerate(tokens):
        if not (token in negations or token.endswith("n't")):
            continue
        if token == "no" and index + 1 < len(tokens) and tokens[index + 1] == "longer":  # noqa: S105 - a word of the text, not a password
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


def texts_forget() -> None:
    """Empty the caches keyed by whole texts (a redacted thought's text is no key here either; a
    ``functools.lru_cache`` can't drop one entry, and the caches refill as texts are judged)."""
    for cached in (_tokens, _stem, _content_stems, _sentences, _numbers):
        cached.cache_clear()


def sentences(text: str) -> list[str]:
    """The statements of a response: split after . ! ? ; : and at line breaks (each tool call is a
    line). Fragments shorter than MIN_SENTENCE_CHARS are dropped; a text without any split is one
    sentence."""
    return list(_sentences(text or ""))


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _sentences(text: str) -> tuple[str, ...]:
    parts = [part.strip() for part in _SENTENCE_SPLIT.split(text)]
    kept = [part for part in parts if len(part) >= MIN_SENTENCE_CHARS]
    return tuple(kept or ([text.strip()] if text.strip() else []))


_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")


@lru_cache(maxsize=TEXT_CACHE_SIZE)
def _numbers(text: str) -> frozenset[str]:
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
    return frozenset(values)


def sentence_number_mismatch(item: str, sentence: str, whole: str) -> bool:
    """``sentence`` states a different value for what ``item`` quantifies: the item states exactly one
    value, the sentence holds numbers, and the item's value occurs nowhere in ``whole`` (the full
    response), so the response does not repeat it elsewhere ("14 days" in reply to "after 7 days")."""
    item_numbers, sentence_numbers = _numbers(item), _numbers(sentence)
    if len(item_numbers) != 1 or not sentence_numbers:
        return False  # only an item stating one value: formulas and configs differ from worked examples
    return not (item_numbers & _numbers(whole))
