"""GET /api/v1/health: no auth, every part reported, 200 only when all are up."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from brain import embedding
from core import services
from core.health import HEARTBEAT_STALE_AFTER
from core.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db


def test_health_without_a_worker_heartbeat_is_503(anon):
    response = anon.get("/api/v1/health")
    assert response.status_code == 503
    body = response.json()
    assert set(body) == {"status", "database", "pgvector", "broker", "worker", "embedding_model", "embedding"}
    assert body["status"] == "error"
    assert body["database"] is True and body["pgvector"].startswith("0.8")
    assert body["broker"] is True
    assert body["worker"] is False
    assert body["embedding_model"] == embedding.current_model_label() == "all-MiniLM-L6-v2 int8"  # the default


def test_health_with_a_fresh_heartbeat_is_200(anon):
    services.worker_heartbeat(hostname="w1@host", pid=123, started_at=timezone.now())
    response = anon.get("/api/v1/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["worker"] is True


def test_a_stale_heartbeat_means_no_worker(anon):
    services.worker_heartbeat(hostname="w1@host", pid=123, started_at=timezone.now())
    WorkerHeartbeat.objects.update(last_seen=timezone.now() - HEARTBEAT_STALE_AFTER - timedelta(seconds=1))
    assert anon.get("/api/v1/health").json()["worker"] is False


def test_heartbeat_is_one_row_per_worker(db):
    started = timezone.now()
    services.worker_heartbeat(hostname="w1@host", pid=1, started_at=started)
    services.worker_heartbeat(hostname="w1@host", pid=1, started_at=started)
    services.worker_heartbeat(hostname="w2@host", pid=2, started_at=started)
    assert WorkerHeartbeat.objects.count() == 2


def test_with_the_database_down_the_parts_that_need_it_are_not_asked(anon, monkeypatch):
    # Each part that reads the database waited out its own connection timeout while PostgreSQL was
    # down (pgvector check + the embedding notice: ~6 s for one 503). Now only the first one waits.
    from core import health

    asked = []
    monkeypatch.setattr(health, "health_pgvector", lambda: None)  # what a failed connection returns
    monkeypatch.setattr(embedding, "stored_vectors_notice", lambda: asked.append(1) or {})
    response = anon.get("/api/v1/health")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] is False and body["pgvector"] is None and body["worker"] is False
    assert body["embedding"] is None and asked == []
    assert body["embedding_model"] == embedding.current_model_label()  # needs no database: still said

    monkeypatch.setattr(health, "health_pgvector", lambda: "0.8.0")
    anon.get("/api/v1/health")
    assert asked == [1]  # with the database up the embedding part is asked again


def test_a_503_health_answer_is_logged_as_a_warning_not_an_error(anon, caplog):
    # Every probe while a part was down (or the workers were starting) logged
    # "ERROR django.request: Service Unavailable: /api/v1/health".
    import logging

    with caplog.at_level(logging.INFO, logger="django.request"):
        assert anon.get("/api/v1/health").status_code == 503  # no worker heartbeat
    records = [r for r in caplog.records if r.name == "django.request"]
    assert records and all(r.levelno == logging.WARNING for r in records)
    assert "Service Unavailable: /api/v1/health" in records[0].getMessage()


def test_other_5xx_answers_stay_errors():
    import logging

    from django.test import RequestFactory

    from core.logging import HealthProbeAnswerIsAWarning

    def record(path: str, status: int) -> logging.LogRecord:
        r = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "Service Unavailable: %s", (path,), None)
        r.status_code, r.request = status, RequestFactory().get(path)
        HealthProbeAnswerIsAWarning().filter(r)
        return r

    assert record("/api/v1/memory", 503).levelno == logging.ERROR
    assert record("/api/v1/health", 500).levelno == logging.ERROR
    assert record("/api/v1/health", 503).levelno == logging.WARNING
