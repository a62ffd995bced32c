"""Late interaction (MaxSim over all-MiniLM-L6-v2's token states) on the dev split: worth building?

    python -m benchmarks.retrieval.late_interaction            # dense variants, no database (~1 min)
    python -m benchmarks.retrieval.late_interaction --colony   # inside Colony's ranking (~3 min)

Issue 13's test target needs paraphrases found more often than the model's own exact cosine finds
them (benchmarks/retrieval/README.md, "What the target asks of the model"). The same model scores a
turn against a question differently when the two are compared token by token: ColBERT's MaxSim, the
mean over the question's tokens of each one's best cosine with any of the turn's tokens, computed on
the model's last hidden states (L2-normalised, [CLS]/[SEP] left out) instead of their mean-pooled
vector. Dev split only (the script refuses nothing else because it reads nothing else):

- without ``--colony``: recall@10 per question type of exact dense search, MaxSim alone, dense +
  lam x MaxSim, the same restricted to dense's top 30/50 (what a reranker of Colony's candidates
  could do), and with the token states stored as int8, fp16 or randomly projected to 128/64
  dimensions (what storing them per thought would cost in quality);
- ``--colony``: the dev conversations ingested through the real endpoint as ``make
  bench-retrieval`` does, then every question through ``thought_search`` (Colony's candidates,
  fusion and multipliers, no reinforcement, like ``--sweep``) with the dense side's cosine replaced by
  ``(1 - w) x cosine + w x MaxSim`` for a grid of ``w`` and ``LEXICAL_WEIGHT``.

Nothing here is used by Colony (it patches ranking in this process only): it measures whether a
late-interaction signal is worth storing token vectors for (~10.5 KB a thought in int8).
"""

from __future__ import annotations

import functools

from benchmarks.retrieval.sweep import dev_script_main, report_recall10, signal_sweep

#: (w, LEXICAL_WEIGHT) settings of ``--colony``; (0.0, 0.4) is what Colony ships.
COLONY_GRID = [
    (0.0, 0.4),
    *((w, 0.0) for w in (0.5, 1.0)),
    *((w, 0.4) for w in (0.3, 0.5, 0.7, 1.0)),
    *((w, lexical) for lexical in (0.2, 0.3) for w in (0.5, 0.7)),
]


class TokenStates:
    """The model's L2-normalised last hidden states per text, without [CLS]/[SEP], cached by text."""

    def __init__(self) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        from brain.embedding import model_name

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_name(), local_files_only=True)
        self.model = AutoModel.from_pretrained(model_name(), local_files_only=True).eval()
        self.cache: dict[str, object] = {}
        self.pooled: dict[str, object] = {}

    def __call__(self, texts: list[str]) -> list:
        torch = self.torch
        missing = sorted({t for t in texts if t not in self.cache})
        with torch.no_grad():
            for start in range(0, len(missing), 64):
                chunk = missing[start : start + 64]
                batch = self.tokenizer(chunk, padding=True, truncation=True, max_length=256, return_tensors="pt")
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).float()
                pooled = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
                states = torch.nn.functional.normalize(hidden, dim=-1).numpy()
                for row, text in enumerate(chunk):
                    n = int(batch["attention_mask"][row].sum())
                    self.cache[text] = states[row, 1 : n - 1]
                    self.pooled[text] = pooled[row]
        return [self.cache[t] for t in texts]


def maxsim(query, turn) -> float:
    return float((query @ turn.T).max(1).mean())


def dense_variants() -> None:
    import numpy as np

    from benchmarks.retrieval.dataset import load

    dev = load("dev")
    states = TokenStates()
    turns = {c.id: c.turns for c in dev.conversations}
    print(f"token states of {sum(len(t) for t in turns.values())} dev turns and {len(dev.questions)} questions ...")
    for conversation_turns in turns.values():
        states([t.text for t in conversation_turns])
    states([q.question for q in dev.questions])
    rng = np.random.default_rng(0)
    projections = {d: rng.standard_normal((384, d)).astype(np.float32) / np.sqrt(d) for d in (128, 64)}

    def int8(x):
        scale = np.abs(x).max(1, keepdims=True) / 127
        return np.round(x / scale).astype(np.int8).astype(np.float32) * scale

    storage = {
        "fp32": lambda x: x,
        "int8": int8,
        "fp16": lambda x: x.astype(np.float16).astype(np.float32),
        "proj128": lambda x: x @ projections[128],
        "proj64": lambda x: x @ projections[64],
    }
    scores: dict[tuple, dict] = {}
    for question in dev.questions:
        space = turns[question.conversation]
        query = states.pooled[question.question]
        dense = np.array([states.pooled[t.text] @ query for t in space])
        for store, convert in storage.items():
            q = convert(states.cache[question.question])
            late = np.array([maxsim(q, convert(states.cache[t.text])) for t in space])
            scores[(question.id, store)] = (dense, late)

    def run(name: str, store: str, combine) -> None:
        hits: dict[str, list[bool]] = {}
        for question in dev.questions:
            dense, late = scores[(question.id, store)]
            top = np.argsort(-combine(dense, late), kind="stable")[:10]
            found = {turns[question.conversation][i].id for i in top}
            hits.setdefault(question.type, []).append(any(e in found for e in question.evidence))
        report_recall10(name, hits)

    def reranked(depth: int, lam: float):
        def combine(dense, late):
            keep = np.argsort(-dense, kind="stable")[:depth]
            out = np.full_like(dense, -1e9)
            out[keep] = dense[keep] + lam * late[keep]
            return out

        return combine

    run("dense", "fp32", lambda d, late: d)
    run("maxsim", "fp32", lambda d, late: late)
    for lam in (0.25, 0.5, 1.0, 2.0):
        run(f"dense + {lam} maxsim", "fp32", lambda d, late, lam=lam: d + lam * late)
    for depth in (30, 50):
        run(f"dense top {depth}, reranked", "fp32", reranked(depth, 1.0))
    for store in ("int8", "fp16", "proj128", "proj64"):
        run(f"{store}: maxsim", store, lambda d, late: late)
        run(f"{store}: dense + maxsim", store, lambda d, late: d + late)


def colony_sweep() -> None:
    @functools.cache
    def states() -> TokenStates:  # loaded once Django is set up (signal_sweep sets it up)
        return TokenStates()

    def late(query_text: str, _vector, candidates) -> list[float]:
        query = states()([query_text])[0]
        return [maxsim(query, turn) for turn in states()([c.thought.content for c in candidates])]

    signal_sweep(late, COLONY_GRID)


def main(argv: list[str] | None = None) -> int:
    return dev_script_main(argv, __doc__, dense_variants, colony_sweep)


if __name__ == "__main__":
    raise SystemExit(main())
