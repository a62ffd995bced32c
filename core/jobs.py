"""Core jobs: a health probe that proves a worker can reach the database."""

import socket

from celery import shared_task

from core.health import health_pgvector


@shared_task(name="core.jobs.health_probe")
def health_probe() -> dict:
    """Runs on a worker: reports the worker's host and what it sees of the database."""
    return {"worker": socket.gethostname(), "pgvector": health_pgvector()}
