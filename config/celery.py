"""Colony's Celery app: broker choice, job defaults and every periodic job, in one place.

Broker: Redis at ``REDIS_URL`` when it answers (production); otherwise kombu's filesystem
transport in ``$COLONY_DATA_DIR/broker``, which needs no server process. ``COLONY_BROKER`` forces
one (``redis`` or ``filesystem``). Jobs live in each app's ``jobs.py`` (``tasks`` is a domain app).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from celery import Celery, bootsteps, signals
from celery.schedules import crontab

from config.env import url_without_password

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger("colony.celery")


def redis_answers(url: str, timeout: float = 0.5) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout).ping())
    except (redis.RedisError, OSError, ValueError):
        return False


def broker_settings(*, choice: str, redis_url: str, data_dir: Path) -> dict:
    """Celery settings for the chosen broker; ``choice`` is auto, redis or filesystem."""
    if choice not in {"auto", "redis", "filesystem"}:
        raise ValueError(f"COLONY_BROKER must be auto, redis or filesystem, not {choice!r}")
    use_redis = choice == "redis" or (choice == "auto" and redis_answers(redis_url))
    if use_redis:
        return {
            "broker_url": redis_url,
            "result_backend": redis_url,
            "colony_broker_description": f"redis ({url_without_password(redis_url)})",
        }
    queue = data_dir / "broker" / "queue"
    processed = data_dir / "broker" / "processed"
    results = data_dir / "broker" / "results"
    control = data_dir / "broker" / "control"
    for folder in (queue, processed, results, control):
        folder.mkdir(parents=True, exist_ok=True)
    return {
        "broker_url": "filesystem://",
        "broker_transport_options": {
            "data_folder_in": str(queue),
            "data_folder_out": str(queue),
            "processed_folder": str(processed),
            "store_processed": False,
            # kombu's default is ./control in the working directory; keep the broadcast (pidbox)
            # exchange files in the data folder with the rest.
            "control_folder": str(control),
        },
        "result_backend": f"file://{results}",
        "colony_broker_description": f"filesystem ({queue}; no Redis answered at {url_without_password(redis_url)})",
    }


#: How often BM25's statistics deltas are folded (``brain.services.text_stats.text_stats_compact``).
#: A search reads every delta row of its query's lexemes, so the rows left between folds slow every
#: search: a space taking five writes a second (the soak) gains ~300 rows per common lexeme a minute,
#: and after 150 s unfolded a contribution's search takes ~34 ms against ~23.5 ms folded. At 15 s a
#: common lexeme has at most ~75 rows; a run with nothing to fold is one statement over the small
#: space table (docs/performance.md, "PostgreSQL").
TEXT_STATS_COMPACT_SECONDS = 15.0

PERIODIC_JOBS = {
    "pheromone-decay": {"task": "brain.jobs.pheromone_decay", "schedule": crontab(minute=0)},
    "flag-stale-snapshots": {"task": "brain.jobs.flag_stale_snapshots", "schedule": crontab(minute=15, hour=3)},
    "import-receipts-expire": {"task": "brain.jobs.import_receipts_expire", "schedule": crontab(minute=40)},
    "query-logs-expire": {"task": "brain.jobs.query_logs_expire", "schedule": crontab(minute=50, hour=3)},
    "reinforcement-fold": {
        "task": "brain.jobs.reinforcement_fold",
        "schedule": 60.0,
        # a run left queued while the workers were down is dropped: the next one folds everything
        "options": {"expires": 240},
    },
    "embed-missing-thoughts": {"task": "brain.jobs.embed_missing", "schedule": crontab(minute="*/10")},
    "text-stats-compact": {
        "task": "brain.jobs.text_stats_compact",
        "schedule": TEXT_STATS_COMPACT_SECONDS,
        # A run left queued while the workers were down is dropped, not piled up: the next one folds all.
        "options": {"expires": TEXT_STATS_COMPACT_SECONDS * 4},
    },
    "quality-rollup": {"task": "quality.jobs.rollup_daily", "schedule": crontab(minute=5)},
    "quality-expire-turn-logs": {"task": "quality.jobs.expire_turn_logs", "schedule": crontab(minute=30, hour=3)},
    "quality-flag-unverified": {"task": "quality.jobs.flag_unverified", "schedule": crontab(minute=45, hour=3)},
}


class HeartbeatStep(bootsteps.StartStopStep):
    """Every worker writes a heartbeat row every few seconds; ``GET /api/v1/health`` reads it."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.tref = None
        self.started_at = None

    def start(self, worker):
        from django.utils import timezone

        from core.health import HEARTBEAT_SECONDS

        self.started_at = timezone.now()
        self.beat(worker)
        self.tref = worker.timer.call_repeatedly(HEARTBEAT_SECONDS, self.beat, (worker,), priority=10)

    def stop(self, worker):
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    def beat(self, worker):
        from django.db import close_old_connections

        from core.services import worker_heartbeat

        close_old_connections()
        try:
            worker_heartbeat(hostname=worker.hostname, pid=os.getpid(), started_at=self.started_at)
        except Exception:
            # The database being down must not kill the worker: health then reports worker=false.
            logger.warning("could not write the worker heartbeat", exc_info=True)


