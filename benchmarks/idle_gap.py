"""What an idle gap before a call costs: Colony's memory call back to back, after the machine sat idle,
and after a Mem0 search, in one run (and Mem0's search the same three ways with ``--mem0``).

    python -m benchmarks.idle_gap [--gap-ms 15] [--blocks 18] [--block 20] [--mem0] [--database bench_colony]

``make bench-compare`` sends each query to Mem0 and to Colony in turn, so every Colony call comes after
~15 ms in which Colony's processes sat idle while Mem0 searched (and every Mem0 search after Colony's
call). This measures what that costs each of them apart from everything else, in one run: the
bench-compare queries in blocks of ``--block`` calls, the blocks rotating between calls sent back to
back, calls that each follow ``--gap-ms`` of sleep (the client idle too, like the benchmark's process
while Mem0 works) and, with ``--mem0``, calls that each follow one search of the other system (what
bench-compare does). The first two calls of every back-to-back block are not counted (they follow the
previous block's condition). Colony runs as bench-compare runs it (``python -m core.serve``,
``--workers``, on ``--database`` as left by ``python -m benchmarks.compare --notes 10000``), the calls
go through bench-compare's ``TimingClient``; Mem0 as bench-compare's peer (its venv, its database,
``--reuse``). Every loop is bounded: ``--blocks`` x ``--block`` calls per system, to 127.0.0.1 only.
Figures of different runs on a shared machine don't compare; the differences within one run do.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
WARM_CALLS_SKIPPED = 2
BACK_TO_BACK = "back to back"


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return f"p50 {statistics.median(ordered):6.2f}  p95 {p95:6.2f} ms (n {len(ordered)})"


def measure(
    ask: Callable[[str], float],
    texts: list[str],
    before: dict[str, Callable[[int], None] | None],
    *,
    blocks: int,
    block: int,
) -> dict[str, list[float]]:
    """``ask(text) -> ms`` over ``blocks`` blocks of ``block`` texts, the blocks rotating over ``before``'s
    conditions: each call of a block follows that condition's ``before(position)`` (None: nothing)."""
    out: dict[str, list[float]] = {name: [] for name in before}
    names = list(before)
    position = 0
    for number in range(blocks):
        name = names[number % len(names)]
        for k in range(block):
            text = texts[position % len(texts)] + (f" ({position // len(texts)})" if position >= len(texts) else "")
            if before[name] is not None:
                before[name](position)
            position += 1
            ms = ask(text)
            if before[name] is not None or k >= WARM_CALLS_SKIPPED:
                out[name].append(ms)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gap-ms", type=float, default=15.0)
    parser.add_argument("--blocks", type=int, default=18)
    parser.add_argument("--block", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=8270)
    parser.add_argument("--database", default="bench_colony")
    parser.add_argument("--mem0", action="store_true", help="also Mem0's in-process search (bench-compare's peer)")
    args = parser.parse_args(argv)
    if args.blocks < 3 or args.block <= WARM_CALLS_SKIPPED:
        parser.error(f"--blocks must be at least 3 and --block more than {WARM_CALLS_SKIPPED}")
    sys.path.insert(0, str(BASE_DIR))
    from benchmarks import compare

    texts = [q["query"] for q in compare.queries(10000, 300)]
    if compare._loaded_note_ids(compare.server_url(args.database), 10000) is None:
        raise SystemExit(
            f"{args.database} does not hold bench-compare's 10,000 notes: "
            "run `python -m benchmarks.compare --notes 10000` first."
        )
    peer = None
    if args.mem0:
        workdir = BASE_DIR / "var" / "bench-compare"
        workdir.mkdir(parents=True, exist_ok=True)
        peer = compare.Mem0Peer(compare.notes(10000), workdir, reuse=True)
    server = compare.ColonyServer(port=args.port, workers=args.workers, database=args.database, reuse=True)
    timed = None
    try:
        timed = compare.TimingClient(args.port, server.start())

        def colony(text: str) -> float:
            started = time.perf_counter()
            timed.get("/api/v1/memory", {"prompt": text, "contribute": "false", "limit": 10})
            return (time.perf_counter() - started) * 1000

        def mem0(text: str) -> float:
            return peer.search(text)[0]

        def idle(_position: int) -> None:
            time.sleep(args.gap_ms / 1000)

        systems = {"Colony GET /memory over HTTP": colony}
        if peer is not None:
            systems["Mem0 OSS search() in-process"] = mem0
        for ask in systems.values():  # every worker's model and connection, before anything is timed
            for text in texts[:20]:
                ask(f"warm-up: {text}")
        results = {}
        for name, ask in systems.items():
            before: dict[str, Callable[[int], None] | None] = {
                BACK_TO_BACK: None,
                f"after {args.gap_ms:g} ms idle": idle,
            }
            for other_name, other in systems.items():
                if other is not ask:  # the other system answers another query, as in bench-compare
                    before[f"after a {other_name.split()[0]} call"] = lambda i, other=other: other(
                        f"other: {texts[i % len(texts)]}"
                    )
            print(f"{name}: {args.blocks} blocks of {args.block} calls ...", flush=True)
            results[name] = measure(ask, texts, before, blocks=args.blocks, block=args.block)
    finally:
        if timed is not None:
            timed.close()
        server.stop()
        if peer is not None:
            peer.close()
    print()
    for system, by_condition in results.items():
        print(system)
        hot = statistics.median(by_condition[BACK_TO_BACK])
        for condition, samples in by_condition.items():
            extra = "" if condition == BACK_TO_BACK else f"   {statistics.median(samples) - hot:+.2f} ms at p50"
            print(f"  {condition:22} {summary(samples)}{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
