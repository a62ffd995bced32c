"""Prometheus metrics at ``/metrics``, correct with several web and worker processes.

prometheus_client runs in multiprocess mode: every process writes its samples to files in
``PROMETHEUS_MULTIPROC_DIR`` (``$COLONY_DATA_DIR/metrics``, set by ``config.settings`` before
anything imports prometheus_client), and a scrape adds them up. Recorded where they happen:

- ``colony_http_request_duration_seconds{method, endpoint, status}`` — every request, by its URL
  route (``api/v1/thoughts/<str:thought_id>``, not the concrete path), :class:`MetricsMiddleware`;
- ``colony_mcp_call_duration_seconds{method, endpoint, status}`` — every MCP tool call, by the REST
  route it runs (``colony_mcp.rest`` runs it through the same middleware, which tells them apart);
- ``colony_embedding_seconds{kind}`` — each model call (``kind`` = query for one text, batch);
- ``colony_job_seconds{job, state}`` — every Celery job's run time, in the worker (signals below);
- ``colony_job_queue_wait_seconds{job}`` — from enqueue to start, when the sender stamped the time.

Read from the database and the broker at scrape time (:class:`StateCollector`):
``colony_celery_queue_depth{queue}``, ``colony_worker_heartbeat_age_seconds{hostname}``, and the
gauges apps register with :func:`metrics_register_gauge` (``colony_thoughts_waiting_embedding``).

The samples of a process stay in its files after it ends (so a restarted worker's counts don't go
back), which is right within one run of Colony and wrong across runs: ``make run`` empties the folder
when it starts (``runtime.run.metrics_of_earlier_runs_clear``); under another service manager, empty it
before the web and worker processes start.

Who may read it: requests from a loopback address while ``METRICS_ALLOW_LOCALHOST`` is true (the
default; set it false behind a reverse proxy on the same host, where every request comes from there:
``check --deploy`` warns, ``colony.W001``), requests with ``Authorization: Bearer $METRICS_TOKEN``
(a scraper), and logged-in staff users.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CollectorRegistry, Histogram, generate_latest, multiprocess
from prometheus_client import values as prometheus_values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

logger = logging.getLogger("colony.metrics")

# prometheus_client picks its value class (files per process, or memory) when it is first imported.
# A library imported before the settings set PROMETHEUS_MULTIPROC_DIR would leave this process's
# samples in memory, invisible to a scrape answered by another process: pick again now.
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    prometheus_values.ValueClass = prometheus_values.get_value_class()

REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
REQUEST_SECONDS = Histogram(
    "colony_http_request_duration_seconds",
    "Request latency by URL route.",
    ["method", "endpoint", "status"],
    buckets=REQUEST_BUCKETS,
)
MCP_CALL_SECONDS = Histogram(
    "colony_mcp_call_duration_seconds",
    "MCP tool call latency by the REST route the tool runs.",
    ["method", "endpoint", "status"],
    buckets=REQUEST_BUCKETS,
)
EMBEDDING_SECONDS = Histogram(
    "colony_embedding_seconds",
    "Time of one embedding model call.",
    ["kind"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30),
)
JOB_SECONDS = Histogram(
    "colony_job_seconds",
    "Run time of a Celery job in the worker.",
    ["job", "state"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
)
JOB_QUEUE_WAIT_SECONDS = Histogram(
    "colony_job_queue_wait_seconds",
    "Time a Celery job waited in the queue (enqueue to start).",
    ["job"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
)


def metrics_files_clear(directory: str | os.PathLike) -> int:
    """Delete the sample files earlier processes left in ``directory`` (a ``PROMETHEUS_MULTIPROC_DIR``);
    how many. Only before Colony's processes start: a scrape adds up every file, so without it
    ``/metrics`` counted every request since the data folder was made (earlier runs, test runs, commands)."""
    folder = Path(directory)
    if not folder.is_dir():
        return 0
    removed = 0
    for path in folder.glob("*.db"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed


def observe_embedding(kind: str, seconds: float) -> None:
    EMBEDDING_SECONDS.labels(kind=kind).observe(seconds)


# --- requests ---------------------------------------------------------------------------------------
class MetricsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        histogram = MCP_CALL_SECONDS if getattr(request, "colony_via_mcp", False) else REQUEST_SECONDS
        observe_request(histogram, request, response.status_code, time.perf_counter() - started)
        return response


#: The methods a request is counted under by name; any other (a caller may send any token as its method,
#: and each would be a new series of every endpoint) is counted as "other".
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def observe_request(histogram: Histogram, request, status: int, seconds: float) -> None:
    """One request (or MCP tool call) in ``histogram``, by its URL route; never raises."""
    match = getattr(request, "resolver_match", None)
    endpoint = match.route if match is not None and match.route else "unmatched"
    try:
        method = request.method if request.method in METHODS else "other"
        histogram.labels(method=method, endpoint=endpoint, status=str(status)).observe(seconds)
    except Exception:  # noqa: BLE001 - metrics must never break a request
        logger.warning("could not record request metrics", exc_info=True)


# --- Celery -----------------------------------------------------------------------------------------
_started: dict[str, float] = {}


def connect_celery_signals() -> None:
    """Time every job in the process that runs it (called once when the Celery app is created)."""
    from celery.signals import before_task_publish, task_postrun, task_prerun

    @before_task_publish.connect(weak=False)
    def _stamp(headers=None, **kwargs):
        if headers is not None:
            headers.setdefault("colony_enqueued_at", time.time())

    @task_prerun.connect(weak=False)
    def _prerun(task_id=None, task=None, **kwargs):
        _started[task_id] = time.perf_counter()
        enqueued = getattr(getattr(task, "request", None), "colony_enqueued_at", None)
        if enqueued:
            JOB_QUEUE_WAIT_SECONDS.labels(job=task.name).observe(max(0.0, time.time() - float(enqueued)))

    @task_postrun.connect(weak=False)
    def _postrun(task_id=None, task=None, state=None, **kwargs):
        started = _started.pop(task_id, None)
        if started is not None and task is not None:
            JOB_SECONDS.labels(job=task.name, state=state or "UNKNOWN").observe(time.perf_counter() - started)


# --- state read at scrape time ----------------------------------------------------------------------
def celery_queue_depths() -> dict[str, int]:
    """Messages waiting per queue: Redis list lengths, or files in the filesystem broker's folder."""
    from celery import current_app

    conf = current_app.conf
    queue = conf.task_default_queue or "celery"
    url = conf.broker_url or ""
    if url.startswith("redis"):
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        return {queue: int(client.llen(queue))}
    folder = (conf.broker_transport_options or {}).get("data_folder_in")
    if folder and os.path.isdir(folder):
        return {queue: sum(1 for name in os.listdir(folder) if name.endswith(f".{queue}.msg"))}
    return {}