#: Jobs between the fixup's own forced reconnects (it closes after twice this many).
DB_REUSE_JOBS = 10_000


@signals.task_prerun.connect(weak=False)
@signals.task_postrun.connect(weak=False)
def _close_old_connections(sender=None, **kwargs) -> None:
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return  # an eager job runs inside the caller's transaction (tests): leave its connection alone
    from django.db import close_old_connections

    close_old_connections()


def make_app() -> Celery:
    from django.conf import settings

    app = Celery("colony")
    chosen = broker_settings(
        choice=settings.COLONY_BROKER, redis_url=settings.REDIS_URL, data_dir=settings.COLONY_DATA_DIR
    )
    app.conf.update(
        {key: value for key, value in chosen.items() if not key.startswith("colony_")},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # Nothing reads a job's return value (the jobs write what they did to the database): storing
        # each one in the result backend would cost the worker a Redis write and publish per job, ~6% of
        # a contradiction job's CPU (py-spy on the worker). A caller that wants one asks for it
        # (``send_task(..., ignore_result=False)``, as the integration tests do).
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=300,
        task_soft_time_limit=240,
        task_always_eager=settings.CELERY_TASK_ALWAYS_EAGER,
        task_eager_propagates=True,
        broker_connection_retry_on_startup=True,
        # Enqueueing happens after a request's commit: with the broker down it must fail fast (the
        # request has its 2xx; the periodic safety nets re-enqueue what was lost), never hang.
        task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5},
        broker_transport_options={
            **chosen.get("broker_transport_options", {}),
            **({"socket_connect_timeout": 2, "socket_timeout": 5} if chosen["broker_url"].startswith("redis") else {}),
        },
        redis_socket_connect_timeout=2,
        redis_socket_timeout=5,
        beat_schedule=PERIODIC_JOBS,
        beat_schedule_filename=str(settings.COLONY_DATA_DIR / "celerybeat-schedule"),
        timezone="UTC",
    )
    if os.environ.get("COLONY_WEB_PROCESS"):
        # The web only sends jobs and never reads their results: without a result backend a send
        # doesn't also subscribe to the result channel, which would hang requests while Redis is down.
        app.conf.result_backend = None
    # Celery's Django fixup closes the database connection before and after every job unless
    # CELERY_DB_REUSE_MAX is set: a new PostgreSQL backend (fork + authentication) per job. Jobs keep
    # their connection instead and, like Django's requests, drop it only when it is broken or older
    # than CONN_MAX_AGE (``close_old_connections`` around each job; CONN_HEALTH_CHECKS then checks it
    # before the next use, so a restarted database costs no job).
    app.conf.CELERY_DB_REUSE_MAX = DB_REUSE_JOBS
    app.colony_broker_description = chosen["colony_broker_description"]
    app.steps["worker"].add(HeartbeatStep)
    app.autodiscover_tasks(related_name="jobs")
    return app


app = make_app()
