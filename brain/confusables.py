"""Letters of other scripts drawn like Latin ones ("а" CYRILLIC SMALL LETTER A for "a"), read as the
Latin letters they look like wherever Colony compares texts.

NFKC does not map one script's letters to another's: the Cyrillic "Тhе stаging dаtаbаsе..." is a
different string from the Latin sentence that readers, and the agents it is injected into, read in
it. Its key (one row per fact, the exact-text re-contamination guard) would differ, and so would
the model's vector (the tokenizer sees other pieces: cosine 0.05 against the Latin sentence for one
of ``tests/security/test_homoglyphs_hold.py``), so a corrected fact written so would come back live
and unflagged. Colony reads text two ways:

- :func:`skeleton`: every character of :func:`fold_table` replaced by its Latin letter or digit, the
  Unicode TR39 skeleton restricted to prototypes that are one ASCII letter or digit. The text's key
  is ``brain_content_key`` (SQL, ``brain.models.content_key``), which folds with the same table
  (``brain_fold_confusables``, written into migration 0018 from this table; a test checks that the
  two agree). Legitimate non-Latin text keeps its other letters ("и", "л", "д", "ы"...), so a Russian
  sentence and an unrelated Latin one never share a key.
- :func:`embedding_text`: what the embedding model reads (``brain.embedding.embed_many``), folded
  only where the letters pose as Latin: words that mix Latin letters with look-alikes (and hold no
  other letter of another script), and words made of look-alikes only, in a text with at least as
  many Latin letters as letters of other scripts (look-alikes not counted). A Russian sentence is
  embedded as written.

Both read the text NFKC-normalised. Stored content always keeps what the caller sent. Both readings
are identities on ASCII text (ASCII characters are never folded, even those TR39 maps: "m" to "rn",
"I" to "l", "0" to "O"), and O(len(text)).

The table comes from ``confusable-homoglyphs`` (Unicode's confusables.txt as data), loaded lazily once
per process.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_WORD = re.compile(r"\w+")


def _ascii_prototype(data: dict, ch: str) -> str | None:
    targets = [h["c"] for h in data.get(ch, ()) if len(h["c"]) == 1 and h["c"].isascii() and h["c"].isalnum()]
    return targets[0] if len(targets) == 1 else None


@functools.cache
def fold_table() -> dict[str, str]:
    """Non-ASCII character -> the ASCII letter or digit it is confusable with (TR39 prototype), for
    the characters NFKC leaves as they are (the others are normalised before folding).

    TR39 takes "l" as the prototype of capital I (Latin "I" itself maps to "l"); Colony never folds
    ASCII, so a capital whose prototype is "l" while its small letter's is "i" (Cyrillic "І", Greek
    "Ι") is folded to "I", and lower-cases as the Latin "I" does."""
    from confusable_homoglyphs.confusables import confusables_data

    table = {}
    for ch in confusables_data:
        if len(ch) != 1 or ch.isascii() or unicodedata.normalize("NFKC", ch) != ch:
            continue
        target = _ascii_prototype(confusables_data, ch)
        if target is None:
            continue
        small = ch.lower()
        if target == "l" and len(small) == 1 and small != ch and _ascii_prototype(confusables_data, small) == "i":
            target = "I"
        table[ch] = target
    return table


@functools.cache
def _ord_table() -> dict[int, str]:
    return {ord(ch): target for ch, target in fold_table().items()}


def skeleton(text: str) -> str:
    """``text`` with every character of :func:`fold_table` replaced by its ASCII letter or digit."""
    if text.isascii():
        return text
    return text.translate(_ord_table())


@functools.lru_cache(maxsize=4096)
def _is_latin(ch: str) -> bool:
    if ch.isascii():
        return True
    from confusable_homoglyphs.categories import alias

    return alias(ch) == "LATIN"


def embedding_text(text: str) -> str:
    """``text`` as the embedding model reads it: look-alikes folded in the words where they pose as
    Latin letters (see the module's docstring), every other character as sent."""
    if text.isascii():
        return text
    table = fold_table()
    words = []  # the words holding look-alikes: (match, its Latin letters, its letters of other scripts)
    latin_total = other_total = 0
    for match in _WORD.finditer(text):
        latin = look_alike = other = 0
        for ch in match.group():
            if ch in table:
                look_alike += 1
            elif not ch.isalpha():
                continue
            elif _is_latin(ch):
                latin += 1
            else:
                other += 1
        if look_alike:
            words.append((match, latin, other))
        latin_total += latin
        other_total += other
    latin_text = latin_total >= other_total
    parts = []
    end = 0
    for match, latin, other in words:
        if other or not (latin or latin_text):
            continue
        parts.append(text[end : match.start()])
        parts.append(skeleton(match.group()))
        end = match.end()
    if not parts:
        return text
    parts.append(text[end:])
    return "".join(parts)
