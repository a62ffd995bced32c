"""runtime.postgresql: the web process's connection pool hands out the connection returned last
(a worker's consecutive calls stay on one PostgreSQL backend; docs/performance.md)."""

import pytest
from django.db import connection, connections

from runtime.postgresql.base import DatabaseWrapper, MostRecentFirst, prefer_most_recent


def _pool(size: int):
    from psycopg_pool import ConnectionPool

    params = connection.get_connection_params()
    return ConnectionPool(kwargs={**params, "autocommit": True}, min_size=size, max_size=size, open=False)


def _handed_out(pool) -> tuple[int, int, int, int]:
    """Three connections taken and returned in turn: (the backend returned first, the one returned last,
    the one the pool hands out next, and next again after that one is returned)."""
    taken = [pool.getconn() for _ in range(3)]
    for conn in taken:
        pool.putconn(conn)
    backends = []
    for _ in range(2):
        conn = pool.getconn()
        backends.append(conn.info.backend_pid)
        pool.putconn(conn)
    return taken[0].info.backend_pid, taken[-1].info.backend_pid, *backends


@pytest.mark.django_db
def test_the_pool_hands_out_the_connection_returned_last_and_psycopg_pools_own_the_one_idle_longest():
    fifo, lifo = _pool(3), _pool(3)
    prefer_most_recent(lifo)
    try:
        for pool in (fifo, lifo):
            pool.open(wait=True)
        first, last, taken, _again = _handed_out(fifo)
        assert taken == first != last  # psycopg_pool alone: the one idle longest
        first, last, taken, again = _handed_out(lifo)
        assert taken == last != first and again == taken  # the one just returned, every time
    finally:
        fifo.close()
        lifo.close()


def test_django_with_a_pool_gets_one_that_prefers_the_connection_returned_last():
    settings_dict = {**connection.settings_dict, "CONN_MAX_AGE": 0}
    settings_dict["OPTIONS"] = {**settings_dict["OPTIONS"], "pool": {"min_size": 1, "max_size": 2}}
    wrapper = DatabaseWrapper(settings_dict, alias="pool_test")
    try:
        assert isinstance(wrapper.pool._pool, MostRecentFirst)
        prefer_most_recent(wrapper.pool)  # idempotent
        assert isinstance(wrapper.pool._pool, MostRecentFirst)
    finally:
        wrapper.close_pool()
    assert isinstance(connections["default"], DatabaseWrapper)  # what config/settings.py configures
