"""A real worker process runs a job end to end, on Redis and on the no-server broker."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("broker", ["redis", "filesystem"])
def test_worker_runs_a_job_against_the_database(start_worker, broker):
    worker = start_worker(broker=broker)
    result = worker.send("core.jobs.health_probe").get(timeout=60)
    assert result["pgvector"].startswith("0.8")
    assert "core.jobs.health_probe" in worker.output()


def test_jobs_store_no_result_unless_the_sender_asks(start_worker, private_redis):
    """Colony's jobs write what they did to the database; their return values are not stored
    (task_ignore_result: a Redis write and publish per job saved). A sender that asks gets one."""
    import time

    import redis

    worker = start_worker(broker="redis")
    asked = worker.send("core.jobs.health_probe")
    silent = worker.app.send_task("core.jobs.health_probe")
    assert asked.get(timeout=60)["pgvector"].startswith("0.8")
    client = redis.Redis.from_url(private_redis)
    deadline = time.monotonic() + 30
    while f"{silent.id}] succeeded" not in worker.output() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert f"{silent.id}] succeeded" in worker.output()
    assert client.exists(f"celery-task-meta-{asked.id}")
    assert not client.exists(f"celery-task-meta-{silent.id}")
