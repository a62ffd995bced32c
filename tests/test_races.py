"""Races at scale, on the real PostgreSQL with real threads, each on its own connection.

- 100 rounds of 8 concurrent transitions of one task: exactly one wins every round (the others get
  409 CONFLICT while the row lock is held, or 400 once the task has moved), one log row, one marker.
- 100 concurrent corrections over overlapping thoughts: no deadlock (rows are locked in id order, a
  correction's targets and the corrections superseding them in one order),
  every correction stored with the right count, every named thought superseded by exactly one
  correction that named it, ``superseded_at`` set once.
- concurrent refines of one thought: serialized on the source's row lock; every refinement is kept
  (sibling branches, nothing lost), the source is superseded and its ``refined_by`` is the newest
  refinement, the one lineage and ranking treat as the head (documented in docs/api.md, "Races").

Measured with ``pytest tests/test_races.py --durations=0`` on the loaded 2-core machine: 28 s in all
(transitions 22 s, corrections 4 s, refines 1.3 s).
"""

from __future__ import annotations

import random
import threading
import uuid

import pytest

from api.errors import ApplicationError
from brain import embedding
from brain.apis.memory import MemoryInputSerializer
from brain.models import Thought
from brain.services import memory, pipeline
from brain.services.corrections import thought_correct
from brain.services.memory import memory_run
from tasks.models import Task, TransitionLog
from tasks.services.transitions import task_transition
from tests.concurrency_support import row_locked, run_concurrently, wait_for_a_lock_wait
from tests.conftest import fake_vector
from tests.tasks_helpers import make_agent, make_project, make_task, marker_count

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = 8


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    # Not what these tests are about: marker embeddings (Celery) and the model (a fake, deterministic one).
    monkeypatch.setattr(pipeline, "thought_enqueue_embedding", lambda **kwargs: None)
    monkeypatch.setattr(pipeline, "thought_schedule_followups", lambda **kwargs: None)
    monkeypatch.setattr(memory, "thought_schedule_followups", lambda **kwargs: None, raising=False)
    monkeypatch.setattr(embedding, "embed_many", lambda texts, **kw: [fake_vector(t) for t in texts])
    monkeypatch.setattr(embedding, "embed", lambda text: fake_vector(text))


def race_correction(space, agent, index, ids):
    """A correction numbered ``index`` superseding ``ids`` (the model is the fixture's fake)."""
    return thought_correct(
        space=space,
        agent=agent,
        content=f"CORRECTION {index}",
        topic="race",
        corrected_fact=f"wrong {index}",
        correct_fact=f"right {index}",
        supersedes=ids,
    )


def test_100_rounds_of_8_concurrent_transitions_exactly_one_wins(space):
    project = make_project(space)
    agents = [make_agent(space, "liaison" if i % 2 else "pdsa") for i in range(THREADS)]
    for round_no in range(100):
        task = make_task(project, slug=f"race-{round_no}", status="backlog")

        def move(agent, task_id=task.pk):
            return task_transition(task=Task.objects.get(pk=task_id), to="pending", agent=agent, summary="claim")

        results = run_concurrently([lambda a=a: move(a) for a in agents])
        winners = [r for r in results if isinstance(r, TransitionLog)]
        losers = [r for r in results if not isinstance(r, TransitionLog)]
        assert len(winners) == 1, (round_no, results)
        for loser in losers:
            assert isinstance(loser, ApplicationError), (round_no, loser)
            # CONFLICT: the row lock was held; ALREADY_IN_STATUS: the task had moved there already.
            assert (loser.status_code, loser.code) in {(409, "CONFLICT"), (409, "ALREADY_IN_STATUS")}, loser.code
        task.refresh_from_db()
        assert task.status == "pending"
        assert TransitionLog.objects.filter(task=task).count() == 1
        assert marker_count(task) == 1


