"""Reinforcement on access (SPEC 2.3): exact counts, caps, and no lost update under concurrency.

Accesses are counted from the query log (``pheromones.reinforcement_fold``); the tests' settings fold
after every call (tests/conftest.py), and the tests below that check the batching set the production
interval."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from brain.models import QueryLog, Thought
from brain.services import pheromones
from brain.services.pheromones import CO_RETRIEVAL_PARTNERS_MAX, reinforcement_fold, retrieval_log
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


def logged(agent, thought_ids, *, session_id: str = "s") -> int:
    """A memory call's query-log row naming ``thought_ids`` as its results (not counted yet)."""
    results = [{"id": str(i), "score": 0.5} for i in thought_ids]
    return retrieval_log(
        space=agent.space, agent=agent, agent_ref=agent.name, session_id=session_id, query_text=QUERY, results=results
    ).query_log_id


@pytest.fixture
def production_interval(settings, monkeypatch):
    """The shipped REINFORCEMENT_FOLD_SECONDS, and a process that has not folded yet."""
    from config.env import env

    settings.REINFORCEMENT_FOLD_SECONDS = env("REINFORCEMENT_FOLD_SECONDS", 1.0)
    assert settings.REINFORCEMENT_FOLD_SECONDS >= 1.0
    monkeypatch.setattr(pheromones, "_folded_at", -float("inf"))


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
        assert thought.accessed_by == [str(dev.agent.pk)]  # distinct
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
def test_co_retrieval_is_capped_at_fifty_partners(dev, thought_factory):
    agent = dev.agent
    thought = thought_factory(TEXTS[0])
    regulars = {f"00000000-0000-0000-0000-{i:012d}": 3 + i for i in range(CO_RETRIEVAL_PARTNERS_MAX)}
    Thought.objects.filter(pk=thought.pk).update(co_retrieved_with=regulars)
    newcomer = thought_factory(TEXTS[1])
    logged(agent, [thought.id, newcomer.id])
    assert reinforcement_fold() == pheromones.Fold(logs=1, thoughts=2)
    thought.refresh_from_db()
    partners = thought.co_retrieved_with
    assert len(partners) == CO_RETRIEVAL_PARTNERS_MAX
    # The new partner gets in; the least frequent regular (count 3) made room; the rest are intact.
    assert partners[str(newcomer.id)] == 1
    assert "00000000-0000-0000-0000-000000000000" not in partners
    assert all(partners[key] == count for key, count in regulars.items() if key.endswith("1"))
    for _ in range(4):  # four calls folded together count four times
        logged(agent, [thought.id, newcomer.id])
    assert reinforcement_fold() == pheromones.Fold(logs=4, thoughts=2)
    thought.refresh_from_db()
    assert len(thought.co_retrieved_with) == CO_RETRIEVAL_PARTNERS_MAX
    assert thought.co_retrieved_with[str(newcomer.id)] == 5
    assert thought.access_count == 5


@pytest.mark.django_db
def test_calls_folded_together_count_as_the_same_calls_folded_one_by_one(dev, agent_factory, thought_factory):
    """Partners, counts, weights, who and when: a batch of rows gives what folding each row alone gives."""
    other = agent_factory("qa").agent
    thoughts = [thought_factory(f"{text} ({n})") for n in range(2) for text in TEXTS]
    calls = [(dev.agent, thoughts[0:3]), (other, thoughts[1:4]), (dev.agent, thoughts[2:6]), (other, thoughts[0:1])]

    def state():
        rows = Thought.objects.filter(pk__in=[t.pk for t in thoughts]).order_by("pk")
        return [
            (t.access_count, round(t.pheromone_weight, 9), t.accessed_by, t.last_accessed, t.co_retrieved_with)
            for t in rows
        ]

    for agent, returned in calls:
        logged(agent, [t.id for t in returned])
        assert reinforcement_fold().logs == 1
    one_by_one = state()
    Thought.objects.filter(pk__in=[t.pk for t in thoughts]).update(
        access_count=0, pheromone_weight=1.0, accessed_by=[], last_accessed=None, co_retrieved_with={}
    )
    QueryLog.objects.update(reinforced=False)
    assert reinforcement_fold() == pheromones.Fold(logs=4, thoughts=6)
    assert state() == one_by_one
    counts = {str(t.pk): t.access_count for t in Thought.objects.filter(pk__in=[t.pk for t in thoughts])}
    assert [counts[str(t.id)] for t in thoughts] == [2, 2, 3, 2, 1, 1]
    first = Thought.objects.get(pk=thoughts[1].pk)
    assert first.accessed_by == [str(dev.agent.pk), str(other.pk)]  # in the order they first asked
    assert first.co_retrieved_with == {str(thoughts[0].id): 1, str(thoughts[2].id): 2, str(thoughts[3].id): 1}
    assert reinforcement_fold() == pheromones.Fold(logs=0, thoughts=0)  # every row counted once


