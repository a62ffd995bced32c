"""Concurrent writers can't corrupt state (SPEC 6), races the other concurrency tests don't cover.

Real threads, each on its own connection, against the real PostgreSQL, through the API. Where a race
needs a precise interleaving it is forced at a named point of one request (a wrapped function waits
there until the other request has committed): the point is one every real request passes, and the
wait only stands for a slow model, a busy database or a descheduled process. After each race the
invariant is checked on the final database state, and every response was a 2xx or a clear 4xx/409 in
the error envelope (a deadlock's victim as 503 ``DATABASE_CONFLICT``), never a 500.

Each test names the race, what happens instead of the expected outcome, and what must hold.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from django.db import connection

from brain.apis import memory as memory_api
from brain.models import Thought
from brain.services import corrections, flags
from quality.models import TurnItem
from quality.services import turns
from tests.concurrency_support import never_500, offline, run_concurrently  # noqa: F401 - offline: a fixture
from tests.security.support import remember, rows_holding

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("offline")]

MEMORY = "/api/v1/memory"
#: How long a forced meeting point waits for the other request (a failure, not a hang, if it never comes).
MEET_SECONDS = 15


# --- helpers -----------------------------------------------------------------------------------------


def call(client, method: str, path: str, body: dict | None = None, **headers):
    """A call to run in a thread: (status, body) so nothing of the client's state crosses threads."""

    def send():
        response = getattr(client, method)(path, body or {}, format="json", **headers)
        return response.status_code, response.json()

    return send


class Meeting:
    """A forced interleaving: :meth:`pause` (called at a point of request A, the first time only) tells
    that A got there and waits; :meth:`then` wraps request B so that it runs once A is there, and lets A
    go on once B answered. Both run through :func:`run_concurrently`."""

    def __init__(self):
        self.arrived = threading.Event()
        self.released = threading.Event()
        self.times = 0

    def pause(self) -> None:
        """Wait until B answered, or until B waits for a lock (one A holds: B then goes on once A commits)."""
        if self.times:  # the first time only
            return
        self.times += 1
        self.arrived.set()
        deadline = time.monotonic() + MEET_SECONDS
        while not self.released.wait(0.05) and time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock')"
                )
                if cursor.fetchone()[0]:
                    return

    def then(self, job):
        def run():
            try:
                assert self.arrived.wait(MEET_SECONDS), "the other request never reached its meeting point"
                return job()
            finally:
                self.released.set()

        return run


# --- the re-contamination guard racing the correction ---------------------------------------------


def test_a_contribution_repeating_a_fact_that_is_corrected_meanwhile_is_flagged(agent_factory, space, monkeypatch):
    """Race: agent O stored T. Agent A contributes T's text again while agent B corrects T.

    Instead of: the contribution's re-contamination guard (``flags.contribution_checks`` in
    ``step_flags``) runs before its storing transaction and takes no lock a correction takes; the
    correction's own sweep for live repeats (``flags.thoughts_flag_repeating``) reads only committed
    rows. A correction that commits between the two is seen by neither: the contribution is stored
    live, unflagged, with no warning, and T being superseded, one row per fact no longer catches it.
    The wrong fact is served again beside its correction, as if nobody had corrected it.

    Expected: the repeat is stored flagged ``contradicts_correction`` (or not stored as a live thought
    at all); both calls answer 2xx."""
    owner, a, b = agent_factory("dev"), agent_factory("dev"), agent_factory("qa")
    fact = "The staging cache is flushed every night at midnight by the cron runner on the batch host."
    t = remember(owner, fact)
    meeting = Meeting()
    checks = flags.contribution_checks

    def guarded(**kwargs):
        answer = checks(**kwargs)
        if kwargs.get("agent") is not None and kwargs["agent"].pk == a.agent.pk:  # the contribution's guard
            meeting.pause()
        return answer

    monkeypatch.setattr(flags, "contribution_checks", guarded)
    correct = {"correct_fact": "The staging cache is flushed every Sunday at noon by the cron runner."}
    results = run_concurrently(
        [
            call(a, "post", MEMORY, {"prompt": fact, "store": True}),
            meeting.then(call(b, "post", f"/api/v1/thoughts/{t}/correct", correct)),
        ],
        timeout=30,
    )
    never_500(results)
    (contributed, answer), (corrected, _) = results
    assert (contributed, corrected) == (200, 201), results
    assert Thought.objects.get(pk=t).superseded
    unflagged = [
        str(row.pk)
        for row in Thought.objects.filter(space=space, superseded=False).exclude(thought_category="correction")
        if row.content == fact and "contradicts_correction" not in row.quality_flags
    ]
    assert not unflagged, (
        f"live, unflagged repeats of the corrected fact: {unflagged}; the answer warned: "
        f"{'WARNING' in answer['result']['guidance']}"
    )


