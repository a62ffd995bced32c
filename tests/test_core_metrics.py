"""/metrics: Prometheus text, added up over processes, localhost or staff only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from brain.models import Thought
from core.models import WorkerHeartbeat

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db


def sample(text: str, name: str, **labels) -> float | None:
    """The value of one sample line of the exposition text, or None."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        metric, _, value = line.rpartition(" ")
        if metric.split("{")[0] != name:
            continue
        if all(part in metric for part in wanted.split(",") if part):
            return float(value)
    return None


def scrape(client=None) -> str:
    response = (client or Client()).get("/metrics")
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain")
    return response.content.decode()


def test_request_latency_per_endpoint_and_state_gauges(dev, thought_factory, space):
    # One series: other tests in this process (the schemathesis run) add other methods and statuses.
    series = {"method": "GET", "endpoint": "api/v1/thoughts/<str:thought_id>", "status": "200"}
    before = sample(scrape(), "colony_http_request_duration_seconds_count", **series)
    thought = thought_factory("stored with a vector")
    Thought.objects.create(space=space, content="waiting for its vector", contributor_id="t", contributor_name="t")
    WorkerHeartbeat.objects.create(
        hostname="celery@test",
        pid=1,
        started_at=timezone.now(),
        last_seen=timezone.now() - timezone.timedelta(seconds=30),
    )
    assert dev.get(f"/api/v1/thoughts/{thought.id}").status_code == 200
    text = scrape()
    after = sample(text, "colony_http_request_duration_seconds_count", **series)
    assert after == (before or 0) + 1  # the route, not the concrete path
    assert str(thought.id) not in text
    assert sample(text, "colony_thoughts_waiting_embedding") == Thought.objects.filter(embedding__isnull=True).count()
    assert 29 <= sample(text, "colony_worker_heartbeat_age_seconds", hostname="celery@test") < 600
    assert "colony_celery_queue_depth" in text


def test_embedding_and_job_times_are_recorded(space):
    import uuid

    from brain import embedding
    from config.celery import app

    before = sample(scrape(), "colony_embedding_seconds_count", kind="batch") or 0
    embedding.embed_many([f"metrics check {uuid.uuid4()}", "a second sentence"])  # the real model
    assert sample(scrape(), "colony_embedding_seconds_count", kind="batch") == before + 1

    job = "brain.jobs.flag_stale_snapshots"
    job_before = sample(scrape(), "colony_job_seconds_count", job=job) or 0
    app.tasks[job].apply()
    assert sample(scrape(), "colony_job_seconds_count", job=job) == job_before + 1


def test_samples_of_other_processes_are_added_up():
    code = (
        "import prometheus_client, django; django.setup(); from core.metrics import REQUEST_SECONDS; "
        "REQUEST_SECONDS.labels(method='GET', endpoint='from-another-process', status='200').observe(0.2)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert (sample(scrape(), "colony_http_request_duration_seconds_count", endpoint="from-another-process") or 0) >= 1


def test_only_localhost_or_staff(settings):
    remote = Client(REMOTE_ADDR="10.1.2.3")
    assert remote.get("/metrics").status_code == 403
    user_model = get_user_model()
    plain = user_model.objects.create_user("plain", password="pw-123456789")
    remote.force_login(plain)
    assert remote.get("/metrics").status_code == 403
    staff = user_model.objects.create_user("ops", password="pw-123456789", is_staff=True)
    remote.force_login(staff)
    scrape(remote)
    settings.METRICS_ALLOW_LOCALHOST = False
    assert Client().get("/metrics").status_code == 403
    local_staff = Client()
    local_staff.force_login(staff)
    scrape(local_staff)


def test_a_scraper_with_the_metrics_token_reads_them_from_anywhere(settings):
    """A Prometheus that can't log in (another host, or localhost reading off behind a proxy) sends
    ``Authorization: Bearer $METRICS_TOKEN``; a wrong token, or one sent while no token is set, is refused."""
    settings.METRICS_ALLOW_LOCALHOST = False
    remote = Client(REMOTE_ADDR="10.1.2.3")
    assert remote.get("/metrics", headers={"Authorization": "Bearer anything"}).status_code == 403
    settings.METRICS_TOKEN = "s3cret-metrics-token"
    scrape(Client(REMOTE_ADDR="10.1.2.3", headers={"Authorization": "Bearer s3cret-metrics-token"}))
    for wrong in ("Bearer s3cret-metrics-toke", "Bearer ", "Basic s3cret-metrics-token", "s3cret-metrics-token"):
        assert remote.get("/metrics", headers={"Authorization": wrong}).status_code == 403, wrong


def test_check_deploy_warns_while_metrics_answer_every_loopback_request(settings):
    """Attack: Colony behind a reverse proxy on the same host (the documented production shape): every
    request reaches it from 127.0.0.1, so with ``METRICS_ALLOW_LOCALHOST`` on, ``/metrics`` answers the
    internet. Instead: ``check --deploy`` warns until it is off (a scraper uses ``METRICS_TOKEN``)."""
    from django.core import checks

    settings.METRICS_ALLOW_LOCALHOST = True
    found = [m.id for m in checks.run_checks(include_deployment_checks=True)]
    assert "colony.W001" in found
    settings.METRICS_ALLOW_LOCALHOST = False
    assert "colony.W001" not in [m.id for m in checks.run_checks(include_deployment_checks=True)]
