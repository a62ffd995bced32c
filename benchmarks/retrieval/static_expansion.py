"""Can the lexical side find paraphrases? Query words widened by the model's own word vectors (dev only).

    python -m benchmarks.retrieval.static_expansion

Paraphrase questions share at most one content word with their answer, so the lexical side finds few of
them (benchmarks/retrieval/README.md). The one offline source of synonyms here is the packaged model
itself: all-MiniLM-L6-v2's input word embeddings (``embeddings.word_embeddings.weight``, 30,522
wordpieces x 384), whose nearest whole words to a query word are its inflections and, less often, its
synonyms ("vendor" -> supplier, "customer" -> client; "ledger" -> nothing useful). This script measures,
with no database and one space per conversation as in the standard protocol, recall@10 per question type
of:

- ``dense``: exact cosine of the int8 vectors, each text embedded alone (the endpoint's vectors);
- ``lexical``: Okapi BM25 (k1 1.2, b 0.75) over lower-cased words without stop words and with a crude
  suffix stemmer (a stand-in for PostgreSQL's ``english`` lexemes; its dev row is within a few questions
  of the harness's lexical row);
- ``fused lw``: dense cosine + ``lw`` x BM25 / the space's best BM25 (a simplified weighted sum, not
  brain/ranking.py's);
- ``+exp n a f``: every query word also adds its ``n`` nearest whole words (cosine >= ``f``, a
  different stem) as query terms of weight ``a`` x their cosine.

Nothing here is used by Colony: it tells whether widening the lexical side's query is worth building.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import re
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]

STOP = set(
    "a an the and or but of to in on at for with by from is are was were be been being do does did has have had"
    " what which who whom whose when where why how much many long often we they you i it its this that these those"
    " there their our us me my your he she his her them will would should can could may might must shall not no"
    " than then so as if about into over after before up down out off again any all each some such only own same"
    " too very just also other apart together across between during while".split()
)
SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "edly", "ed", "es", "s", "ly")
#: (n, a, f) settings tried: neighbours per word, their weight, the least cosine.
EXPANSIONS = ((3, 0.3, 0.4), (3, 0.5, 0.4), (5, 0.3, 0.35), (5, 0.5, 0.35), (10, 0.3, 0.3))


def stem(word: str) -> str:
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z][a-z0-9\-]*", text.lower()) if w not in STOP]


class WordNeighbours:
    """The nearest whole words to a word by cosine of the model's input word embeddings."""

    def __init__(self) -> None:
        import numpy as np
        from safetensors.numpy import load_file

        from brain.embedding import model_name

        folder = Path(model_name())
        matrix = load_file(folder / "model.safetensors")["embeddings.word_embeddings.weight"].astype(np.float32)
        self.unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        self.vocab = (folder / "vocab.txt").read_text().split("\n")[: len(matrix)]
        self.index = {token: i for i, token in enumerate(self.vocab)}
        self.whole = np.array([t.isalpha() and len(t) > 2 and t not in STOP for t in self.vocab])
        self.cache: dict[tuple, list[tuple[str, float]]] = {}

    def __call__(self, word: str, n: int, floor: float) -> list[tuple[str, float]]:
        import numpy as np

        key = (word, n, floor)
        if key not in self.cache:
            found: list[tuple[str, float]] = []
            if word in self.index:
                cosine = self.unit @ self.unit[self.index[word]]
                cosine[~self.whole] = -1
                for i in np.argsort(-cosine)[: 3 * n + 1]:
                    if cosine[i] < floor or len(found) >= n:
                        break
                    if stem(self.vocab[i]) != stem(word):
                        found.append((self.vocab[i], float(cosine[i])))
            self.cache[key] = found
        return self.cache[key]


class Bm25:
    """Okapi BM25 (k1 1.2, b 0.75) over one space's texts; query terms carry weights."""

    K1, B = 1.2, 0.75

    def __init__(self, texts: list[str]) -> None:
        self.docs = [collections.Counter(stem(w) for w in words(text)) for text in texts]
        self.lengths = [sum(doc.values()) for doc in self.docs]
        self.frequency = collections.Counter(term for doc in self.docs for term in doc)
        self.average = sum(self.lengths) / max(len(self.docs), 1) or 1.0

    def scores(self, terms: dict[str, float]):
        import numpy as np

        n = len(self.docs)
        scores = np.zeros(n)
        for term, weight in terms.items():
            if term not in self.frequency:
                continue
            idf = math.log(1 + (n - self.frequency[term] + 0.5) / (self.frequency[term] + 0.5))
            for j, doc in enumerate(self.docs):
                if f := doc.get(term, 0):
                    norm = self.K1 * (1 - self.B + self.B * self.lengths[j] / self.average)
                    scores[j] += weight * idf * f * (self.K1 + 1) / (f + norm)
        return scores


def query_terms(question: str, neighbours=None, expansion: tuple[int, float, float] | None = None) -> dict[str, float]:
    """The question's stemmed words at weight 1; with ``expansion`` (n, a, f) each word's ``n`` nearest
    whole words (cosine >= f) at weight a x cosine (a word's own weight is never lowered)."""
    terms: dict[str, float] = {}
    for word in words(question):
        terms[stem(word)] = 1.0
    if expansion:
        n, a, floor = expansion
        for word in words(question):
            for other, cosine in neighbours(word, n, floor):
                terms[stem(other)] = max(terms.get(stem(other), 0.0), a * cosine)
    return terms


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    sys.path.insert(0, str(BASE_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import numpy as np

    from benchmarks.retrieval.dataset import load
    from benchmarks.retrieval.sweep import dev_vectors

    dev = load("dev")
    conversations = {c.id: c for c in dev.conversations}
    turn_vectors, question_vectors = dev_vectors(dev)
    neighbours = WordNeighbours()
    spaces = {c.id: Bm25([t.text for t in c.turns]) for c in dev.conversations}

    def report(name: str, expansion=None, lexical_weight: float | None = None) -> None:
        hits: dict[str, list[bool]] = collections.defaultdict(list)
        for question in dev.questions:
            ids = [t.id for t in conversations[question.conversation].turns]
            lexical = spaces[question.conversation].scores(query_terms(question.question, neighbours, expansion))
            score = lexical
            if lexical_weight is not None:
                dense = np.array([turn_vectors[i] @ question_vectors[question.id] for i in ids])
                score = dense + lexical_weight * (lexical / lexical.max() if lexical.max() > 0 else lexical)
            top = {ids[i] for i in np.argsort(-score, kind="stable")[:10]}
            hits[question.type].append(any(e in top for e in question.evidence))
        every = [h for values in hits.values() for h in values]
        per_type = "  ".join(f"{t} {100 * sum(v) / len(v):5.1f}" for t, v in sorted(hits.items()))
        print(f"{name:38} R@10 {100 * sum(every) / len(every):5.1f}   {per_type}", flush=True)

    report("dense", lexical_weight=0.0)
    report("lexical")
    for weight in (0.2, 0.4):
        report(f"fused lw {weight}", lexical_weight=weight)
    for expansion in EXPANSIONS:
        label = "n {} a {} f {}".format(*expansion)
        report(f"lexical +exp {label}", expansion)
        for weight in (0.2, 0.4):
            report(f"fused lw {weight} +exp {label}", expansion, weight)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
