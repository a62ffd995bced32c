"""Brain jobs. Each takes ids, loads its objects and calls a service."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from brain.embedding import EmbeddingError
from brain.services import pheromones
from brain.services import thoughts as thought_services


@shared_task(
    name="brain.jobs.embed_thought",
    autoretry_for=(OperationalError, EmbeddingError),
    retry_backoff=5,
    retry_backoff_max=300,
    max_retries=8,
    # Below the app-wide soft limit (240 s), which Celery refuses to exceed the hard one.
    soft_time_limit=100,
    time_limit=120,
)
def embed_thought(thought_id: str) -> bool:
    return thought_services.thought_embed(thought_id=thought_id)


@shared_task(name="brain.jobs.embed_missing", time_limit=600)
def embed_missing(batch_size: int = 64) -> int:
    """Safety net: embed thoughts whose job was lost (e.g. no worker when they were stored)."""
    return thought_services.thoughts_embed_missing(batch_size=batch_size)


@shared_task(
    name="brain.jobs.pheromone_decay",
    autoretry_for=(OperationalError,),
    retry_backoff=30,
    max_retries=3,
    time_limit=600,
)
def pheromone_decay() -> int:
    """Hourly (config/celery.py): weights of thoughts idle for an hour decay toward 0.1."""
    return pheromones.thoughts_decay()


# --- knowledge evolution ---


@shared_task(name="brain.jobs.flag_stale_snapshots", time_limit=300)
def flag_stale_snapshots() -> int:
    """Nightly: flag state snapshots whose temporal_scope is older than STALE_SNAPSHOT_DAYS."""
    from django.utils import timezone

    from brain.services.flags import thoughts_flag_stale

    return thoughts_flag_stale(today=timezone.localdate())


def _contradiction_retry_errors() -> tuple[type[BaseException], ...]:
    from brain.judging import JudgeUnavailable
    from brain.services.contradictions import EmbeddingPending

    return (OperationalError, EmbeddingError, EmbeddingPending, JudgeUnavailable)


@shared_task(
    name="brain.jobs.detect_contradictions",
    autoretry_for=_contradiction_retry_errors(),
    retry_backoff=10,
    retry_backoff_max=600,
    max_retries=8,
    time_limit=600,
    soft_time_limit=540,
)
def detect_contradictions(thought_id: str) -> int:
    """Judge a new thought against existing facts; returns how many suggestions it raised."""
    from brain.services.contradictions import thought_detect_contradictions

    return len(thought_detect_contradictions(thought_id=thought_id))
