"""Concurrent writers can't corrupt state, and bad luck with them is never a 500 (SPEC 6).

- A keyed call (``Idempotency-Key``) chosen as a PostgreSQL deadlock's victim is run again, the
  receipt and all, and answers as if nothing happened; one that stays a victim every attempt answers
  503 ``DATABASE_CONFLICT`` with ``Retry-After``, stores nothing and leaves its key free.
- Any other call chosen as a deadlock's victim answers the same 503, never a 500, and changes nothing.
- Two agents racing to report the first turn of one new session: exactly one owns the session, the
  other gets 403 ``SESSION_NOT_YOURS``, as a turn in a session someone else used first does.

The deadlocks are real ones, forced at a known point of the request: the request's transaction takes
one advisory lock, another connection takes a second and then waits for the first while the request
waits for the second. The request waits first, so PostgreSQL finds the cycle from the request's side
and fails the request's transaction (the other connection's ``deadlock_timeout`` is raised as well).
The session race is forced the same way: both turns pass the point where the owner is read before
either writes.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time

import pytest
from django.db import DatabaseError, connection, transaction
from rest_framework.test import APIClient

from brain import embedding
from brain.apis import memory as memory_api
from brain.models import ImportReceipt, QueryLog, Thought
from brain.services import memory, pipeline
from quality.models import TurnLog
from quality.services import turns
from tasks.models import Task, TransitionLog
from tasks.services import transitions
from tests.concurrency_support import run_concurrently, wait_for_a_lock_wait
from tests.conftest import fake_vector
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db(transaction=True)

MEMORY_URL = "/api/v1/memory"
NOTE = {"prompt": "Deploys run the database migrations before the web workers restart, never after."}
#: The advisory locks the forced deadlock cycles through (any two numbers no code of Colony uses).
LOCK_A, LOCK_B = 731_001, 731_002


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setattr(pipeline, "thought_enqueue_embedding", lambda **kwargs: None)
    monkeypatch.setattr(pipeline, "thought_schedule_followups", lambda **kwargs: None)
    monkeypatch.setattr(memory, "thought_schedule_followups", lambda **kwargs: None, raising=False)
    monkeypatch.setattr(embedding, "embed_many", lambda texts, **kw: [fake_vector(t) for t in texts])
    monkeypatch.setattr(embedding, "embed", lambda text: fake_vector(text))
    # Celery's task proxy resolves per thread: patch the enqueueing itself, which every thread shares.
    monkeypatch.setattr(turns, "turn_enqueue_scoring", lambda turn_log_id: None)


class ForcedDeadlocks:
    """Make the next ``times`` calls of a function the victim of a real deadlock (see the module
    docstring); ``helpers`` are the other connections' threads, joined by :meth:`join`."""

    def __init__(self, times: int):
        self.left = times
        self.forced = 0
        self.helpers: list[threading.Thread] = []

    def wrap(self, function):
        def wrapped(*args, **kwargs):
            if self.left > 0:
                self.left -= 1
                self.forced += 1
                self._deadlock()
            return function(*args, **kwargs)

        return wrapped

    def _deadlock(self) -> None:
        holds_b = threading.Event()

        def other():
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    # The request waits first, so it is checked first; a longer timeout here makes sure
                    # (in a savepoint: a role that may not raise it goes on without).
                    with contextlib.suppress(DatabaseError), transaction.atomic():
                        cursor.execute("SET LOCAL deadlock_timeout = '30s'")
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_B])
                    holds_b.set()
                    wait_for_a_lock_wait(timeout=10)  # the request waits for B
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_A])  # and now B waits for A
            finally:
                connection.close()

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_A])
            helper = threading.Thread(target=other)
            self.helpers.append(helper)
            helper.start()
            assert holds_b.wait(10), "the other connection did not take its lock"
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_B])
        raise AssertionError("no deadlock: the request got both locks")

    def join(self) -> None:
        for helper in self.helpers:
            helper.join(30)
        assert not any(helper.is_alive() for helper in self.helpers)


def post_memory(client, fields, key=None):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(MEMORY_URL, data=json.dumps(fields), content_type="application/json", **headers)


