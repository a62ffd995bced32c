"""Reinforcement on access (SPEC 2.3): exact counts, caps, and no lost update under concurrency."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from brain.models import QueryLog, Thought
from brain.services.pheromones import CO_RETRIEVAL_PARTNERS_MAX, thoughts_reinforce
from tests.concurrency_support import run_concurrently
from tests.conftest import synchronous_commit

QUERY = "deploy pipeline migrations workers"
TEXTS = [
    "The deploy pipeline runs migrations before restarting workers.",
    "Deploy pipeline workers restart one by one after migrations.",
    "Migrations in the deploy pipeline are reversible; workers wait.",
]


def memory(client, **body):
    response = client.post("/api/v1/memory", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
def test_one_access(dev, fake_embedder, thought_factory):
    thoughts = [thought_factory(text) for text in TEXTS]
    memory(dev, prompt=QUERY)
    memory(dev, prompt=QUERY)
    ids = {str(t.id) for t in thoughts}
    for thought in thoughts:
        thought.refresh_from_db()
        assert thought.access_count == 2
        assert thought.pheromone_weight == pytest.approx(1.1)
        assert thought.accessed_by == [dev.agent.name]  # distinct
        assert thought.last_accessed is not None
        assert thought.co_retrieved_with == {partner: 2 for partner in ids - {str(thought.id)}}


@pytest.mark.django_db
def test_weight_is_capped_at_ten(dev, fake_embedder, thought_factory):
    thought = thought_factory(TEXTS[0], pheromone_weight=9.98)
    memory(dev, prompt=QUERY)
    memory(dev, prompt=QUERY)
    thought.refresh_from_db()
    assert thought.pheromone_weight == pytest.approx(10.0) and thought.access_count == 2


@pytest.mark.django_db
def test_co_retrieval_is_capped_at_fifty_partners(space, thought_factory):
    thought = thought_factory(TEXTS[0])
    regulars = {f"00000000-0000-0000-0000-{i:012d}": 3 + i for i in range(CO_RETRIEVAL_PARTNERS_MAX)}
    Thought.objects.filter(pk=thought.pk).update(co_retrieved_with=regulars)
    newcomer = thought_factory(TEXTS[1])
    thoughts_reinforce(space=space, thought_ids=[thought.id, newcomer.id], agent_name="a")
    thought.refresh_from_db()
    partners = thought.co_retrieved_with
    assert len(partners) == CO_RETRIEVAL_PARTNERS_MAX
    # The new partner gets in; the least frequent regular (count 3) made room; the rest are intact.
    assert partners[str(newcomer.id)] == 1
    assert "00000000-0000-0000-0000-000000000000" not in partners
    assert all(partners[key] == count for key, count in regulars.items() if key.endswith("1"))
    for _ in range(4):
        thoughts_reinforce(space=space, thought_ids=[thought.id, newcomer.id], agent_name="a")
    thought.refresh_from_db()
    assert len(thought.co_retrieved_with) == CO_RETRIEVAL_PARTNERS_MAX
    assert thought.co_retrieved_with[str(newcomer.id)] == 5
    assert thought.access_count == 5


@pytest.mark.django_db
def test_reinforcement_stays_in_its_space(space, other_space, thought_factory):
    foreign = thought_factory(TEXTS[0], in_space=other_space)
    assert thoughts_reinforce(space=space, thought_ids=[foreign.id], agent_name="a") == 0
    foreign.refresh_from_db()
    assert foreign.access_count == 0


def _client(agent_client) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_client.token}")
    return client


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_requests_lose_no_update(agent_factory, fake_embedder, thought_factory):
    thoughts = [thought_factory(text) for text in TEXTS]
    agents = [agent_factory("dev") for _ in range(4)]

    def request(agent):
        client = _client(agent)
        return lambda: client.post("/api/v1/memory", {"prompt": QUERY}, format="json").status_code

    results = run_concurrently([request(agents[i % 4]) for i in range(20)])
    assert results == [200] * 20
    ids = {str(t.id) for t in thoughts}
    for thought in thoughts:
        thought.refresh_from_db()
        assert thought.access_count == 20
        assert thought.pheromone_weight == pytest.approx(1.0 + 20 * 0.05)
        assert sorted(thought.accessed_by) == sorted(a.agent.name for a in agents)
        assert thought.co_retrieved_with == {partner: 20 for partner in ids - {str(thought.id)}}
    assert QueryLog.objects.count() == 20


@pytest.mark.django_db(transaction=True)
def test_concurrent_refinements_and_queries_neither_deadlock_nor_lose_updates(
    agent_factory, fake_embedder, thought_factory
):
    thoughts = [thought_factory(text) for text in TEXTS]
    target = thoughts[0]
    agent = agent_factory("dev")

    def query():
        return _client(agent).post("/api/v1/memory", {"prompt": QUERY}, format="json").status_code

    def refinement(i):
        body = {"prompt": f"deploy pipeline migrations workers, revision {i}", "refines": str(target.id)}
        return lambda: _client(agent).post("/api/v1/memory", body, format="json").status_code

    jobs = [query] * 16 + [refinement(i) for i in range(4)]
    assert run_concurrently(jobs) == [200] * 20
    for thought in thoughts:
        thought.refresh_from_db()
        assert thought.access_count == 20  # every call retrieved every base thought
        assert thought.pheromone_weight == pytest.approx(2.0)
    refinements = Thought.objects.filter(thought_type="refinement")
    assert refinements.count() == 4
    assert target.superseded and target.refined_by_id in {r.id for r in refinements}


@pytest.mark.django_db(transaction=True)
def test_a_memory_write_chosen_as_deadlock_victim_is_run_again(monkeypatch):
    """The write is one statement in its own transaction: a deadlock victim changed nothing, so
    pheromones.thoughts_reinforce and session_feedback run it again (seen once in a 5-minute soak: a 500
    before)."""
    import psycopg
    from django.db import OperationalError, transaction

    from brain.services import pheromones

    calls = []

    class Cursor:
        def execute(self, sql, params):
            calls.append(sql)
            if len(calls) == 1:
                error = OperationalError("deadlock detected")
                error.__cause__ = psycopg.errors.DeadlockDetected("deadlock detected")
                raise error

    pheromones._execute_retrying_deadlock(Cursor(), "SELECT 1", {})
    assert len(calls) == 2
    # Inside a caller's transaction the statement's failure aborted that transaction: no retry.
    calls.clear()
    with pytest.raises(OperationalError), transaction.atomic():
        pheromones._execute_retrying_deadlock(Cursor(), "SELECT 1", {})
    assert len(calls) == 1


@pytest.mark.django_db(transaction=True)
def test_a_contradiction_suggestion_locks_its_two_thoughts_in_id_order(thought_factory):
    """The detector's suggestion references the old thought and the contradicting one; it locks both
    in id order, as the memory write does, before its insert's foreign-key check would take a lock on
    the contradicting thought out of order (a 500 DeadlockDetected seen in op_costs: a worker raising
    suggestions while the next memory call reinforced the same two thoughts)."""
    from django.db import connections, transaction

    from brain.models import CorrectionSuggestion
    from brain.services.suggestions import suggestion_create

    low, high = sorted((thought_factory(text) for text in TEXTS[:2]), key=lambda t: t.pk)
    holding, release, done = threading.Event(), threading.Event(), []

    def memory_write():  # holds the lower id, as thoughts_reinforce does while it locks in order
        try:
            with transaction.atomic():
                list(Thought.objects.select_for_update().filter(pk=low.pk).values_list("pk"))
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    def detector():
        try:
            suggestion_create(thought=high, statement="It doesn't.", origin="contradiction", contradicting_thought=low)
            done.append(True)
        finally:
            connections.close_all()

    writer = threading.Thread(target=memory_write)
    writer.start()
    assert holding.wait(30)
    worker = threading.Thread(target=detector)
    worker.start()
    try:
        with connection.cursor() as cursor:  # wait until the detector waits for a lock
            for _ in range(300):
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
                if cursor.fetchone()[0]:
                    break
                threading.Event().wait(0.02)
            else:
                pytest.fail("the detector never waited for the lower id's lock")
        # It waits before locking the higher id, so whoever holds the lower one can still take it.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT id FROM brain_thought WHERE id = %s FOR UPDATE NOWAIT", [high.pk])
    finally:
        release.set()
        writer.join(30)
        worker.join(30)
    assert done == [True]
    assert CorrectionSuggestion.objects.filter(thought=high, contradicting_thought=low).count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_memory_calls_bookkeeping_commits_asynchronously_in_its_own_transaction_only(
    agent_factory, thought_factory
):
    """A memory call's bookkeeping writes (query log, reinforcement, implicit feedback) don't wait for
    their WAL flush when each is a transaction of its own; inside a caller's transaction they must not
    change how that transaction commits (a contribution in it must stay durable)."""
    from django.db import transaction
    from django.test.utils import CaptureQueriesContext

    from brain.services.pheromones import retrieval_log, session_feedback

    thought, stored = thought_factory(TEXTS[0]), thought_factory(TEXTS[1])
    agent = agent_factory("dev").agent
    record = dict(space=agent.space, agent=agent, agent_ref=agent.name, session_id="s", query_text=QUERY)

    def bookkeeping() -> int:
        log_id = retrieval_log(**record, results=[{"id": str(thought.id), "score": 0.9}]).query_log_id
        assert thoughts_reinforce(space=agent.space, thought_ids=[thought.id], agent_name=agent.name) == 1
        return session_feedback(space=agent.space, session_id="s", before_id=log_id + 1, stored_id=stored.id)

    with CaptureQueriesContext(connection) as own:
        assert bookkeeping() == 1
    assert len(own.captured_queries) == 3
    assert all("synchronous_commit" in query["sql"] for query in own.captured_queries)
    assert synchronous_commit() == "on"  # local to each write's transaction, which has ended

    with transaction.atomic():
        with CaptureQueriesContext(connection) as inside:
            assert bookkeeping() == 1
        assert not any("synchronous_commit" in query["sql"] for query in inside.captured_queries)
        assert synchronous_commit() == "on"  # the caller's transaction still commits synchronously

    thought.refresh_from_db()
    assert thought.access_count == 2 and QueryLog.objects.filter(agent=agent).count() == 2
    assert thought.pheromone_weight == pytest.approx(1.0 + 2 * 0.05 + 2 * 0.02)


@pytest.mark.django_db
def test_the_reinforcement_binds_its_ids_as_one_binary_array(space, thought_factory, parameter_formats):
    thoughts = [thought_factory(text) for text in TEXTS]
    assert thoughts_reinforce(space=space, thought_ids=[t.id for t in thoughts], agent_name="a") == 3
    statement = [params for start, params in parameter_formats if start == "WITH locked AS"]
    assert len(statement) == 1
    assert [param for param in statement[0] if param[0].endswith("[]")] == [("text[]", "BINARY")]
