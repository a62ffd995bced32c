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
