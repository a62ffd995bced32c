"""Per-token request throttling, shared by every web worker process.

One DRF throttle, :class:`TokenRateThrottle`, limits the requests of each token, agent token or
read-only URL token, in a bucket of its own (:func:`throttle_key`: the token's kind and id). Requests
without a token are not throttled here: they are refused by authentication, or are the health check.
``API_THROTTLE_RATE`` (``N/s``, ``N/min``, ``N/hour``, ``N/day``; ``off`` disables) is read on each request. Over
the rate: 429 ``THROTTLED`` in the envelope with ``Retry-After`` (seconds).

The algorithm is GCRA (the generic cell rate algorithm, "leaky bucket as a meter"): each token has
one number, its theoretical arrival time (TAT). A request at ``now`` is allowed when
``max(TAT, now) - now <= (N - 1) * period / N`` — at most N requests at once, then one every
``period / N`` — and moves the TAT on by ``period / N``; a refused one waits until that holds. One
atomic read-modify-write per request, in the store every process sees (``THROTTLE_CACHE``):

- :class:`RedisGcra` — a Lua script on Redis (one round trip, atomic by Redis's design);
- :class:`DatabaseGcra` — one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` on the table
  ``colony_cache`` (atomic under PostgreSQL's row lock).

Why not DRF's ``SimpleRateThrottle``: it keeps every request's timestamp of the window in the cache,
reads and rewrites that whole list on each request (at 3000/min that is up to 3000 floats pickled
per request), and two concurrent requests of one token can both read the same list and lose a count.
The stores are one per process (:func:`throttle_store`), never per request.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import connection
from rest_framework.throttling import SimpleRateThrottle

from config.env import RATE_OFF
from core.db import asynchronous_commit

logger = logging.getLogger("colony.throttling")


class RedisGcra:
    """GCRA in Redis: the TAT as a string with an expiry, updated by one Lua script (Redis's clock)."""

    SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
if tat - now > tolerance then return tostring(tat - now - tolerance) end
tat = tat + interval
redis.call('SET', KEYS[1], string.format('%.6f', tat), 'PX', math.ceil((tat - now) * 1000) + 1000)
return '0'
"""

    def __init__(self, url: str, prefix: str):
        import redis

        self.prefix = prefix
        self.client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        self.script = self.client.register_script(self.SCRIPT)

    def hit(self, key: str, *, interval: float, tolerance: float) -> float:
        """0.0 when allowed (and counted), else the seconds to wait."""
        return float(self.script(keys=[f"{self.prefix}:{key}"], args=[repr(interval), repr(tolerance)]))

    def forget(self, key: str) -> None:
        self.client.delete(f"{self.prefix}:{key}")


class DatabaseGcra:
    """GCRA in PostgreSQL: the TAT (epoch seconds, as text) in the table ``colony_cache``.

    In a transaction of its own (every request's case) the count commits without waiting for its WAL
    to reach the disk (``synchronous_commit`` off for that transaction only, as the memory call's
    bookkeeping, brain.services.pheromones): one flush less per request (0.25 -> 0.13 ms a hit here).
    A PostgreSQL crash can lose the last fraction of a second of counts, i.e. let a token a few
    requests more, never corrupt them. Inside a caller's transaction its commit is left as it is."""

    HIT_SQL = """
INSERT INTO colony_cache AS c (cache_key, value, expires)
VALUES (%(key)s, (%(now)s + %(interval)s)::text, to_timestamp(%(now)s + %(interval)s))
ON CONFLICT (cache_key) DO UPDATE
    SET value = (GREATEST(c.value::float8, %(now)s) + %(interval)s)::text,
        expires = to_timestamp(GREATEST(c.value::float8, %(now)s) + %(interval)s)
    WHERE GREATEST(c.value::float8, %(now)s) - %(now)s <= %(tolerance)s
RETURNING 0
"""
    HIT_ASYNC_COMMIT_SQL = asynchronous_commit(HIT_SQL)
    WAIT_SQL = "SELECT GREATEST(value::float8 - %(now)s - %(tolerance)s, 0) FROM colony_cache WHERE cache_key = %(key)s"

    def __init__(self, prefix: str):
        self.prefix = prefix

    def hit(self, key: str, *, interval: float, tolerance: float) -> float:
        params = {"key": f"{self.prefix}:{key}", "now": time.time(), "interval": interval, "tolerance": tolerance}
        sql = self.HIT_SQL if connection.in_atomic_block else self.HIT_ASYNC_COMMIT_SQL
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            if cursor.fetchone() is not None:
                return 0.0
            cursor.execute(self.WAIT_SQL, params)
            row = cursor.fetchone()
        return max(float(row[0]) if row else 0.0, 1e-3)

    def forget(self, key: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM colony_cache WHERE cache_key = %s", [f"{self.prefix}:{key}"])


_stores: dict[tuple, RedisGcra | DatabaseGcra] = {}
_stores_lock = threading.Lock()


def throttle_store() -> RedisGcra | DatabaseGcra:
    """This process's store, as ``CACHES[THROTTLE_CACHE_ALIAS]`` configures it (Redis or the database)."""
    config = settings.CACHES[settings.THROTTLE_CACHE_ALIAS]
    identity = (config["BACKEND"], config.get("LOCATION"), config.get("KEY_PREFIX", ""))
    store = _stores.get(identity)
    if store is None:
        with _stores_lock:
            store = _stores.get(identity)
            if store is None:
                prefix = config.get("KEY_PREFIX", "colony")
                if config["BACKEND"].endswith("RedisCache"):
                    store = RedisGcra(config["LOCATION"], prefix)
                else:
                    store = DatabaseGcra(prefix)
                _stores[identity] = store
    return store


def gcra_parameters(num_requests: int, duration: float) -> tuple[float, float]:
    """(interval, tolerance) of the rate ``num_requests`` per ``duration`` seconds."""
    interval = duration / num_requests
    return interval, interval * (num_requests - 1)


def throttle_key(token) -> str | None:
    """The bucket of an authenticated token: its kind and row id (``agent:12``, ``url:12``); None for no
    token (not throttled here). Agent tokens and URL tokens are rows of two tables with two id sequences,
    so the id alone would give URL token 12 and agent token 12 (of any space) one bucket."""
    from core.models import AgentToken, UrlToken

    kind = {AgentToken: "agent", UrlToken: "url"}.get(type(token))
    if kind is None or token.pk is None:
        return None
    return f"{kind}:{token.pk}"


class TokenRateThrottle(SimpleRateThrottle):
    """DRF's throttle class (``DEFAULT_THROTTLE_CLASSES``): one GCRA hit per request, in its token's bucket."""

    scope = "token"

    def __init__(self):
        # The rate is read from the Django setting on every request (tests and operators can change
        # it without a restart); SimpleRateThrottle is used for its rate parsing only.
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.waiting = 0.0

    def get_rate(self):
        rate = (settings.API_THROTTLE_RATE or "").strip().lower()
        return None if rate in RATE_OFF else rate

    def allow_request(self, request, view):
        self.waiting = self._hit(getattr(request, "auth", None))
        return self.waiting == 0.0

    def _hit(self, token) -> float:
        """Count one request of ``token`` (an AgentToken or a UrlToken): 0.0 when it is allowed, else the
        seconds to wait before the next one is. No token, or the rate ``off``: 0.0. While the store is down
        the request is let through (fail open, logged) instead of answering 500; the request then succeeds
        or gets its own 503 (database down)."""
        key = None if self.rate is None else throttle_key(token)
        if key is None:
            return 0.0
        interval, tolerance = gcra_parameters(self.num_requests, self.duration)
        try:
            return throttle_store().hit(key, interval=interval, tolerance=tolerance)
        except Exception as exc:
            from api.errors import is_database_unavailable

            if is_database_unavailable(exc):
                raise
            logger.warning("throttle store unavailable, not throttling this request: %s", exc)
            return 0.0

    def wait(self):
        return self.waiting or None


def token_request_count(token) -> float:
    """Count one request of ``token`` outside DRF (``/mcp``'s messages that are not tool calls): 0.0 when
    it is allowed, else the seconds to wait. The same bucket and rule as :class:`TokenRateThrottle`."""
    return TokenRateThrottle()._hit(token)
