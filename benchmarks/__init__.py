"""Benchmarks a user or maintainer runs; each is a make target or a ``python -m benchmarks.X`` command
named in docs/performance.md (the retrieval benchmark: benchmarks/retrieval/README.md).

Each runs against a database of its own, never the working one (:mod:`benchmarks.setup`), and prints
its statistics through :mod:`benchmarks.stats`.
"""
