"""Django's PostgreSQL backend whose connection pool hands out the connection returned last.

The web process serves Django with a psycopg connection pool per worker (``DATABASE_POOL``,
config/settings.py). psycopg_pool's pool is first in, first out: a returned connection goes to the
back of the line and the one idle longest is taken next. A worker's calls overlap by what a call does
after its response (the query log's results, api.responses), so its pool holds two or three
connections and, first in, first out, each call would get another one than the call before: another
PostgreSQL backend process, woken after sitting idle, its caches gone cold. Taken most recent first,
consecutive calls stay on the backend that just served one. A pool that keeps connections idle for
its whole ``max_idle`` still closes one of them: the one returned last, since the pool shrinks from
the same end it hands out from (first in, first out would close the one idle longest). Two
production servers on bench-compare's 10,000 notes, calls interleaved: docs/performance.md,
"PostgreSQL". Everything else is Django's backend.
"""

from __future__ import annotations

import collections

from django.db.backends.postgresql import base


class MostRecentFirst(collections.deque):
    """The pool's idle connections, most recently returned first.

    psycopg_pool (3.3) returns a connection with ``append()`` and takes one with ``popleft()``;
    taking from the same end it appends to makes it last in, first out.
    ``tests/test_core_postgresql_pool.py`` holds the pool to that.
    """

    def popleft(self):
        return self.pop()


def prefer_most_recent(pool) -> None:
    """Make ``pool`` (a psycopg_pool.ConnectionPool) hand out its most recently returned connection."""
    if isinstance(pool._pool, MostRecentFirst):
        return
    with pool._lock:
        if not isinstance(pool._pool, MostRecentFirst):
            pool._pool = MostRecentFirst(pool._pool)


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        pool = super().pool
        if pool is not None:
            prefer_most_recent(pool)
        return pool
