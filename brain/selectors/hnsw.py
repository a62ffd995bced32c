"""Filtered HNSW scans: the one place that sets pgvector's scan parameters.

pgvector applies a query's filters (space, superseded, category...) after the index scan, so a
filtered nearest-neighbour query can come back with fewer rows than asked for. Inside the caller's
transaction, :func:`hnsw_filtered_scan` lets the scan keep going until enough rows pass
(``iterative_scan = relaxed_order``) and widens its candidate list (``ef_search``). ``SET LOCAL``
ends with the transaction, so call it inside ``transaction.atomic()``.
"""

from __future__ import annotations

from django.db import connection


def hnsw_filtered_scan_statements(*, ef_search: int) -> list[str]:
    """The ``SET LOCAL`` statements of a filtered scan (:func:`hnsw_filtered_scan` executes them)."""
    return [
        f"SET LOCAL hnsw.ef_search = {int(ef_search)}",
        "SET LOCAL hnsw.iterative_scan = relaxed_order",
    ]


def hnsw_filtered_scan_config_sql(*, ef_search: str) -> list[str]:
    """The same settings as ``set_config(..., is_local => true)`` expressions, for a SELECT that sets
    them in a statement of its own (a prepared statement can't carry ``SET``). ``ef_search`` is SQL:
    a number or a text parameter placeholder."""
    return [
        f"set_config('hnsw.ef_search', {ef_search}, true)",
        "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
    ]


def hnsw_filtered_scan_select_sql(*, ef_search: str) -> str:
    """The settings of a filtered scan as one ``SELECT set_config(...)`` statement (preparable);
    ``ef_search`` as in :func:`hnsw_filtered_scan_config_sql`."""
    return "SELECT " + ", ".join(hnsw_filtered_scan_config_sql(ef_search=ef_search))


def hnsw_filtered_scan(*, ef_search: int) -> None:
    """Set ``hnsw.iterative_scan`` and ``hnsw.ef_search`` for the rest of the current transaction."""
    with connection.cursor() as cursor:
        for statement in hnsw_filtered_scan_statements(ef_search=ef_search):
            cursor.execute(statement)
