"""Two concurrent transitions of one task: exactly one wins, the other gets 409 CONFLICT (SPEC 3.3)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from brain.services import pipeline
from tasks.models import Task, TransitionLog
from tasks.services import transitions as transition_services
from tests.tasks_helpers import make_project, make_task, marker_count

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_embedding(monkeypatch):
    # Markers are embedded by Celery after commit; that is not what these tests are about.
    monkeypatch.setattr(pipeline, "thought_enqueue_embedding", lambda **kwargs: None)


def _in_thread(fn, results: list, index: int):
    def run():
        try:
            results[index] = fn()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_second_of_two_overlapping_transitions_gets_409_conflict(agent_factory, space, monkeypatch):
    task = make_task(make_project(space), slug="race", status="backlog")
    first, second = agent_factory("liaison"), agent_factory("pdsa")
    inside, release = threading.Event(), threading.Event()
    original = transition_services.marker_write

    def slow_marker(**kwargs):
        # The first transition holds the row lock here until the second one has been answered.
        inside.set()
        release.wait(20)
        return original(**kwargs)

    monkeypatch.setattr(transition_services, "marker_write", slow_marker)
    results = [None]
    thread = _in_thread(
        lambda: first.post("/api/v1/tasks/race/transition", {"to": "pending", "summary": "a"}, format="json"),
        results,
        0,
    )
    assert inside.wait(20)
    monkeypatch.setattr(transition_services, "marker_write", original)
    loser = second.post("/api/v1/tasks/race/transition", {"to": "pending", "summary": "b"}, format="json")
    release.set()
    thread.join(30)

    assert loser.status_code == 409
    assert loser.json()["error"]["code"] == "CONFLICT"
    assert results[0].status_code == 200, results[0].content
    task.refresh_from_db()
    assert task.status == "pending"
    assert TransitionLog.objects.filter(task=task).count() == 1
    assert marker_count(task) == 1


def test_racing_transitions_never_both_win(agent_factory, space):
    """Unorchestrated races: whoever comes second is refused (409 while the lock is held, else by the rules)."""
    clients = [agent_factory("liaison"), agent_factory("pdsa")]
    for round_no in range(5):
        make_task(make_project(space), slug=f"race-{round_no}", status="backlog")
        barrier = threading.Barrier(2)
        results = [None, None]

        def go(client, slug=f"race-{round_no}", barrier=barrier):
            barrier.wait(10)
            return client.post(f"/api/v1/tasks/{slug}/transition", {"to": "pending"}, format="json")

        threads = [_in_thread(lambda c=c: go(c), results, i) for i, c in enumerate(clients)]
        for thread in threads:
            thread.join(30)
        statuses = sorted(r.status_code for r in results)
        assert statuses[0] == 200 and statuses[1] in (400, 409), [r.content for r in results]
        task = Task.objects.get(slug=f"race-{round_no}")
        assert task.status == "pending"
        assert TransitionLog.objects.filter(task=task).count() == 1
        assert marker_count(task) == 1


def test_concurrent_dna_merges_lose_nothing(agent_factory, space):
    make_task(make_project(space), slug="shared", dna={"base": 0})
    clients = [agent_factory("dev") for _ in range(6)]
    barrier = threading.Barrier(len(clients))
    results = [None] * len(clients)

    def patch(index, client):
        barrier.wait(10)
        return client.patch("/api/v1/tasks/shared/dna", {f"k{index}": index}, format="json")

    threads = [_in_thread(lambda i=i, c=c: patch(i, c), results, i) for i, c in enumerate(clients)]
    for thread in threads:
        thread.join(30)
    assert [r.status_code for r in results] == [200] * len(clients)
    assert Task.objects.get(slug="shared").dna == {"base": 0, **{f"k{i}": i for i in range(len(clients))}}