def test_a_keyed_memory_call_that_loses_a_deadlock_is_run_again_and_stored_once(dev, space, monkeypatch):
    forced = ForcedDeadlocks(times=1)
    monkeypatch.setattr(memory_api, "memory_run", forced.wrap(memory_api.memory_run))
    response = post_memory(dev, NOTE, "deadlocked-once")
    forced.join()
    assert forced.forced == 1
    assert response.status_code == 200, response.content
    assert response.get("Idempotent-Replayed") is None
    thought_id = response.json()["trace"]["thought_id"]
    assert [str(pk) for pk in Thought.objects.filter(space=space).values_list("id", flat=True)] == [thought_id]
    assert QueryLog.objects.filter(space=space).count() == 1
    receipt = ImportReceipt.objects.get(agent=dev.agent, key="deadlocked-once")
    assert (receipt.status_code, receipt.response) == (200, response.json())  # the whole answer, not half
    again = post_memory(dev, NOTE, "deadlocked-once")
    assert (again.status_code, again["Idempotent-Replayed"]) == (200, "true")
    assert again.json() == response.json()
    assert Thought.objects.filter(space=space).count() == 1


def test_a_keyed_memory_call_with_supersedes_run_again_reads_its_own_fields(dev, space, monkeypatch):
    """The memory call rewrites ``supersedes`` of a contribution as ``refines``: run again, it must start
    from the fields as sent, or the retry refuses itself (400 MUTUAL_EXCLUSION)."""
    old = post_memory(dev, {"prompt": "Staging deploys run on Tuesdays, after the weekly freeze is lifted."})
    old_id = old.json()["trace"]["thought_id"]
    forced = ForcedDeadlocks(times=1)
    monkeypatch.setattr(memory_api, "memory_run", forced.wrap(memory_api.memory_run))
    fields = {
        "prompt": "Staging deploys run on Wednesdays now, after the weekly freeze is lifted.",
        "supersedes": [old_id],
    }
    response = post_memory(dev, fields, "snapshot-2")
    forced.join()
    assert response.status_code == 200, response.content
    assert Thought.objects.get(pk=old_id).superseded is True


def test_a_keyed_call_that_keeps_losing_deadlocks_is_a_503_and_stores_nothing(dev, space, monkeypatch):
    forced = ForcedDeadlocks(times=10)
    monkeypatch.setattr(memory_api, "memory_run", forced.wrap(memory_api.memory_run))
    started = time.monotonic()
    response = post_memory(dev, NOTE, "always-deadlocked")
    forced.join()
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "DATABASE_CONFLICT"
    assert response["Retry-After"] == "1"
    assert 1 < forced.forced < 10  # a few attempts, bounded
    assert time.monotonic() - started < 30
    assert not Thought.objects.exists() and not QueryLog.objects.exists()
    assert not ImportReceipt.objects.exists()  # no half-done answer kept for the key
    forced.left = 0
    retried = post_memory(dev, NOTE, "always-deadlocked")  # the key is free: the call runs
    assert retried.status_code == 200 and retried.get("Idempotent-Replayed") is None
    assert Thought.objects.filter(space=space).count() == 1


def test_a_transition_that_loses_a_deadlock_is_a_503_and_changes_nothing(agent_factory, space, monkeypatch):
    liaison = agent_factory("liaison")
    task = make_task(make_project(space), slug="deadlocked", status="backlog")
    forced = ForcedDeadlocks(times=1)
    monkeypatch.setattr(transitions, "task_transition_evaluate", forced.wrap(transitions.task_transition_evaluate))
    response = liaison.post(
        f"/api/v1/tasks/{task.slug}/transition", {"to": "pending", "summary": "claim"}, format="json"
    )
    forced.join()
    assert forced.forced == 1
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "DATABASE_CONFLICT" and response["Retry-After"] == "1"
    assert Task.objects.get(pk=task.pk).status == "backlog"
    assert not TransitionLog.objects.exists()


def turn_body(session_id: str, turn_id: str) -> dict:
    return {"session_id": session_id, "turn_id": turn_id, "user_prompt": "p", "assistant_response": "r"}


