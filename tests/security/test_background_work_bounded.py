"""Work a caller makes the background do stays bounded, and one agent's rows can't starve the jobs of
others (SPEC 1 Celery, 2.5, 4.1, 4.5, 6: "one bad row or one space never stops a periodic job for the
others").

Each test is an attack: a cheap call (a contribution, a turn) whose job a poisoned input makes fail,
retry and be re-enqueued, or whose rows crowd others out of a periodic job's batch. The counts are
taken where the work is paid: the requests the LLM judge sends (a paid model), the jobs enqueued.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import uuid

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from brain import jobs as brain_jobs
from brain.choices import SuggestionStatus
from brain.judging.llm import LLMJudge
from brain.models import CorrectionSuggestion, QueryLog
from brain.services import contradictions
from config.celery import app as celery_app
from quality import jobs as quality_jobs
from quality.models import TurnItem, TurnLog
from quality.selectors import SESSION_CALLS_READ
from quality.services.scoring import turn_score
from quality.services.turns import turn_log_create
from tests.quality_support import ScriptedJudge, make_query_log, new_session, trust
from tests.security.support import store

pytestmark = pytest.mark.django_db

# --- an LLM judge whose provider refuses one text ---------------------------------------------------

#: Words a provider's content filter refuses to read (Azure OpenAI answers such a prompt with HTTP 400
#: ``content_filter``; a small self-hosted model answers a prompt past its context with HTTP 400
#: ``context_length_exceeded``): deterministic, about the text, never about the judge being down.
REFUSED = "FILTERED-PAYLOAD"

#: Every request the judge's model received (its user message), in order.
MODEL_REQUESTS: list[str] = []


def _model(request: httpx.Request) -> httpx.Response:
    """An OpenAI-compatible endpoint: refuses a prompt holding REFUSED as its content filter does,
    otherwise answers honestly ("contradicts" when statement B says "not" about statement A's port)."""
    user = json.loads(request.content)["messages"][-1]["content"]
    MODEL_REQUESTS.append(user)
    if REFUSED in user:
        return httpx.Response(
            400,
            json={
                "error": {
                    "code": "content_filter",
                    "message": "The response was filtered due to the prompt triggering the content management policy.",
                }
            },
        )
    verdict = "Statement B" in user and "not 8080" in user.split("Statement B")[1] and "8080" in user
    return httpx.Response(
        200, json={"choices": [{"message": {"content": json.dumps({"verdict": verdict, "confidence": 0.9})}}]}
    )


def refusing_llm_judge(name: str | None = None) -> LLMJudge:
    """``QUALITY_JUDGE_FACTORY``: the real LLM judge (``brain.judging.llm``) against :func:`_model`."""
    return LLMJudge(
        provider="openai", base_url="http://judge.test/v1", api_key="", model="m", transport=httpx.MockTransport(_model)
    )


@pytest.fixture
def refusing_judge(settings, monkeypatch):
    """Both judging jobs use :func:`refusing_llm_judge`; returns the model's request log."""
    MODEL_REQUESTS.clear()
    settings.QUALITY_JUDGE = "llm"
    settings.QUALITY_JUDGE_FACTORY = f"{__name__}.refusing_llm_judge"
    monkeypatch.setattr(contradictions, "get_judge", lambda name=None: refusing_llm_judge(name))
    monkeypatch.setitem(celery_app.conf, "task_eager_propagates", False)  # retries run as a worker's
    yield MODEL_REQUESTS
    MODEL_REQUESTS.clear()


def _run(job, *args) -> None:
    """Run a job as the worker does, retries included (``refusing_judge``), whatever it ends with: the
    tests check what it did, not how it ended."""
    with contextlib.suppress(Exception):
        job.apply(args=list(args))


# --- turn scoring -----------------------------------------------------------------------------------


def test_a_thought_the_judge_refuses_to_read_does_not_stop_other_agents_turns_being_scored(
    space, agent_factory, refusing_judge
):
    """Attack: mallory contributes a thought whose words the LLM judge's provider refuses to read
    (HTTP 400 from its content filter, the same answer every time). Any agent's memory call may return
    it; the first turn that reports it injected is judged item by item, and the refused request raises
    ``JudgeUnavailable``, which ``score_turn`` retries as a judge outage: eight retries, each asking the
    judge again about every item before the refused one, then the job fails and the turn stays
    ``pending``. Nothing of the victim's turn counts (no verdict, no EMA step, no suggestion), and the
    hourly rollup re-enqueues the pending turn for two days (48 more rounds of nine attempts).

    Without the rule: a victim's turn of two items (an honest one, then mallory's) costs 36 judge requests in
    the job and 36 more at the next hourly rollup, and stays pending.

    Rule (SPEC 6, 4.2): a refusal about one item's text is that item's problem, as an answer without a
    verdict is: the item is left unjudged, the turn is scored and its other items count; the judge is
    asked each question once per item (at most 3 requests an item), not again on every retry or rollup.
    """
    victim, mallory = agent_factory("dev").agent, agent_factory("dev").agent
    honest = store(space, "Staging deploys run the database migrations before the web workers restart.")
    refused = store(space, f"Deploy notes for staging. {REFUSED}", agent=mallory)
    session = new_session()
    make_query_log(space, session, [honest, refused], agent=victim)
    turn = turn_log_create(
        agent=victim,
        session_id=session,
        turn_id="t1",
        user_prompt="Deploy staging.",
        assistant_response="I ran the database migrations, then restarted the web workers.",
    ).turn

    _run(quality_jobs.score_turn, str(turn.pk))
    TurnLog.objects.filter(pk=turn.pk).update(created_at=timezone.now() - dt.timedelta(minutes=20))
    _run(quality_jobs.rollup_daily)  # the next hourly rollup re-enqueues turns still pending

    turn.refresh_from_db()
    asked = len(refusing_judge)
    assert turn.status == "scored", f"the victim's turn is still {turn.status} after {asked} judge requests"
    assert TurnItem.objects.get(turn=turn, thought=honest).on_topic is not None
    assert asked <= 3 * 2, f"{asked} judge requests for a turn of 2 items"


# --- contradiction detection ------------------------------------------------------------------------


def test_a_thought_the_judge_refuses_to_read_does_not_blind_contradiction_detection_for_its_topic(
    space, agent_factory, refusing_judge
):
    """Attack: mallory contributes, in a busy topic, a thought whose words the LLM judge's provider
    refuses to read (HTTP 400, every time). Every later thought of the topic is judged against the
    topic's newest thoughts first, mallory's among them: the refused request raises
    ``JudgeUnavailable``, ``detect_contradictions`` retries it as an outage eight times (each attempt
    asking again about every candidate before it) and then fails, so the candidates after it are never
    judged. Another agent's real contradiction of an older fact raises nothing, for every new thought
    of the topic, as long as mallory's thought is among its 20 newest.

    Without the rule: the job sends 9 requests (one per attempt, each refused) and raises no suggestion.

    Rule (SPEC 2.5, 4.5, 6): a refusal about one pair's text skips that pair, as an answer without a
    verdict does; the other candidates are judged once each and the real contradiction becomes a
    pending suggestion."""
    writer, mallory = agent_factory("dev").agent, agent_factory("dev").agent
    real = store(space, "The staging API listens on port 8080 behind the proxy.", topic="staging-api")
    store(space, f"Staging API notes. {REFUSED}", agent=mallory, topic="staging-api")  # newer: judged first
    new = store(
        space,
        "The staging API listens on port 9090, not 8080, since the proxy move.",
        agent=writer,
        topic="staging-api",
    )

    _run(brain_jobs.detect_contradictions, str(new.pk))

    asked = len(refusing_judge)
    pending = CorrectionSuggestion.objects.filter(thought=real, status=SuggestionStatus.PENDING)
    assert pending.exists(), f"no suggestion on the contradicted fact after {asked} judge requests"
    assert asked <= 2, f"{asked} judge requests for 2 candidates"


# --- the hourly re-enqueue of lost scoring jobs -----------------------------------------------------

#: How many of one agent's turns fill the rollup's re-enqueue batch (quality.jobs.rollup_daily).
REQUEUE_BATCH = 1000


def test_one_spaces_pending_turns_do_not_starve_another_spaces_lost_scoring_job(
    space, other_space, agent_factory, enqueued
):
    """Attack: mallory, in her own space, keeps more than a thousand turns pending: turns whose scoring
    fails for good (an item the judge refuses, test above) or a flood that backs the queue up. The hourly
    rollup re-enqueues "lost" scoring jobs, at most 1000 a run, taken newest first (TurnLog's default
    ordering) across every space; mallory's newer turns fill the batch every hour for two days, and a
    victim's turn in another space whose job was really lost (a broker restart) is never re-enqueued:
    it is never scored and ages out of the two-day horizon pending.

    Without the rule: with 1000 of mallory's turns pending (30 minutes old) the run re-enqueues 1000 jobs, all
    hers, and not the victim's turn (3 hours old).

    Rule (SPEC 6: one space never stops a periodic job for the others): the re-enqueue reaches every
    space's lost turns; one space's pending turns can't take the whole batch."""
    victim = agent_factory("dev").agent
    mallory = agent_factory("dev", in_space=other_space).agent
    lost = turn_log_create(
        agent=victim, session_id=new_session(), turn_id="t1", user_prompt="Deploy.", assistant_response="Done."
    ).turn
    TurnLog.objects.filter(pk=lost.pk).update(created_at=timezone.now() - dt.timedelta(hours=3))
    session = new_session()
    TurnLog.objects.bulk_create(
        TurnLog(
            space=other_space,
            agent=mallory,
            agent_name=mallory.name,
            session_id=session,
            turn_id=f"t{n}",
            injected_from="none",
        )
        for n in range(REQUEUE_BATCH)
    )
    TurnLog.objects.filter(space=other_space).update(created_at=timezone.now() - dt.timedelta(minutes=30))

    result = quality_jobs.rollup_daily()

    assert str(lost.pk) in enqueued, (
        f"the run re-enqueued {result['requeued']} scoring jobs, "
        f"{sum(1 for i in enqueued if i != str(lost.pk))} of them mallory's, and not the victim's lost turn"
    )


# --- the cost of scoring one turn ---------------------------------------------------------------------


def _querylog_rows_read() -> int:
    """Rows of brain_querylog this transaction has read so far (sequential and index fetches)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
            "WHERE relname = 'brain_querylog'"
        )
        row = cursor.fetchone()
    return row[0] if row else 0


def _scoring_reads(space, agent, shown, *, earlier_calls: int) -> int:
    """Query-log rows read by the scoring job of one turn of ``agent``, in a session where it made
    ``earlier_calls`` memory calls (each returning ten other thoughts) before the one that returned
    ``shown``; the turn names nothing (its injected items are that last call's sources)."""
    session = new_session()
    QueryLog.objects.bulk_create(
        QueryLog(
            space=space,
            agent=agent,
            agent_ref=agent.name,
            session_id=session,
            query_text=f"what do we know about deploys, call {n}",
            results=[{"id": str(uuid.uuid4()), "score": 0.5} for _ in range(10)],
        )
        for n in range(earlier_calls)
    )
    make_query_log(space, session, [shown], agent=agent)
    with connection.cursor() as cursor:  # the statistics autovacuum keeps on a table that grew so
        cursor.execute("ANALYZE brain_querylog")
    turn = turn_log_create(
        agent=agent,
        session_id=session,
        turn_id="t1",
        user_prompt="Deploy staging.",
        assistant_response="I ran the database migrations, then restarted the web workers.",
    ).turn
    before = _querylog_rows_read()
    turn_score(turn_log_id=str(turn.pk), judge=ScriptedJudge(used={"migrations"}, name="trusted"))
    assert TurnLog.objects.get(pk=turn.pk).status == "scored"
    return _querylog_rows_read() - before


def test_scoring_a_turn_does_not_read_every_memory_call_of_its_session(space, agent_factory):
    """Attack: with a validated (trusted) judge, every judged item of a turn moves its thought's EMAs,
    at most once per showing; to count the showings, ``score_turn`` (``_once_per_showing``) reads every
    query-log row of the turn's session and parses its results. A session is the caller's to grow: an
    agent that alternates a memory call and a turn in one session (two cheap calls; the turn names
    nothing, so the request reads only the newest row) makes the shared worker read 1, 2, ... N rows:
    N² rows for N turns, and each turn's job slower than the last, ahead of every other space's jobs.

    Without the rule: one turn's job reads 6 query-log rows in a session of 6 memory calls, 2,001 in a session
    of 2,001 (the turn's request reads 5 in both).

    Rule (SPEC 1, 4.4): the work of one background job is bounded, not by how long its session has run:
    what the session was shown is what its newest SESSION_CALLS_READ memory calls returned."""
    agent = agent_factory("dev").agent
    trust("trusted")
    shown = store(space, "Staging deploys run the database migrations before the web workers restart.")

    short = _scoring_reads(space, agent, shown, earlier_calls=5)
    long = _scoring_reads(space, agent, shown, earlier_calls=2000)

    assert long <= SESSION_CALLS_READ + 5, f"one turn's scoring read {long} query-log rows (a 6-call session: {short})"
