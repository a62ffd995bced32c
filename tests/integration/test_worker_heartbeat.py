"""A real worker writes the heartbeat that health reads."""

from __future__ import annotations

import time

import pytest

from core.models import WorkerHeartbeat

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_running_worker_makes_health_ok(start_worker, anon):
    assert anon.get("/api/v1/health").json()["worker"] is False
    worker = start_worker(broker="filesystem")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not WorkerHeartbeat.objects.exists():
        time.sleep(0.3)
    beat = WorkerHeartbeat.objects.get()
    assert beat.hostname.startswith("test-filesystem-")
    body = anon.get("/api/v1/health").json()
    assert body["worker"] is True, worker.output()[-2000:]
    assert body["status"] == "ok"