# --- redaction racing the writes that copy a thought's text -----------------------------------------

SECRET = "Billing vault deploy key is hvk-7781-QUOKKA-secret and it rotates monthly."
#: A word of SECRET found nowhere else: a row holding it holds (a part of) the secret.
SECRET_WORD = "QUOKKA"


def test_a_turn_logged_while_its_thought_is_redacted_keeps_no_excerpt_of_it(agent_factory, space, monkeypatch):
    """Race: agent B was shown A's thought S and reports its turn while A retracts S with ``redact``.

    Instead of: the turn reads S's text (``turn_log_create``, no lock on S) to keep its excerpt, the
    redaction commits and erases the excerpts already committed (``turns.turn_items_redact``), then
    the turn inserts its item with the excerpt it read: the erased secret stays in ``TurnItem.excerpt``,
    read by the judge and shown on the quality pages.

    Expected: no row keeps S's text once the redaction answered 200; the turn is logged (202)."""
    a, b = agent_factory("dev"), agent_factory("qa")
    s = remember(a, SECRET)
    assert "brain_thought.content" in rows_holding(SECRET_WORD)  # what the check below reads
    shown = b.post(MEMORY, {"prompt": "billing vault deploy key rotates", "contribute": False, "session_id": "s-b"},
                   format="json")  # fmt: skip
    assert shown.status_code == 200 and s in [x["thought_id"] for x in shown.json()["result"]["sources"]]
    meeting = Meeting()
    truncate = turns._truncate

    def slow_truncate(text):  # first called building the turn row: the items' excerpts are read already
        meeting.pause()
        return truncate(text)

    monkeypatch.setattr(turns, "_truncate", slow_truncate)
    turn = {"session_id": "s-b", "turn_id": "t1", "user_prompt": "which key?", "assistant_response": "see vault"}
    results = run_concurrently(
        [
            call(b, "post", "/api/v1/turns", turn),
            meeting.then(call(a, "post", f"/api/v1/thoughts/{s}/retract", {"reason": "leaked", "redact": True})),
        ],
        timeout=30,
    )
    never_500(results)
    assert [status for status, _ in results] == [202, 200], results
    assert TurnItem.objects.filter(thought_id=s).exists()
    assert rows_holding(SECRET_WORD) == [], "rows that keep the redacted text"


