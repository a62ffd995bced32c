"""What the API answers while a dependency is down (the fault tests with real servers are in
tests/integration/test_run_survives.py and benchmarks/soak.py)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import utils as db_utils

from api.errors import is_database_busy, is_database_unavailable


@pytest.mark.django_db
def test_a_throttle_store_outage_lets_requests_through(settings, dev, monkeypatch):
    settings.API_THROTTLE_RATE = "3/min"
    from core.throttling import throttle_store

    def down(*args, **kwargs):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    monkeypatch.setattr(throttle_store(), "hit", down)
    assert [dev.get("/api/v1/agents/me").status_code for _ in range(5)] == [200] * 5


def _wrapped(cause: Exception, kind=db_utils.OperationalError) -> Exception:
    exc = kind(str(cause))
    exc.__cause__ = cause
    return exc


def test_only_connection_failures_count_as_database_unavailable():
    refused = psycopg.OperationalError("connection failed: Connection refused")
    assert is_database_unavailable(_wrapped(refused))
    assert is_database_unavailable(_wrapped(psycopg.errors.AdminShutdown("terminating connection")))
    assert is_database_unavailable(db_utils.InterfaceError("connection already closed"))
    assert not is_database_unavailable(_wrapped(psycopg.errors.DeadlockDetected("deadlock detected")))
    assert not is_database_unavailable(_wrapped(psycopg.errors.UniqueViolation("duplicate"), db_utils.IntegrityError))
    assert not is_database_unavailable(ValueError("no"))


def test_an_exhausted_connection_pool_is_busy_not_unavailable(dev, monkeypatch):
    """Every pooled connection busy for the connect timeout: 503 DATABASE_BUSY with a short
    Retry-After, not "the database is down"."""
    from django.db import connections
    from django.db import utils as db_utils
    from psycopg_pool import PoolTimeout

    class Pool:
        max_size = 8

        def __init__(self, size):
            self.size = size

        def get_stats(self):
            return {"pool_size": self.size, "pool_max": self.max_size}

    timeout = _wrapped(PoolTimeout("couldn't get a connection after 3.00 sec"))
    # The pool could not open a connection at all (the database is down): unavailable, not busy.
    monkeypatch.setattr(type(connections["default"]), "pool", property(lambda self: Pool(0)))
    assert not is_database_busy(timeout) and is_database_unavailable(timeout)
    # It holds its maximum and none came free: busy.
    monkeypatch.setattr(type(connections["default"]), "pool", property(lambda self: Pool(8)))
    assert is_database_busy(timeout) and not is_database_unavailable(timeout)
    assert not is_database_busy(_wrapped(psycopg.OperationalError("connection refused")))

    def exhausted(*args, **kwargs):
        raise timeout

    monkeypatch.setattr("brain.apis.memory.memory_run", exhausted)
    response = dev.post("/api/v1/memory", {"prompt": "anything about deploys?"}, format="json")
    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "DATABASE_BUSY"
    assert isinstance(timeout, db_utils.OperationalError)
