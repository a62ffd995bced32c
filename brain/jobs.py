"""Brain jobs. Each takes ids, loads its objects and calls a service; ``brain.services.pipeline``
schedules them."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError, transaction
from django.utils import timezone

from brain.embedding import EmbeddingError
from brain.judging import JudgeUnavailable
from brain.services import contradictions, pheromones, receipts, text_stats
from brain.services import thoughts as thought_services
from brain.services.flags import thoughts_flag_stale


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
    """Safety net: embed up to ``batch_size`` thoughts whose job was lost (e.g. no worker when they
    were stored), then check them for contradictions, as the chain after their lost job would have.

    The check is idempotent (one pending suggestion per thought and statement), so running it for a
    thought whose job was only late is harmless. Returns how many vectors were written.
    """
    rows = thought_services.thoughts_missing_embedding(limit=batch_size)
    if not rows:
        return 0
    written = thought_services.thoughts_embed_batch(thought_ids=[thought_id for thought_id, _ in rows])
    for thought_id, category in rows:
        if category not in contradictions.SKIPPED_CATEGORIES:
            transaction.on_commit(lambda thought_id=thought_id: detect_contradictions.delay(thought_id))
    return written


@shared_task(
    name="brain.jobs.pheromone_decay",
    autoretry_for=(OperationalError,),
    retry_backoff=30,
    max_retries=3,
    time_limit=600,
)
def pheromone_decay() -> int:
    """Hourly (config/celery.py): weights of thoughts idle for an hour decay toward 0.1, space by space
    (a space that fails is logged, the others decay). Safe to run twice: a retry (a lost connection) or
    a redelivery within the hour steps only the thoughts not stepped for that hour yet (``decayed_at``)."""
    return pheromones.thoughts_decay()


@shared_task(
    name="brain.jobs.reinforcement_fold",
    autoretry_for=(OperationalError,),
    max_retries=3,
    time_limit=300,
)
def reinforcement_fold() -> int:
    """Every minute (config/celery.py): count the accesses web processes logged and did not fold
    themselves (they fold after a response at most every REINFORCEMENT_FOLD_SECONDS, so the last
    calls before a pause wait for this). Space by space: a space that fails is logged, the others are
    counted. Returns how many query-log rows it counted."""
    return pheromones.reinforcement_fold_all().logs


@shared_task(name="brain.jobs.text_stats_compact", autoretry_for=(OperationalError,), max_retries=3, time_limit=600)
def text_stats_compact() -> int:
    """Every 15 s (config/celery.py TEXT_STATS_COMPACT_SECONDS): fold BM25's statistics deltas of the
    spaces written to since the last run (brain.services.text_stats)."""
    return text_stats.text_stats_compact()


@shared_task(name="brain.jobs.import_receipts_expire", autoretry_for=(OperationalError,), max_retries=3, time_limit=300)
def import_receipts_expire() -> int:
    """Hourly: delete the Idempotency-Key receipts of imports older than IMPORT_RECEIPT_HOURS."""
    return receipts.receipts_expire()


@shared_task(name="brain.jobs.query_logs_expire", autoretry_for=(OperationalError,), max_retries=3, time_limit=1800)
def query_logs_expire() -> int:
    """Nightly: delete the query-log rows older than QUERY_LOG_RETENTION_DAYS, but for the sessions still
    read (pheromones.QUERY_LOG_KEEPERS: open tasks' memory gates), space by space (a space that fails is
    logged, the others are expired)."""
    return pheromones.query_logs_expire()


# --- knowledge evolution ---


@shared_task(name="brain.jobs.flag_stale_snapshots", time_limit=300)
def flag_stale_snapshots() -> int:
    """Nightly: flag state snapshots whose temporal_scope is older than STALE_SNAPSHOT_DAYS."""
    return thoughts_flag_stale(today=timezone.localdate())


@shared_task(
    name="brain.jobs.detect_contradictions",
    autoretry_for=(OperationalError, EmbeddingError, contradictions.EmbeddingPending, JudgeUnavailable),
    retry_backoff=10,
    retry_backoff_max=600,
    max_retries=8,
    time_limit=600,
    soft_time_limit=540,
)
def detect_contradictions(thought_id: str) -> int:
    """Judge a new thought against existing facts; returns how many suggestions it raised."""
    return len(contradictions.thought_detect_contradictions(thought_id=thought_id))