@pytest.mark.django_db
def test_reinforcement_stays_in_its_space(dev, other_space, thought_factory):
    foreign = thought_factory(TEXTS[0], in_space=other_space)
    logged(dev.agent, [foreign.id])
    assert reinforcement_fold() == pheromones.Fold(logs=1, thoughts=0)
    foreign.refresh_from_db()
    assert foreign.access_count == 0
    assert not QueryLog.objects.filter(reinforced=False).exists()  # counted (nothing to count)


@pytest.mark.django_db
def test_a_fold_skips_results_that_are_not_thought_ids(dev, thought_factory):
    thought = thought_factory(TEXTS[0])
    junk = ["a string", 7, None, {"score": 1}, {"id": "not-a-uuid"}, {"id": str(thought.id)}, {"id": str(thought.id)}]
    QueryLog.objects.create(
        space=dev.agent.space, agent=dev.agent, session_id="s", query_text="q", results=junk, reinforced=False
    )
    QueryLog.objects.create(
        space=dev.agent.space,
        agent=dev.agent,
        session_id="s",
        query_text="q",
        results={"not": "a list"},
        reinforced=False,
    )
    assert reinforcement_fold() == pheromones.Fold(logs=2, thoughts=1)
    thought.refresh_from_db()
    assert thought.access_count == 1 and thought.co_retrieved_with == {}


@pytest.mark.django_db
def test_at_the_production_interval_a_process_folds_at_most_once_in_it(
    dev, fake_embedder, thought_factory, production_interval
):
    thoughts = [thought_factory(text) for text in TEXTS]
    memory(dev, prompt=QUERY)  # this process has not folded yet: it folds its own call
    memory(dev, prompt=QUERY)
    memory(dev, prompt=QUERY)
    assert [t.access_count for t in Thought.objects.filter(pk__in=[t.pk for t in thoughts])] == [1, 1, 1]
    assert QueryLog.objects.filter(reinforced=False).count() == 2
    assert pheromones.reinforcement_fold_due() is None  # not due yet
    # The worker's minute job counts what the process left, exactly once.
    from brain.jobs import reinforcement_fold as job

    assert job() == 2 and job() == 0
    for thought in thoughts:
        thought.refresh_from_db()
        assert thought.access_count == 3 and thought.pheromone_weight == pytest.approx(1.15)


@pytest.mark.django_db
def test_an_export_and_the_decay_count_every_access_first(dev, fake_embedder, thought_factory, production_interval):
    from brain.services.pheromones import thoughts_decay
    from brain.transfer.export import space_export_rows

    thought = thought_factory(TEXTS[0])
    memory(dev, prompt=QUERY)
    memory(dev, prompt=QUERY)  # logged, not counted yet
    rows = list(space_export_rows(space=dev.agent.space, embeddings=False))
    exported = next(row for row in rows if row.get("kind") == "thought" and row["id"] == str(thought.id))
    assert exported["access_count"] == 2
    memory(dev, prompt=QUERY)
    assert Thought.objects.get(pk=thought.pk).access_count == 2
    thoughts_decay()
    assert Thought.objects.get(pk=thought.pk).access_count == 3  # counted before the decay looked


