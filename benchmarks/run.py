"""``make bench``: run every benchmark against the ``colony_bench`` database and print one p50/p95 table.

python -m benchmarks.run [--only brain|quality|evolution_guard ...] [--thoughts 10000] [--requests 100]
    [--turns 1000] [--corrections 2000]
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.setup import use_bench_database
from benchmarks.stats import print_table


def brain(args) -> list:
    from benchmarks import brain as bench

    return bench.run(thoughts=args.thoughts, requests=args.requests)


def quality(args) -> list:
    from benchmarks import quality as bench

    return bench.run(turns=args.turns, items=10, scored=min(args.turns, 2 * args.requests))


def evolution_guard(args) -> list:
    from benchmarks import evolution_guard as bench

    return bench.run(corrections=args.corrections, thoughts=args.thoughts, calls=2 * args.requests)


def pages(args) -> list:
    from benchmarks import pages as bench

    return bench.run(thoughts=args.thoughts, requests=args.requests)


#: name -> function(args) returning [(label, samples in ms), ...]. Other areas add theirs here.
BENCHMARKS = {"brain": brain, "quality": quality, "evolution_guard": evolution_guard, "pages": pages}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append")
    parser.add_argument("--thoughts", type=int, default=10_000, help="thoughts to seed (default 10000)")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per row (default 100)")
    parser.add_argument("--turns", type=int, default=1000, help="turns the quality benchmark logs (default 1000)")
    parser.add_argument("--corrections", type=int, default=2000, help="corrections for the guard (default 2000)")
    args = parser.parse_args(argv)
    url = use_bench_database()
    print(f"benchmark database: {url.split('@')[-1]}")
    rows = []
    for name in args.only or list(BENCHMARKS):
        print(f"running {name} ...", flush=True)
        rows += [(name, label, samples) for label, samples in BENCHMARKS[name](args)]
    print()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
