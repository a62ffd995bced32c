"""``make bench``: run the benchmarks against the ``colony_bench`` database and print p50/p95.

python -m benchmarks.run [--only brain] [--thoughts 10000] [--requests 100]
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import db


def brain(args) -> list:
    from benchmarks import brain as bench

    return bench.run(thoughts=args.thoughts, requests=args.requests)


def pages(args) -> list:
    from benchmarks import pages as bench

    return bench.run(thoughts=args.thoughts, requests=args.requests)


#: name -> function(args) returning [(label, samples in ms), ...]. Other areas add theirs here.
BENCHMARKS = {"brain": brain, "pages": pages}


def print_table(rows: list) -> None:
    from benchmarks.brain import percentile

    width = max(len(label) for label, _ in rows)
    print(f"{'':{width}}  {'n':>5}  {'p50 ms':>8}  {'p95 ms':>8}  {'max ms':>8}")
    for label, samples in rows:
        print(
            f"{label:{width}}  {len(samples):>5}  {percentile(samples, 0.5):>8.1f}  "
            f"{percentile(samples, 0.95):>8.1f}  {max(samples):>8.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append")
    parser.add_argument("--thoughts", type=int, default=10_000, help="thoughts to seed (default 10000)")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per row (default 100)")
    args = parser.parse_args(argv)
    url = db.setup()
    print(f"benchmark database: {url.split('@')[-1]}")
    for name in args.only or sorted(BENCHMARKS):
        print_table(BENCHMARKS[name](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