def test_a_correction_racing_the_redaction_of_its_thought_copies_no_erased_text(agent_factory, space, monkeypatch):
    """Race: agent B corrects A's thought S (``POST /thoughts/S/correct`` with only the right fact) while
    A retracts S with ``redact``.

    Instead of: the correction reads S's text first (``thought_correct_by_id``: ``thought_get``, no lock)
    to use it as the wrong fact, the redaction commits (it erases the copies in the corrections of S
    that exist), then the correction locks S, now retracted and erased, and stores S's old text as its
    ``corrected_fact`` and in its default content: the secret is back in a live thought, served and
    found by full text.

    Expected: once both answered, no thought holds S's text (the correction refused with a 4xx/409,
    or stored without the erased text)."""
    a, b = agent_factory("dev"), agent_factory("qa")
    s = remember(a, SECRET)
    meeting = Meeting()
    get = corrections.thought_get

    def slow_get(**kwargs):
        target = get(**kwargs)
        meeting.pause()
        return target

    monkeypatch.setattr(corrections, "thought_get", slow_get)
    correct = {"correct_fact": "Billing vault deploy keys are never stored in the brain; ask the vault owner."}
    results = run_concurrently(
        [
            call(b, "post", f"/api/v1/thoughts/{s}/correct", correct),
            meeting.then(call(a, "post", f"/api/v1/thoughts/{s}/retract", {"reason": "leaked", "redact": True})),
        ],
        timeout=30,
    )
    never_500(results)
    (corrected, _), (retracted, _) = results
    assert retracted == 200 and corrected in (201, 404, 409), results
    assert rows_holding(SECRET_WORD) == [], "rows that keep the redacted text"


def test_a_keyed_answer_racing_the_redaction_of_its_source_is_not_kept_with_the_text(agent_factory, space, monkeypatch):
    """Race: agent B's memory call with an ``Idempotency-Key`` returns A's thought S (its preview and
    the answer's best sentence quote it) while A retracts S with ``redact``.

    Instead of: the redaction erases S's text in the kept answers (``receipts.receipts_erase``) it can
    see, but B's receipt is a row its transaction inserted and has not committed: invisible, not waited
    for. B's call then commits its receipt quoting S, and replaying the key serves the erased secret
    from the receipt, after the redaction.

    Expected: once both answered, no kept answer quotes S, and the replay of B's key doesn't either."""
    a, b = agent_factory("dev"), agent_factory("qa")
    s = remember(a, SECRET)
    meeting = Meeting()
    run = memory_api.memory_run

    def slow_run(**kwargs):
        answer = run(**kwargs)
        meeting.pause()  # answered, the receipt not yet written
        return answer

    monkeypatch.setattr(memory_api, "memory_run", slow_run)
    ask = {"prompt": "billing vault deploy key rotates monthly", "contribute": False}
    results = run_concurrently(
        [
            call(b, "post", MEMORY, ask, HTTP_IDEMPOTENCY_KEY="ask-vault-1"),
            meeting.then(call(a, "post", f"/api/v1/thoughts/{s}/retract", {"reason": "leaked", "redact": True})),
        ],
        timeout=30,
    )
    never_500(results)
    (asked, answer), (retracted, _) = results
    assert (asked, retracted) == (200, 200), results
    assert s in [x["thought_id"] for x in answer["result"]["sources"]]
    assert Thought.objects.get(pk=s).content != SECRET
    monkeypatch.setattr(memory_api, "memory_run", run)
    replay = b.post(MEMORY, ask, format="json", HTTP_IDEMPOTENCY_KEY="ask-vault-1")
    assert replay.status_code == 200
    replayed = SECRET_WORD in replay.content.decode()
    assert (rows_holding(SECRET_WORD), replayed) == ([], False), "rows that keep the redacted text; replayed"


# --- imports racing imports ----------------------------------------------------------------------------


