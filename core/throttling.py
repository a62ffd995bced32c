"""Per-token request throttling (issue 16 item 7), shared by every web worker process.

One DRF throttle, :class:`TokenRateThrottle`, counts the requests of each agent token (requests
without a token are not throttled here: they are refused by authentication, or are the health
check). The history lives in the ``throttle`` cache, which every process sees: Redis when it is the
broker (``THROTTLE_CACHE=auto``), else the database cache table ``colony_cache`` (created by a
migration). ``API_THROTTLE_RATE`` (``N/s``, ``N/min``, ``N/hour``; ``off`` disables) is read on each
request. Over the rate: 429 ``THROTTLED`` in the envelope with ``Retry-After`` (seconds).

The cache object is one per process (:func:`throttle_cache`), not Django's ``caches[...]``: those
are per asyncio context, so under ASGI every request built a new Redis client and opened a new TCP
connection (connect + handshake on each request, measured with ``benchmarks/op_costs.py``). Both
backends are thread-safe (redis-py's connection pool; the database cache uses Django's per-thread
connections).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import caches
from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger("colony.throttling")

_shared: dict[str, object] = {}


def throttle_cache():
    """This process's throttle cache (created once from ``CACHES[THROTTLE_CACHE_ALIAS]``)."""
    alias = settings.THROTTLE_CACHE_ALIAS
    cache = _shared.get(alias)
    if cache is None:
        cache = _shared[alias] = caches.create_connection(alias)
    return cache


class TokenRateThrottle(SimpleRateThrottle):
    scope = "token"
    cache_format = "throttle_%(scope)s_%(ident)s"

    def __init__(self):
        # SimpleRateThrottle reads its rate once per class from DRF settings; this one reads the Django
        # setting on every request (tests and operators can change it without a restart of the class).
        self.cache = throttle_cache()
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def get_rate(self):
        rate = (settings.API_THROTTLE_RATE or "").strip().lower()
        return None if rate in {"", "off", "0", "none"} else rate

    def get_cache_key(self, request, view):
        token = getattr(request, "auth", None)
        if token is None or getattr(token, "pk", None) is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": token.pk}

    def allow_request(self, request, view):
        # The counts live in Redis (or the database): while that store is down, let the request
        # through (fail open, logged) instead of answering 500; the request itself then succeeds
        # or gets its own 503 (database down).
        try:
            return super().allow_request(request, view)
        except Exception as exc:
            from core.errors import is_database_unavailable

            if is_database_unavailable(exc):
                raise
            logger.warning("throttle store unavailable, not throttling this request: %s", exc)
            return True