def test_100_concurrent_corrections_over_overlapping_thoughts(space):
    agent = make_agent(space, "dev")
    targets = [
        Thought.objects.create(
            space=space, content=f"fact {i}", contributor_id="t", contributor_name="t", embedding=fake_vector(f"f{i}")
        )
        for i in range(40)
    ]
    rng = random.Random(16)
    plans = [rng.sample(targets, rng.randint(2, 6)) for _ in range(100)]

    def correct(index, names):
        return race_correction(space, agent, index, [t.id for t in names])

    results: list = []
    for start in range(0, 100, 20):  # 20 at a time: as many threads as the database takes connections for
        results += run_concurrently([lambda i=i: correct(i, plans[i]) for i in range(start, start + 20)])
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    corrections = {c.id for c, _ in results}
    for (correction, count), names in zip(results, plans, strict=True):
        # It supersedes what it named, and the live corrections of those it found (committed before it).
        assert count == len(correction.supersedes)
        assert correction.supersedes[: len(names)] == [t.id for t in names]
        assert set(correction.supersedes[len(names) :]) <= corrections
    named_by: dict = {}
    for (correction, _), names in zip(results, plans, strict=True):
        for thought in names:
            named_by.setdefault(thought.id, set()).add(correction.id)
    live = set(Thought.objects.filter(pk__in=corrections, superseded=False).values_list("id", flat=True))
    pointer = dict(Thought.objects.filter(pk__in=corrections).values_list("id", "superseded_by_id"))
    for thought in Thought.objects.filter(pk__in=named_by):
        assert thought.superseded and thought.superseded_at is not None
        assert thought.superseded_by_id in named_by[thought.id]
        # At most one correction naming a thought stays live, and its chain of corrections (the last
        # to commit, then whichever correction superseded that one, ...) ends at a live one.
        assert len(named_by[thought.id] & live) <= 1
        head, hops = thought.superseded_by_id, 0
        while head not in live and hops < 100:
            head, hops = pointer[head], hops + 1
        assert head in live
    assert Thought.objects.filter(space=space, thought_category="correction").count() == 100


def test_a_thought_and_its_correction_corrected_at_once_never_deadlock(space):
    # A correction of thought t also locks the correction x now superseding t; one naming x and t
    # locks both. With t's row held elsewhere, both wait; released, the one that locked t first
    # must not then wait for x while the other holds x and waits for t. Before (t locked, then x
    # found and locked), PostgreSQL broke that cycle by failing one with a deadlock.
    agent = make_agent(space, "dev")

    def correct(index, ids):
        return race_correction(space, agent, index, ids)

    for round_no in range(6):
        t = Thought.objects.create(  # the highest ids: x sorts before t, the order that could deadlock
            id=uuid.UUID(int=2**128 - 1 - round_no),
            space=space,
            content=f"fact {round_no}",
            contributor_id="t",
            contributor_name="t",
            embedding=fake_vector("t"),
        )
        x, _ = correct(f"{round_no}x", [t.id])
        jobs = [(f"{round_no}a", [t.id]), (f"{round_no}b", [x.id, t.id])]
        results: list = []
        with row_locked(Thought.objects.filter(pk=t.id)):
            calls = [lambda job=job: correct(*job) for job in jobs]
            runner = threading.Thread(target=lambda out=results, calls=calls: out.extend(run_concurrently(calls)))
            runner.start()
            wait_for_a_lock_wait(count=2)
        runner.join(60)
        assert len(results) == 2 and not [r for r in results if isinstance(r, BaseException)], (round_no, results)
        live = Thought.objects.filter(thought_category="correction", superseded=False, supersedes__contains=[t.id])
        assert live.count() == 1, round_no


def test_concurrent_refines_of_one_thought_leave_one_head(space):
    source = Thought.objects.create(
        space=space,
        content="The deploy runs migrations.",
        contributor_id="t",
        contributor_name="t",
        embedding=fake_vector("deploy"),
        pheromone_weight=4.0,
    )
    agents = [make_agent(space, "dev") for _ in range(THREADS)]

    def refine(agent, n):
        serializer = MemoryInputSerializer(
            data={"prompt": f"The deploy runs migrations, version {n} {uuid.uuid4()}.", "refines": str(source.id)}
        )
        serializer.is_valid(raise_exception=True)
        return memory_run(agent=agent, request=serializer.validated_data)

    results = run_concurrently([lambda a=a, n=n: refine(a, n) for n, a in enumerate(agents)])
    assert not [r for r in results if isinstance(r, BaseException)], results
    refinements = list(Thought.objects.filter(thought_type="refinement", source_ids__contains=[source.id]))
    assert len(refinements) == THREADS  # nothing lost
    source.refresh_from_db()
    newest = max(refinements, key=lambda t: (t.created_at, str(t.id)))
    assert source.superseded and source.refined_by_id == newest.id
    # each inherited max(1, w * 0.5) of the source's weight when it got the lock (retrievals raise w by 0.05)
    assert all(2.0 <= r.pheromone_weight <= 2.0 + 0.05 * THREADS for r in refinements)
