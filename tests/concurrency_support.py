"""Run callables in threads released at once (races against the real database); hold rows locked."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from django.db import connection, transaction


def run_concurrently(jobs: list, *, timeout: float = 60) -> list:
    """Run ``jobs`` (callables) in as many threads, released together; returns each result or exception.
    Each thread closes its own database connection when done."""
    barrier = threading.Barrier(len(jobs))
    results: list = [None] * len(jobs)

    def run(index, job):
        try:
            barrier.wait(timeout)
            results[index] = job()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), "a thread hung: deadlock or lost wake-up"
    return results


def never_500(results) -> None:
    """Every concurrent call (``(status, body)`` from :func:`run_concurrently`) got an answer: no exception,
    no 500, an error only in the envelope (a deadlock's victim as 409, or 503 DATABASE_CONFLICT)."""
    for result in results:
        assert not isinstance(result, BaseException), repr(result)
        status, body = result
        assert status < 500 or (status == 503 and body["error"]["code"] == "DATABASE_CONFLICT"), (status, body)
        if status >= 400:
            assert set(body) == {"error"} and body["error"]["code"], body


@contextlib.contextmanager
def row_locked(queryset, *, hold_at_most: float = 60):
    """Hold ``SELECT ... FOR UPDATE`` on ``queryset``'s rows in another connection (a long transaction
    elsewhere) until the block ends."""
    locked, release = threading.Event(), threading.Event()

    def hold():
        try:
            with transaction.atomic():
                list(queryset.select_for_update())
                locked.set()
                release.wait(hold_at_most)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10), "could not lock the rows"
        yield
    finally:
        release.set()
        holder.join(10)


def wait_for_a_lock_wait(*, count: int = 1, unless=lambda: False, timeout: float = 30) -> None:
    """Return once ``count`` backends of this database wait on a lock; fail after ``timeout`` s or when
    ``unless()``."""
    deadline = time.monotonic() + timeout
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if cursor.fetchone()[0] >= count:
                return
        assert time.monotonic() < deadline and not unless(), "nothing waited on the lock"
        time.sleep(0.05)


@pytest.fixture
def offline(monkeypatch):
    """What the race tests are not about, off: embedding jobs and follow-ups (Celery), and the model (the
    bag-of-words fake). Bound by name in a module (``pytest.mark.usefixtures("offline")``)."""
    from brain import embedding
    from brain.services import memory, pipeline
    from brain.services.memory import steps
    from quality.services import turns
    from tests.conftest import fake_vector

    monkeypatch.setattr(pipeline, "thought_enqueue_embedding", lambda **kwargs: None)
    monkeypatch.setattr(pipeline, "thought_schedule_followups", lambda **kwargs: None)
    monkeypatch.setattr(memory, "thought_schedule_followups", lambda **kwargs: None, raising=False)
    monkeypatch.setattr(steps, "thought_schedule_followups", lambda **kwargs: None)
    monkeypatch.setattr(embedding, "embed_many", lambda texts, **kw: [fake_vector(t) for t in texts])
    monkeypatch.setattr(embedding, "embed", lambda text: fake_vector(text))
    monkeypatch.setattr(turns, "turn_enqueue_scoring", lambda turn_log_id: None)