def test_two_imports_naming_the_same_ids_at_once_store_them_once_and_refuse_the_other_as_a_conflict(
    agent_factory, space
):
    """Race: two agents of one space import batches that give the same item ids, at the same moment
    (a restore script run twice, two agents restoring one shared export).

    Instead of: each batch checks that its ids are free (none is taken yet), both write; the second
    write waits on the first's primary key and then fails, answered 400 ``IMPORT_INVALID`` with the
    database's own message (the constraint's name, "Check the values of the lines"), where the same
    batch sent a moment later is 409 ``IMPORT_CONFLICT`` naming the line and the id.

    Expected: each id is stored once (one batch wins, 201/200), the other batch stores nothing and is
    refused as the conflict it is: 409 ``IMPORT_CONFLICT`` with its lines, no database wording."""
    a, b = agent_factory("dev"), agent_factory("qa")
    answers = []
    for n in range(3):
        given = [str(uuid.uuid4()) for _ in range(3)]
        items = [{"id": gid, "content": f"Round {n}: restored note {i} about the deploy runbook."} for i, gid in
                 enumerate(given)]  # fmt: skip
        body = json.dumps(items)

        def send(client, body=body):
            def run():
                response = client.post("/api/v1/thoughts/import", data=body, content_type="application/json")
                return response.status_code, response.json()

            return run

        results = run_concurrently([send(a), send(b)], timeout=30)
        never_500(results)
        statuses = sorted(status for status, _ in results)
        assert statuses[0] in (200, 201), results
        answers.append([(status, body.get("error", {}).get("code"), body.get("error", {}).get("message", "")[:160])
                        for status, body in results if status >= 400])  # fmt: skip
        stored = Thought.objects.filter(space=space, content__startswith=f"Round {n}: restored note")
        assert stored.count() == 3, (n, results)
        assert stored.values("agent_id").distinct().count() == 1, n
    losers = [loser for round_answers in answers for loser in round_answers]
    assert len(losers) == 3, answers
    assert all(status == 409 and code == "IMPORT_CONFLICT" for status, code, _ in losers), losers
    assert not any("constraint" in message or "duplicate key" in message for _, _, message in losers), losers


# --- feedback racing scoring ---------------------------------------------------------------------------


def test_turns_of_one_showing_logged_and_scored_at_once_move_the_thought_once(agent_factory, space):
    """Race: agent B was shown O's thought T once (one memory call of its session), then reports
    turns naming T in ``used_ids``/``contradicted_ids``; while the first turn is being scored, the next
    ones are logged and scored in other workers.

    Expected (what holds: the scorer locks the thoughts, in id order, before counting the session's
    steps, so concurrent scorers see each other's): one showing, one step: exactly one
    ``ConfidenceChange`` on T and one item marked ``fed_ema``, every turn logged (202) and scored."""
    from quality.models import ConfidenceChange, TurnLog
    from quality.services.scoring import turn_score

    owner, b = agent_factory("dev"), agent_factory("qa")
    for n in range(3):
        t = remember(owner, f"Round {n}: the release train leaves every Thursday after the smoke tests pass.")
        session = f"shown-once-{n}"
        shown = b.post(MEMORY, {"prompt": f"Round {n}: release train Thursday smoke tests", "contribute": False,
                                "session_id": session}, format="json")  # fmt: skip
        assert shown.status_code == 200 and t in [x["thought_id"] for x in shown.json()["result"]["sources"]]

        def turn(number, feedback, session=session, t=t):
            body = {"session_id": session, "turn_id": f"t{number}", "user_prompt": "when does it leave?",
                    "assistant_response": "Thursday.", feedback: [t]}  # fmt: skip
            response = b.post("/api/v1/turns", body, format="json")
            assert response.status_code == 202, response.content
            return TurnLog.objects.get(space=space, session_id=session, turn_id=f"t{number}").pk

        first = turn(1, "used_ids")

        def log_and_score(number, feedback):
            return lambda: turn_score(turn_log_id=str(turn(number, feedback))).fed_ema

        jobs = [lambda first=first: turn_score(turn_log_id=str(first)).fed_ema]
        jobs += [log_and_score(2, "contradicted_ids"), log_and_score(3, "used_ids")]
        results = run_concurrently(jobs, timeout=30)
        assert not [r for r in results if isinstance(r, BaseException)], results
        assert sum(results) == 1, (n, results)
        assert ConfidenceChange.objects.filter(thought_id=t).count() == 1, n
        assert TurnItem.objects.filter(thought_id=t, fed_ema=True).count() == 1, n
        assert not TurnLog.objects.filter(space=space, session_id=session, status="pending").exists(), n