@pytest.mark.django_db
def test_a_row_still_to_be_counted_is_never_expired(dev, thought_factory, settings):
    from datetime import timedelta

    from django.utils import timezone

    from brain.services.pheromones import query_logs_expire

    thought = thought_factory(TEXTS[0])
    logged(dev.agent, [thought.id])
    QueryLog.objects.update(created_at=timezone.now() - timedelta(days=settings.QUERY_LOG_RETENTION_DAYS + 1))
    assert query_logs_expire() == 0
    assert reinforcement_fold().logs == 1 and query_logs_expire() == 1
    assert Thought.objects.get(pk=thought.pk).access_count == 1


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
        assert sorted(thought.accessed_by) == sorted(str(a.agent.pk) for a in agents)
        assert thought.co_retrieved_with == {partner: 20 for partner in ids - {str(thought.id)}}
    assert QueryLog.objects.count() == 20 and not QueryLog.objects.filter(reinforced=False).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_folds_count_every_logged_access_once(agent_factory, thought_factory):
    """Folds racing each other (web processes after their responses, the worker's job) take disjoint
    rows: 60 logged calls folded by six folds at once, in batches of 7, count 60 accesses each."""
    thoughts = [thought_factory(text) for text in TEXTS]
    agents = [agent_factory("dev").agent for _ in range(3)]
    for i in range(60):
        logged(agents[i % 3], [t.id for t in thoughts], session_id=f"s{i}")

    def fold():
        return pheromones.reinforcement_fold_all(batch=7).logs

    counted = run_concurrently([fold] * 6)
    assert all(isinstance(n, int) for n in counted), counted
    assert sum(counted) == 60
    ids = {str(t.id) for t in thoughts}
    for thought in thoughts:
        thought.refresh_from_db()
        assert thought.access_count == 60 and thought.pheromone_weight == pytest.approx(4.0)
        assert thought.co_retrieved_with == {partner: 60 for partner in ids - {str(thought.id)}}
        assert sorted(thought.accessed_by) == sorted(str(a.pk) for a in agents)


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_requests_at_the_production_interval_lose_no_update(
    agent_factory, fake_embedder, thought_factory, production_interval
):
    """Each process folds at most once a second: most of these calls only log, and what they logged is
    counted by the next fold, exactly."""
    thoughts = [thought_factory(text) for text in TEXTS]
    agents = [agent_factory("dev") for _ in range(4)]

    def request(agent):
        client = _client(agent)
        return lambda: client.post("/api/v1/memory", {"prompt": QUERY}, format="json").status_code

    assert run_concurrently([request(agents[i % 4]) for i in range(20)]) == [200] * 20
    assert QueryLog.objects.filter(reinforced=False).exists()
    pheromones.reinforcement_fold_all()
    for thought in thoughts:
        thought.refresh_from_db()
        assert thought.access_count == 20 and thought.pheromone_weight == pytest.approx(2.0)


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
    pheromones.reinforcement_fold and session_feedback run it again (seen once in a 5-minute soak: a 500
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
    the contradicting thought out of order (otherwise a 500 DeadlockDetected when a worker raises
    suggestions while the next memory call reinforces the same two thoughts)."""
    from django.db import connections, transaction

    from brain.models import CorrectionSuggestion
    from brain.services.suggestions import suggestion_create

    low, high = sorted((thought_factory(text) for text in TEXTS[:2]), key=lambda t: t.pk)
    holding, release, done = threading.Event(), threading.Event(), []

    def memory_write():  # holds the lower id, as reinforcement_fold does while it locks in order
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
    """A memory call's bookkeeping writes (query log, reinforcement fold, implicit feedback) don't wait for
    their WAL flush when each is a transaction of its own; inside a caller's transaction they must not
    change how that transaction commits (a contribution in it must stay durable)."""
    from django.db import transaction
    from django.test.utils import CaptureQueriesContext

    from brain.services.pheromones import session_feedback

    thought, stored = thought_factory(TEXTS[0]), thought_factory(TEXTS[1])
    agent = agent_factory("dev").agent
    record = dict(space=agent.space, agent=agent, agent_ref=agent.name, session_id="s", query_text=QUERY)

    def bookkeeping() -> int:
        log_id = retrieval_log(**record, results=[{"id": str(thought.id), "score": 0.9}]).query_log_id
        assert reinforcement_fold() == pheromones.Fold(logs=1, thoughts=1)
        return session_feedback(
            space=agent.space, agent=agent, session_id="s", before_id=log_id + 1, stored_id=stored.id
        )

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


@pytest.mark.django_db(transaction=True)
def test_a_retrieve_only_calls_row_is_there_before_its_answer_and_names_its_results_right_after(
    agent_factory, fake_embedder, thought_factory
):
    """The search writes the row (one round trip less before the answer): when the answer goes out,
    another connection (a memory gate of the workflow) sees the session queried, the row's results JSON
    null and nothing for a fold to take; right after the response they are named and counted."""
    from api.responses import ResponseThenWork
    from brain.selectors.activity import agent_session_query_times

    thoughts = [thought_factory(text) for text in TEXTS]
    client = agent_factory("dev")
    agent = client.agent
    seen = []
    close = ResponseThenWork.close

    def look_from_elsewhere():
        try:
            queried, _latest = agent_session_query_times(space_id=agent.space_id, agent=agent, session_id="gate")
            rows = QueryLog.objects.filter(session_id="gate").values_list("results", "reinforced")
            seen.append((queried, list(rows)))
        finally:
            connection.close()

    def close_looking(response):
        other = threading.Thread(target=look_from_elsewhere)
        other.start()
        other.join()
        close(response)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ResponseThenWork, "close", close_looking)
        body = client.get("/api/v1/memory", {"prompt": QUERY, "session_id": "gate", "contribute": "false"}).json()
    assert seen == [(True, [(None, True)])]
    sources = [source["thought_id"] for source in body["result"]["sources"]]
    assert sorted(sources) == sorted(str(t.id) for t in thoughts)
    log = QueryLog.objects.get(session_id="gate")
    assert [result["id"] for result in log.results] == sources and log.reinforced  # named, then folded
    for thought in thoughts:
        thought.refresh_from_db()
        assert thought.access_count == 1


@pytest.mark.django_db
def test_a_fold_leaves_a_row_whose_results_are_not_named_yet(agent_factory, thought_factory):
    from core.db import prepared_cursor

    thoughts = [thought_factory(text) for text in TEXTS]
    agent = agent_factory("dev").agent
    sql, params = pheromones.retrieval_log_begin(
        space=agent.space, agent=agent, agent_ref=agent.name, session_id="s", query_text=QUERY
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        record = pheromones.retrieval_record(cursor.fetchone())
    assert (record.queried_before, record.suggestions_pending) == (False, False)
    assert reinforcement_fold() == pheromones.Fold(logs=0, thoughts=0)
    results = [{"id": str(t.id), "score": 0.5} for t in thoughts]
    assert pheromones.retrieval_results(query_log_id=record.query_log_id, results=results) is True
    assert pheromones.retrieval_results(query_log_id=record.query_log_id, results=[]) is False  # named once
    assert reinforcement_fold() == pheromones.Fold(logs=1, thoughts=3)
    assert QueryLog.objects.get(pk=record.query_log_id).results == results
    # A call that found nothing: its row has nothing to count, and no fold takes it.
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        empty = pheromones.retrieval_record(cursor.fetchone())
    assert empty.queried_before is True
    assert pheromones.retrieval_results(query_log_id=empty.query_log_id, results=[]) is True
    assert reinforcement_fold() == pheromones.Fold(logs=0, thoughts=0)
    assert QueryLog.objects.get(pk=empty.query_log_id).results == []