def client_of(agent_client) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_client.token}")
    return client


def test_two_agents_racing_for_a_new_session_one_owns_it(agent_factory, space, monkeypatch):
    """Both turns read the session's owner (nobody yet) before either writes: one is logged, the other
    is refused, and from then on the session is the winner's alone."""
    first, second = agent_factory("dev"), agent_factory("dev")
    arrived, finished = [0], [0]
    meet = threading.Condition()
    original = turns._newest_query_log

    def meeting(**kwargs):
        # Wait for the other turn to get here too (or to be over: refused before it got here).
        with meet:
            arrived[0] += 1
            meet.notify_all()
            assert meet.wait_for(lambda: arrived[0] + finished[0] >= 2, timeout=10), "the other turn never came"
        return original(**kwargs)

    monkeypatch.setattr(turns, "_newest_query_log", meeting)

    def report(agent_client):
        def send():
            try:
                body = turn_body("raced", f"t1-{agent_client.agent.name}")
                return client_of(agent_client).post("/api/v1/turns", body, format="json")
            finally:
                with meet:
                    finished[0] += 1
                    meet.notify_all()

        return send

    results = run_concurrently([report(first), report(second)], timeout=30)
    assert all(not isinstance(r, BaseException) for r in results), results
    statuses = sorted(r.status_code for r in results)
    assert statuses == [202, 403], [(r.status_code, r.content) for r in results]
    loser = next(r for r in results if r.status_code == 403)
    assert loser.json()["error"]["code"] == "SESSION_NOT_YOURS"
    logged = TurnLog.objects.filter(space=space, session_id="raced")
    assert logged.values("agent_id").distinct().count() == 1
    owner = logged.get().agent_id
    winner, other = (first, second) if owner == first.agent.pk else (second, first)
    assert client_of(winner).post("/api/v1/turns", turn_body("raced", "t2"), format="json").status_code == 202
    refused = client_of(other).post("/api/v1/turns", turn_body("raced", "t2"), format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "SESSION_NOT_YOURS")


def test_many_agents_racing_for_new_sessions_each_session_has_one_agent(agent_factory, space):
    """The same race without a forced meeting point: 10 rounds of 4 agents reporting the first turn of one
    new session at once (one turn id: a loser is not answered with the winner's turn either)."""
    clients = [client_of(agent_factory("dev")) for _ in range(4)]
    for round_no in range(10):
        session = f"open-race-{round_no}"

        def send(client, session=session):
            return client.post("/api/v1/turns", turn_body(session, "t1"), format="json")

        results = run_concurrently([lambda c=c: send(c) for c in clients], timeout=30)
        assert all(not isinstance(r, BaseException) for r in results), results
        codes = sorted(r.status_code for r in results)
        assert codes == [202, 403, 403, 403], (round_no, [(r.status_code, r.content) for r in results])
        assert TurnLog.objects.filter(space=space, session_id=session).count() == 1


def test_a_sessions_owner_is_kept_while_any_of_its_logs_are(agent_factory, space, settings):
    """The written owner goes with the session's last turn and query-log row, not before: until then a
    turn of another agent is refused."""
    import datetime as dt

    from django.utils import timezone

    from quality.models import SessionOwner
    from quality.services.rollups import turn_logs_expire
    from tests.quality_support import make_query_log

    owner, other = agent_factory("dev"), agent_factory("dev")
    for session in ("idle", "queried"):
        assert client_of(owner).post("/api/v1/turns", turn_body(session, "t1"), format="json").status_code == 202
    make_query_log(space, "queried", [], agent=owner.agent)
    long_ago = timezone.now() - dt.timedelta(days=settings.TURN_LOG_RETENTION_DAYS + 1)
    TurnLog.objects.update(created_at=long_ago)
    SessionOwner.objects.update(claimed_at=long_ago)
    assert turn_logs_expire() == 2
    assert list(SessionOwner.objects.values_list("session_id", "agent_id")) == [("queried", owner.agent.pk)]
    refused = client_of(other).post("/api/v1/turns", turn_body("queried", "t2"), format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "SESSION_NOT_YOURS")
