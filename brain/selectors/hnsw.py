"""Filtered HNSW scans: the one place that sets pgvector's scan parameters.

pgvector applies a query's filters (space, superseded, category...) after the index scan, so a
filtered nearest-neighbour query can come back with fewer rows than asked for. These settings let
the scan keep going until enough rows pass (``iterative_scan = relaxed_order``) and widen its
candidate list (``ef_search``). They are set with ``is_local => true``: they last until the end
of the current transaction, so the query that needs them runs in the same one.
"""

from __future__ import annotations


def hnsw_filtered_scan_config_sql(*, ef_search: str) -> list[str]:
    """The settings as ``set_config(..., is_local => true)`` expressions, for a SELECT that sets them
    in a statement of its own (a prepared statement can't carry ``SET``). ``ef_search`` is SQL: a
    number or a text parameter placeholder."""
    return [
        f"set_config('hnsw.ef_search', {ef_search}, true)",
        "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
    ]


def hnsw_filtered_scan_select_sql(*, ef_search: str) -> str:
    """The settings of a filtered scan as one ``SELECT set_config(...)`` statement (preparable);
    ``ef_search`` as in :func:`hnsw_filtered_scan_config_sql`."""
    return "SELECT " + ", ".join(hnsw_filtered_scan_config_sql(ef_search=ef_search))