_gauges: dict[str, tuple[str, Callable[[], float]]] = {}


def metrics_register_gauge(name: str, help_text: str, read: Callable[[], float]) -> None:
    """A gauge read at scrape time, registered by an app above core from its ``AppConfig.ready``
    (the brain adds ``colony_thoughts_waiting_embedding``)."""
    _gauges[name] = (help_text, read)


class StateCollector:
    """Gauges read when scraped (one process answers; nothing to add up across processes)."""

    def collect(self):
        from django.db.models import Max
        from django.utils import timezone

        from core.models import WorkerHeartbeat

        for name, (help_text, read) in _gauges.items():
            gauge = GaugeMetricFamily(name, help_text)
            gauge.add_metric([], read())
            yield gauge

        age = GaugeMetricFamily(
            "colony_worker_heartbeat_age_seconds",
            "Seconds since each Celery worker's last heartbeat.",
            labels=["hostname"],
        )
        now = timezone.now()
        for hostname, seen in WorkerHeartbeat.objects.values_list("hostname", "last_seen"):
            age.add_metric([hostname], (now - seen).total_seconds())
        newest = WorkerHeartbeat.objects.aggregate(newest=Max("last_seen"))["newest"]
        yield age
        youngest = GaugeMetricFamily(
            "colony_worker_heartbeat_youngest_age_seconds", "Age of the freshest heartbeat (-1: no worker ever)."
        )
        youngest.add_metric([], (now - newest).total_seconds() if newest else -1)
        yield youngest

        depth = GaugeMetricFamily("colony_celery_queue_depth", "Jobs waiting in the broker.", labels=["queue"])
        try:
            for queue, count in celery_queue_depths().items():
                depth.add_metric([queue], count)
        except Exception:  # noqa: BLE001 - broker down: the gauge is absent, the scrape still answers
            logger.warning("could not read the Celery queue depth", exc_info=True)
        yield depth


# --- the view ---------------------------------------------------------------------------------------
def _from_loopback(request) -> bool:
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def _scraper(request) -> bool:
    """Whether the request carries ``Authorization: Bearer`` with ``METRICS_TOKEN`` (compared in constant time)."""
    expected = settings.METRICS_TOKEN
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    return bool(expected) and scheme.lower() == "bearer" and hmac.compare_digest(sent.encode(), expected.encode())


def metrics_view(request):
    user = getattr(request, "user", None)
    staff = bool(user is not None and user.is_authenticated and user.is_staff)
    local = settings.METRICS_ALLOW_LOCALHOST and _from_loopback(request)
    if not (staff or local or _scraper(request)):
        return HttpResponse(
            "Metrics are served to localhost (METRICS_ALLOW_LOCALHOST), to a scraper sending "
            "Authorization: Bearer $METRICS_TOKEN, and to logged-in staff users only.\n",
            status=403,
            content_type="text/plain",
        )
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(StateCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


def metrics_open_to_a_proxy_check(app_configs=None, **kwargs) -> list:
    """``check --deploy``: behind a reverse proxy on the same host every request comes from 127.0.0.1, so
    ``METRICS_ALLOW_LOCALHOST`` would serve /metrics to anyone the proxy serves."""
    from django.core import checks

    if not settings.METRICS_ALLOW_LOCALHOST:
        return []
    return [
        checks.Warning(
            "METRICS_ALLOW_LOCALHOST is on: behind a reverse proxy on this host every request comes from "
            "127.0.0.1, and /metrics answers anyone the proxy serves.",
            hint="Set METRICS_ALLOW_LOCALHOST=false; a Prometheus sends Authorization: Bearer $METRICS_TOKEN.",
            id="colony.W001",
        )
    ]
