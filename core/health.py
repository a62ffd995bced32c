"""Health of the parts Colony depends on: database with pgvector, broker, workers, embedding model.

The worker check reads the heartbeat rows workers write (``core.services.worker_heartbeat``), so
``GET /api/v1/health`` answers from the database alone and never waits on a worker.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import connection
from django.utils import timezone

logger = logging.getLogger("colony.health")

# A worker writes its heartbeat every HEARTBEAT_SECONDS; three missed beats make it absent.
HEARTBEAT_SECONDS = 10
HEARTBEAT_STALE_AFTER = timedelta(seconds=3 * HEARTBEAT_SECONDS)


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
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=1)
        return True
    except Exception as exc:
        logger.warning("health: broker %s unreachable: %s", app.colony_broker_description, exc)
        return False


def health_worker() -> bool:
    from core.models import WorkerHeartbeat

    try:
        return WorkerHeartbeat.objects.filter(last_seen__gte=timezone.now() - HEARTBEAT_STALE_AFTER).exists()
    except Exception as exc:
        logger.warning("health: heartbeat check failed: %s", exc)
        return False


def health_summary() -> dict:
    """The body of ``GET /api/v1/health``; ``status`` is ok only when every part is."""
    from brain.embedding import current_model_label

    pgvector = health_pgvector()
    embedding = health_embedding() if pgvector is not None else None
    parts = {"database": pgvector is not None, "broker": health_broker(), "worker": health_worker()}
    return {
        "status": "ok" if all(parts.values()) else "error",
        "database": parts["database"],
        "pgvector": pgvector,
        "broker": parts["broker"],
        "worker": parts["worker"],
        "embedding_model": current_model_label(),
        # Advisory (never makes the status an error): stored vectors from another embedder.
        "embedding": embedding,
    }


def health_embedding() -> dict | None:
    """Which embedder this process uses and whether stored vectors need ``manage.py reembed``."""
    from brain.embedding import stored_vectors_notice

    try:
        notice = stored_vectors_notice()
    except Exception as exc:
        logger.warning("health: embedding label check failed: %s", exc)
        return None
    return {key: notice[key] for key in ("embedder", "reembed_needed", "message")}
