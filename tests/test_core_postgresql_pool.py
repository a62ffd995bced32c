"""core.postgresql: the web process's connection pool hands out the connection returned last
(a worker's consecutive calls stay on one PostgreSQL backend; docs/performance.md, fiftieth session)."""

import pytest
from django.db import connection, connections

from core.postgresql.base import DatabaseWrapper, MostRecentFirst, prefer_most_recent


def _pool(size: int):
    from psycopg_pool import ConnectionPool

    params = connection.get_connection_params()
    return ConnectionPool(kwargs={**params, "autocommit": True}, min_size=size, max_size=size, open=False)


def _backend(conn) -> int:
    return conn.info.backend_pid


@pytest.mark.django_db
def test_the_pool_hands_out_the_connection_returned_last_and_psycopg_pools_own_the_one_idle_longest():
    fifo, lifo = _pool(3), _pool(3)
    prefer_most_recent(lifo)
    for pool in (fifo, lifo):
        pool.open(wait=True)
    try:
        for pool in (fifo, lifo):
            a, b, c = pool.getconn(), pool.getconn(), pool.getconn()
            for conn in (a, b, c):
                pool.putconn(conn)  # c is returned last
            pool.last = (_backend(a), _backend(c))
            taken = pool.getconn()
            pool.taken = _backend(taken)
            pool.putconn(taken)
            again = pool.getconn()
            pool.again = _backend(again)
            pool.putconn(again)
        assert fifo.taken == fifo.last[0]  # psycopg_pool alone: the one idle longest
        assert lifo.taken == lifo.last[1] and lifo.again == lifo.taken  # the one just returned, again
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
