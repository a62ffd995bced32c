"""Benchmarks: ``make bench`` (``python -m benchmarks.run``) prints latency figures for each area.

They run against their own database (``colony_bench``), never the working one, and seed it once:
a later run reuses what is there.
"""
