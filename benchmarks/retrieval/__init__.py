"""Colony's own retrieval benchmark: hand-written multi-session conversations and questions.

The data lives in ``data/``; :mod:`benchmarks.retrieval.dataset` loads and validates it.
"""
