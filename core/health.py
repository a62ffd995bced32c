"""Health of the parts Colony depends on: database (with pgvector), broker and workers."""

from __future__ import annotations

from django.db import connection


def health_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
        return {"ok": row is not None, "pgvector": row[0] if row else None}
    except Exception as exc:  # a health probe reports, it does not raise
        return {"ok": False, "error": str(exc)[:200]}


def health_broker() -> dict:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=1)
        return {"ok": True, "broker": app.colony_broker_description}
    except Exception as exc:
        return {"ok": False, "broker": app.colony_broker_description, "error": str(exc)[:200]}


def health_workers(timeout: float = 1.0) -> dict:
    from config.celery import app

    try:
        replies = app.control.ping(timeout=timeout) or []
        return {"ok": bool(replies), "count": len(replies)}
    except Exception as exc:
        return {"ok": False, "count": 0, "error": str(exc)[:200]}


def health_summary(*, include_workers: bool = False) -> dict:
    parts = {"database": health_database(), "broker": health_broker()}
    if include_workers:
        parts["workers"] = health_workers()
    return {"status": "ok" if all(part["ok"] for part in parts.values()) else "degraded", **parts}
