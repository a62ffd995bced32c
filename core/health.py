"""Health of the parts Colony depends on: database with pgvector, broker, workers, embedding model.

The worker check reads the heartbeat rows workers write (``core.services.worker_heartbeat``), so
``GET /api/v1/health`` answers from the database alone and never waits on a worker.

Core imports nothing above itself: the broker is Celery's current app (``config.celery`` makes its
app current when Django loads ``config``), and apps above core add their own parts with
:func:`health_register` from their ``AppConfig.ready`` (the brain adds ``embedding_model``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from celery import current_app
from django.db import connection
from django.utils import timezone

logger = logging.getLogger("colony.health")

# A worker writes its heartbeat every HEARTBEAT_SECONDS; three missed beats make it absent.
HEARTBEAT_SECONDS = 10
HEARTBEAT_STALE_AFTER = timedelta(seconds=3 * HEARTBEAT_SECONDS)

_EXTRA_PARTS: dict[str, tuple[Callable[[], dict], bool]] = {}


def health_register(name: str, part: Callable[[], dict], *, needs_database: bool = False) -> None:
    """Add ``part()``'s keys to every health body (an app's own facts, e.g. its model). Registering
    the same ``name`` again replaces it, so a reloaded app does not add it twice.

    A part that ``needs_database`` is not asked while the database is down: the body says
    ``name: null`` at once instead of waiting out another connection timeout (each failed wait is
    ``DATABASE_CONNECT_TIMEOUT``; waiting, the health check would answer 503 only after two of them, ~6 s)."""
    _EXTRA_PARTS[name] = (part, needs_database)


def health_pgvector() -> str | None:
    """The installed pgvector version, or None when the database or the extension is missing."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        return row[0] if row else None
    except Exception as exc:  # a health probe reports, it does not raise
        logger.warning("health: database check failed: %s", exc)
        return None


def health_broker() -> bool:
    """Whether the broker answers, as last found within BROKER_PROBE_SECONDS.

    The health check answers anyone, before authentication, and a probe of a broker that is down
    waits out its 1 s timeout: one probe per call would let a few anonymous callers in a loop keep
    every request thread waiting. So one probe serves every call for BROKER_PROBE_SECONDS; callers
    that arrive while it runs wait for it (one timeout at most) and share its answer."""
    url = current_app.conf.broker_url
    known = _broker_known(url)
    if known is not None:
        return known
    with _broker_lock:
        known = _broker_known(url)  # another caller probed while this one waited
        if known is None:
            known = _broker_probe()
            _broker_seen[url] = (time.monotonic(), known)
        return known


#: How long one broker probe answers the health check (seconds).
BROKER_PROBE_SECONDS = 5.0
_broker_lock = threading.Lock()
_broker_seen: dict[str, tuple[float, bool]] = {}  # broker URL -> (when probed, monotonic; reachable)


def _broker_known(url: str) -> bool | None:
    seen = _broker_seen.get(url)
    if seen is None or time.monotonic() - seen[0] >= BROKER_PROBE_SECONDS:
        return None
    return seen[1]


def _broker_probe() -> bool:
    app = current_app
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=1)
        return True
    except Exception as exc:
        description = getattr(app, "colony_broker_description", app.conf.broker_url)
        logger.warning("health: broker %s unreachable: %s", description, exc)
        return False


def health_worker() -> bool:
    from core.models import WorkerHeartbeat  # models load after the app registry; the worker imports this early

    try:
        return WorkerHeartbeat.objects.filter(last_seen__gte=timezone.now() - HEARTBEAT_STALE_AFTER).exists()
    except Exception as exc:
        logger.warning("health: heartbeat check failed: %s", exc)
        return False


def health_summary() -> dict:
    """The body of ``GET /api/v1/health``; ``status`` is ok only when every part is."""
    pgvector = health_pgvector()
    # Without the database the heartbeat can't be read: don't wait for a second failed connection.
    worker = health_worker() if pgvector is not None else False
    parts = {"database": pgvector is not None, "broker": health_broker(), "worker": worker}
    body = {
        "status": "ok" if all(parts.values()) else "error",
        "database": parts["database"],
        "pgvector": pgvector,
        "broker": parts["broker"],
        "worker": parts["worker"],
    }
    for name, (part, needs_database) in _EXTRA_PARTS.items():
        body.update(part() if parts["database"] or not needs_database else {name: None})
    return body
