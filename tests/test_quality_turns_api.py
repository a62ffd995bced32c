"""POST /api/v1/turns: what is stored per turn and item, defaults, idempotency, bad input."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from quality.models import TurnItem, TurnLog
from tests.quality_support import make_query_log, make_thought, new_session

pytestmark = pytest.mark.django_db


def turn_body(session_id: str, turn_id: str = "t1", **extra) -> dict:
    return {
        "session_id": session_id,
        "turn_id": turn_id,
        "user_prompt": "How do we run the tests?",
        "assistant_response": "Run pytest against the embedded database.",
        "tool_calls": [{"name": "Bash", "input": {"command": ".venv/bin/pytest tests"}}],
        **extra,
    }


def test_items_default_to_the_sessions_last_memory_call(dev, space, enqueued, django_capture_on_commit_callbacks):
    session = new_session()
    a = make_thought(space, "A" * 700)
    b = make_thought(space, "Use the embedded PostgreSQL for tests.")
    old = make_thought(space, "an older call's source")
    make_query_log(space, session, [old], agent=dev.agent)
    make_query_log(space, new_session(), [old], agent=dev.agent)  # another session
    make_query_log(space, session, [a, b], scores=[0.91, 0.55], agent=dev.agent)  # the newest call of this session

    with django_capture_on_commit_callbacks(execute=True):
        response = dev.post("/api/v1/turns", turn_body(session), format="json")

    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "pending" and body["duplicate"] is False
    assert body["injected_from"] == "query_log" and body["items"] == 2
    turn = TurnLog.objects.get(pk=body["turn_log_id"])
    assert (turn.agent, turn.agent_name, turn.session_id, turn.turn_id) == (dev.agent, "dev-1", session, "t1")
    assert turn.tool_calls == [{"name": "Bash", "input": {"command": ".venv/bin/pytest tests"}}]
    items = list(turn.items.order_by("position"))
    assert [i.thought_id for i in items] == [a.id, b.id]
    assert items[0].excerpt == "A" * 500 and items[0].content_length == 700
    assert items[1].excerpt == b.content and items[1].content_length == len(b.content)
    assert [i.score_at_injection for i in items] == [0.91, 0.55]
    assert all(i.in_injection and i.explicit_used is None and i.on_topic is None for i in items)
    assert enqueued == [str(turn.id)]


def test_explicit_injected_ids_and_feedback(dev, space, enqueued):
    session = new_session()
    a, b, c = (make_thought(space, f"thought {n}") for n in "abc")
    make_query_log(space, session, [c], scores=[0.6], agent=dev.agent)  # an earlier call showed c
    make_query_log(space, session, [a, b], scores=[0.8, 0.7], agent=dev.agent)
    response = dev.post(
        "/api/v1/turns",
        turn_body(session, injected_ids=[str(b.id)], used_ids=[str(b.id)], contradicted_ids=[str(c.id)]),
        format="json",
    )
    assert response.status_code == 202
    assert response.json()["injected_from"] == "explicit"
    items = {i.thought_id: i for i in TurnItem.objects.all()}
    assert set(items) == {b.id, c.id}
    assert items[b.id].score_at_injection == 0.7  # known from the session's last call
    assert (items[b.id].explicit_used, items[b.id].explicit_contradicted, items[b.id].in_injection) == (
        True,
        False,
        True,
    )
    # c was not injected by this call but an earlier one showed it and the agent reports on it:
    # kept, marked as feedback-only
    assert (items[c.id].explicit_used, items[c.id].explicit_contradicted, items[c.id].in_injection) == (
        False,
        True,
        False,
    )
    assert items[c.id].score_at_injection is None


def test_empty_injected_ids_means_nothing_injected(dev, space, enqueued):
    session = new_session()
    make_query_log(space, session, [make_thought(space, "x")], agent=dev.agent)
    response = dev.post("/api/v1/turns", turn_body(session, injected_ids=[]), format="json")
    assert response.status_code == 202
    assert response.json()["items"] == 0
    assert response.json()["injected_from"] == "explicit"


def test_no_memory_call_logs_the_turn_without_items(dev, enqueued):
    response = dev.post("/api/v1/turns", turn_body(new_session()), format="json")
    assert response.status_code == 202
    assert response.json()["injected_from"] == "none" and response.json()["items"] == 0


def test_duplicate_turn_is_idempotent(dev, space, enqueued, django_capture_on_commit_callbacks):
    session = new_session()
    make_query_log(space, session, [make_thought(space, "x")], agent=dev.agent)
    with django_capture_on_commit_callbacks(execute=True):
        first = dev.post("/api/v1/turns", turn_body(session), format="json")
    with django_capture_on_commit_callbacks(execute=True):
        second = dev.post(
            "/api/v1/turns", turn_body(session, assistant_response="something else entirely"), format="json"
        )
    assert second.status_code == 202
    assert second.json()["duplicate"] is True
    assert second.json()["turn_log_id"] == first.json()["turn_log_id"]
    assert TurnLog.objects.count() == 1 and TurnItem.objects.count() == 1
    assert TurnLog.objects.get().assistant_response == "Run pytest against the embedded database."
    assert len(enqueued) == 1
    # same turn id in another session is another turn
    assert dev.post("/api/v1/turns", turn_body(new_session()), format="json").json()["duplicate"] is False


@override_settings(TURN_TEXT_MAX_CHARS=20)
def test_prompt_response_and_tool_calls_are_truncated_to_the_setting(dev, enqueued):
    body = turn_body(new_session(), user_prompt="p" * 50, assistant_response="r" * 50)
    body["tool_calls"] = [{"name": "Read", "input": {"file_path": "x" * 100}}, {"name": "Bash"}]
    assert dev.post("/api/v1/turns", body, format="json").status_code == 202
    turn = TurnLog.objects.get()
    assert turn.user_prompt == "p" * 20 and turn.assistant_response == "r" * 20
    assert turn.tool_calls[0]["name"] == "Read" and "truncated_json" in turn.tool_calls[0]
    assert turn.tool_calls[-1] == {"omitted_tool_calls": 1}


def test_unknown_or_foreign_ids_are_refused_and_nothing_is_stored(dev, space, other_space, enqueued):
    foreign = make_thought(other_space, "another tenant's thought")
    for field in ("injected_ids", "used_ids", "contradicted_ids"):
        for bad in (str(uuid.uuid4()), str(foreign.id)):
            response = dev.post("/api/v1/turns", turn_body(new_session(), **{field: [bad]}), format="json")
            assert response.status_code == 404, field
            assert response.json()["error"]["code"] == "UNKNOWN_THOUGHT"
            assert bad in response.json()["error"]["message"]
    assert TurnLog.objects.count() == 0 and enqueued == []


@pytest.mark.parametrize(
    "change",
    [
        {"session_id": None},
        {"session_id": ""},
        {"turn_id": "x" * 201},
        {"user_prompt": None},
        {"used_ids": ["not-a-uuid"]},
        {"injected_ids": "abc"},
        {"tool_calls": {"name": "Bash"}},
        {"contradicted_ids": [str(uuid.uuid4())] * 101},
    ],
)
def test_bad_input_gets_400_envelope(dev, enqueued, change):
    body = turn_body(new_session())
    for key, value in change.items():
        if value is None:
            body.pop(key)
        else:
            body[key] = value
    response = dev.post("/api/v1/turns", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert TurnLog.objects.count() == 0


def test_turns_need_an_agent_token(anon):
    response = anon.post("/api/v1/turns", turn_body("s"), format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHENTICATED"


def test_a_session_of_another_space_is_not_used(dev, other_space, enqueued):
    session = new_session()
    make_query_log(other_space, session, [make_thought(other_space, "foreign")])
    response = dev.post("/api/v1/turns", turn_body(session), format="json")
    assert response.json()["items"] == 0


def test_a_memory_call_with_more_than_100_sources_logs_the_best_100(dev, space, enqueued):
    session = new_session()
    thoughts = [make_thought(space, f"t{n}") for n in range(105)]
    make_query_log(space, session, thoughts, scores=[1 - n / 1000 for n in range(105)], agent=dev.agent)
    response = dev.post("/api/v1/turns", turn_body(session), format="json")
    assert response.status_code == 202 and response.json()["items"] == 100
    assert not TurnItem.objects.filter(thought__in=thoughts[100:]).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_of_one_turn_log_it_once(agent_factory, space, monkeypatch):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from quality.services import turns
    from quality.services.turns import turn_log_create

    # Celery's task proxy resolves per thread: patch the enqueueing itself, which every thread shares.
    monkeypatch.setattr(turns, "turn_enqueue_scoring", lambda turn_log_id: None)
    agent = agent_factory("dev").agent
    thought = make_thought(space, "x")
    make_query_log(space, "same-session", [thought], agent=agent)
    barrier = threading.Barrier(4, timeout=20)

    def post(_):
        try:
            barrier.wait()
            return turn_log_create(
                agent=agent, session_id="same-session", turn_id="1", user_prompt="p", assistant_response="r"
            )
        finally:
            connection.close()

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(post, range(4)))
    assert sum(result.created for result in results) == 1
    assert len({result.turn.pk for result in results}) == 1
    assert TurnLog.objects.count() == 1 and TurnItem.objects.count() == 1


def test_a_memory_call_is_attributed_to_one_turn_only(dev, space, enqueued):
    session = new_session()
    make_query_log(space, session, [make_thought(space, "x"), make_thought(space, "y")], agent=dev.agent)
    first = dev.post("/api/v1/turns", turn_body(session, turn_id="1"), format="json").json()
    second = dev.post("/api/v1/turns", turn_body(session, turn_id="2"), format="json").json()
    assert (first["items"], first["injected_from"]) == (2, "query_log")
    assert (second["items"], second["injected_from"]) == (0, "none")  # no new memory call since turn 1
    make_query_log(space, session, [make_thought(space, "z")], agent=dev.agent)
    third = dev.post("/api/v1/turns", turn_body(session, turn_id="3"), format="json").json()
    assert (third["items"], third["injected_from"]) == (1, "query_log")


@pytest.mark.django_db(transaction=True)
def test_a_turn_reported_while_its_memory_calls_results_are_in_flight_waits_for_them(agent_factory, space, monkeypatch):
    """A retrieve-only memory call logs its row with its search and names its results right after its
    answer is sent (brain.services.pheromones.retrieval_log_begin / retrieval_results): a turn reported
    in between takes them once they are there, not an empty injection."""
    import threading
    import time

    from django.db import connection

    from brain.services import pheromones
    from core.db import prepared_cursor
    from quality.services import turns
    from quality.services.turns import turn_log_create

    monkeypatch.setattr(turns, "turn_enqueue_scoring", lambda turn_log_id: None)
    agent = agent_factory("dev").agent
    a, b = make_thought(space, "first source"), make_thought(space, "second source")
    sql, params = pheromones.retrieval_log_begin(
        space=space, agent=agent, agent_ref=agent.name, session_id="in-flight", query_text="what do we know"
    )
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        log_id = pheromones.retrieval_record(cursor.fetchone()).query_log_id

    def name_them_late():
        try:
            time.sleep(0.2)
            results = [{"id": str(a.id), "score": 0.8}, {"id": str(b.id), "score": 0.6}]
            pheromones.retrieval_results(query_log_id=log_id, results=results)
        finally:
            connection.close()

    namer = threading.Thread(target=name_them_late)
    started = time.monotonic()
    namer.start()
    logged = turn_log_create(agent=agent, session_id="in-flight", turn_id="1", user_prompt="p", assistant_response="r")
    waited = time.monotonic() - started
    namer.join()
    assert 0.2 <= waited < turns.IN_FLIGHT_WAIT_SECONDS
    assert [item.thought_id for item in logged.turn.items.order_by("position")] == [a.id, b.id]
    assert logged.turn.query_log_id == log_id


def test_a_memory_calls_row_whose_results_never_came_is_read_at_once_as_returning_nothing(dev, space, enqueued):
    """Its web process died between the answer and naming the results: an old row is not waited for."""
    import time
    from datetime import timedelta

    from django.db.models import JSONField, Value
    from django.utils import timezone

    from brain.models import QueryLog

    session = new_session()
    QueryLog.objects.create(
        space=space,
        agent_ref="tester",
        session_id=session,
        query_text="what do we know",
        results=Value(None, JSONField()),  # JSON null, as retrieval_log_begin writes it
        created_at=timezone.now() - timedelta(minutes=5),
    )
    started = time.monotonic()
    response = dev.post("/api/v1/turns", turn_body(session), format="json")
    assert time.monotonic() - started < 1.0
    assert response.status_code == 202, response.content
    assert response.json()["items"] == 0
