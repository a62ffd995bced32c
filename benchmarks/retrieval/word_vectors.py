"""A second model's opinion: static word vectors mixed into the dense side (dev only; not built).

    pip install wordllama==0.4.0.post1      # into Colony's venv; not a dependency of Colony
    python -m benchmarks.retrieval.word_vectors            # no database (~1 min)
    python -m benchmarks.retrieval.word_vectors --colony   # inside Colony's ranking (~2 min)

WordLlama's ``l2_supercat`` token vectors (256 dimensions over a 32,000-token vocabulary, distilled
from a large language model's input embeddings and trained for sentence similarity; MIT licence) ship
inside the ``wordllama`` wheel on PyPI: the one other offline model found there. A text's vector is
the mean of its tokens' vectors, L2-normalised (what WordLlama's own ``embed`` computes; its package
code is not imported, it tries to download a tokenizer it carries). Dev split only:

- without ``--colony``: recall@10 per question type of exact dense search (all-MiniLM-L6-v2, each
  text embedded alone), the word vectors alone, and ``dense + b x words``;
- ``--colony``: Colony's ranking with the dense side's cosine replaced by ``(1 - w) x cosine + w x
  word cosine`` (:func:`benchmarks.retrieval.sweep.signal_mixed_in`) for a grid of ``w`` and
  ``LEXICAL_WEIGHT``.

What it found, and what the same mix did on the held-out data when it was built for one run (test
split, issue 14's queries): benchmarks/retrieval/README.md, "Word vectors".
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from benchmarks.retrieval.sweep import dev_script_main, dev_vectors, report_recall10, signal_sweep

WEIGHTS_FILE = Path("weights") / "l2_supercat_256.safetensors"
TOKENIZER_FILE = Path("tokenizers") / "l2_supercat_tokenizer_config.json"
#: (w, LEXICAL_WEIGHT) settings of ``--colony``; (0.0, 0.4) is what Colony ships.
COLONY_GRID = [(0.0, 0.4), *((w, lexical) for lexical in (0.1, 0.2, 0.3, 0.4) for w in (0.2, 0.3, 0.4, 0.5))]
#: ``b`` of ``dense + b x words`` without a database.
MIXES = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def mean_unit_vectors(token_ids: list[list[int]], matrix):
    """One L2-normalised mean of ``matrix``'s rows per list of token ids (zeros for an empty list)."""
    import numpy as np

    out = np.zeros((len(token_ids), matrix.shape[1]), dtype=np.float32)
    for i, ids in enumerate(token_ids):
        if ids:
            vector = matrix[ids].astype(np.float32).mean(axis=0)
            norm = float(np.linalg.norm(vector))
            out[i] = vector / norm if norm > 0 else vector
    return out


class WordVectors:
    """The packaged token vectors and tokenizer of the installed ``wordllama``; vectors cached by text."""

    def __init__(self) -> None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        spec = importlib.util.find_spec("wordllama")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("wordllama is not installed: .venv/bin/pip install wordllama==0.4.0.post1")
        folder = Path(next(iter(spec.submodule_search_locations)))
        self.matrix = np.ascontiguousarray(load_file(folder / WEIGHTS_FILE)["embedding.weight"].astype(np.float32))
        self.tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.cache: dict[str, object] = {}

    def __call__(self, texts: list[str]):
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            encodings = self.tokenizer.encode_batch(missing, add_special_tokens=False)
            vectors = mean_unit_vectors([e.ids for e in encodings], self.matrix)
            self.cache.update(zip(missing, vectors, strict=True))
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.matrix.shape[1]))


def dense_variants() -> None:
    import collections

    import numpy as np

    from benchmarks.retrieval.dataset import load

    dev = load("dev")
    conversations = {c.id: c for c in dev.conversations}
    turns = [t for c in dev.conversations for t in c.turns]
    dense_turns, dense_questions = dev_vectors(dev)
    words = WordVectors()
    word_turns = dict(zip([t.id for t in turns], words([t.text for t in turns]), strict=True))
    word_questions = dict(zip([q.id for q in dev.questions], words([q.question for q in dev.questions]), strict=True))

    def run(name: str, a: float, b: float) -> None:
        hits: dict[str, list[bool]] = collections.defaultdict(list)
        for q in dev.questions:
            dense_q, word_q = dense_questions[q.id], word_questions[q.id]
            ids = [t.id for t in conversations[q.conversation].turns]
            score = np.array([a * (dense_turns[i] @ dense_q) + b * (word_turns[i] @ word_q) for i in ids])
            top = {ids[i] for i in np.argsort(-score, kind="stable")[:10]}
            hits[q.type].append(any(e in top for e in q.evidence))
        report_recall10(name, hits)

    run("dense", 1.0, 0.0)
    run("word vectors alone", 0.0, 1.0)
    for b in MIXES:
        run(f"dense + {b} x words", 1.0, b)


def colony_sweep() -> None:
    words = functools.cache(WordVectors)  # loaded once Django is set up (signal_sweep sets it up)

    def signal(query_text: str, _vector, candidates) -> list[float]:
        vectors = words()([query_text, *(c.thought.content for c in candidates)])
        return (vectors[1:] @ vectors[0]).tolist()

    signal_sweep(signal, COLONY_GRID)


def main(argv: list[str] | None = None) -> int:
    return dev_script_main(argv, __doc__, dense_variants, colony_sweep)


if __name__ == "__main__":
    raise SystemExit(main())
