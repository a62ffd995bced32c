"""A revoked or changed identity stops where it acts later, not only at the door (SPEC 6: the token fixes
the agent's identity; one agent's reports alone can't push a thought below the floor; the contributor a
source names is the registered name of the agent that wrote it). The doors themselves (REST, MCP over
HTTP, URL tokens, web sessions, human confirmations) are held in test_identity_changes_take_effect.py and
test_url_token_read_only.py; these are what acts in an agent's name after the door closed on it, or after
an operator renamed or replaced it: a queued scoring job, its past feedback, the names the brain copied."""

from __future__ import annotations

import pytest

from brain.choices import SuggestionStatus
from brain.models import CorrectionSuggestion, Thought
from brain.selectors import activity
from brain.services import pheromones
from quality import formulas
from quality.models import TurnLog
from quality.services import rollups
from quality.services.scoring import turn_score
from tests.quality_support import ScriptedJudge, make_query_log, make_thought, new_session
from tests.security.test_feedback_burial import scored_turn, turn

pytestmark = pytest.mark.django_db

FACT = "Staging deploys run the database migrations before the web workers restart."


def _deactivate(agent) -> None:
    agent.active = False
    agent.save()  # the admin's save


def _delete(agent) -> None:
    agent.delete()  # the admin's delete (allowed: it never moved a task, TransitionLog.agent is PROTECT)


# --- a scoring job queued before the revocation -------------------------------------------------------
@pytest.mark.usefixtures("enqueued")
@pytest.mark.parametrize("revoke", [_deactivate, _delete], ids=["deactivated", "deleted"])
def test_a_turn_scored_after_its_agent_was_revoked_moves_nothing(dev, space, revoke):
    """Attack: an agent steered by a prompt injection reports a shared thought contradicted
    (POST /api/v1/turns, accepted 202: the scoring is a Celery job, quality.jobs.score_turn). The operator
    notices and deactivates (or deletes) the agent before the worker gets to the job (a busy queue, a
    worker restart; rollup_daily re-enqueues lost turns hourly). The job runs anyway and acts in the
    revoked agent's name: the thought's contradiction_score goes from none to 0.3 and its effective
    confidence from 1.0 to SINGLE_AGENT_FLOOR (0.5, ranking x0.5), and a pending correction suggestion
    naming the revoked agent is raised (14 days unresolved, it flags the thought ``unverified``).
    quality.services.scoring.turn_score never looks at turn.agent.
    Instead: a turn whose agent is no longer active (or no longer exists) when it is scored moves no
    thought and raises no suggestion; the door that refused the agent's next call already stands for that."""
    target = make_thought(space, FACT)
    session = new_session()
    make_query_log(space, session, [target], agent=dev.agent)
    response = turn(dev, session, "t1", contradicted_ids=[str(target.id)])
    assert response.status_code == 202, response.json()
    turn_log_id = response.json()["turn_log_id"]

    revoke(dev.agent)
    assert dev.get("/api/v1/agents/me").status_code == 401  # the door is shut
    turn_score(turn_log_id=turn_log_id, judge=ScriptedJudge())  # what the queued job does

    target.refresh_from_db()
    assert (target.contradiction_score, target.effective_confidence) == (None, 1.0), (
        f"a revoked agent's queued turn moved the thought: contradiction_score {target.contradiction_score}, "
        f"effective confidence {target.effective_confidence}"
    )
    assert not CorrectionSuggestion.objects.filter(thought=target, status=SuggestionStatus.PENDING).exists()
    assert TurnLog.objects.filter(pk=turn_log_id).exists()  # the turn itself may stay, for the record


# --- a revoked agent's past feedback is no second witness ---------------------------------------------
@pytest.mark.usefixtures("enqueued")
@pytest.mark.parametrize(
    "field,turns", [("contradicted_ids", 6), ("used_ids", 8)], ids=["contradiction-floor", "use-ceiling"]
)
def test_a_deactivated_agents_past_reports_do_not_count_as_a_second_agent(space, agent_factory, field, turns):
    """Attack: an agent steered by a prompt injection reports a shared thought contradicted (used) turn
    after turn; the thought is held at SINGLE_AGENT_FLOOR (CEILING) because one agent's reports alone
    can't move it further (SPEC 6). The operator deactivates the agent. Its reports still count as one of
    the "two distinct agents" quality.services.scoring.thought_outcomes_apply asks for, with the EMA they
    built: one single report from any other agent then takes the thought from 0.5 to 0.0 (from 1.25 to
    1.48), on the word of one live agent once and a revoked one.
    Instead: only agents still active count towards the distinct agents the floor and the ceiling ask for,
    so a revoked identity corroborates nothing; one live agent's one report leaves the bound in place."""
    bad, other = agent_factory("dev", name="dev-bad"), agent_factory("qa", name="qa-1")
    target = make_thought(space, FACT)
    session = new_session()
    for n in range(turns):
        make_query_log(space, session, [target], agent=bad.agent)  # shown again each turn: one step each
        scored_turn(bad, session, f"t{n}", **{field: [str(target.id)]})
    target.refresh_from_db()
    held = formulas.SINGLE_AGENT_FLOOR if field == "contradicted_ids" else formulas.SINGLE_AGENT_CEILING
    assert target.effective_confidence == held

    _deactivate(bad.agent)
    theirs = new_session()
    make_query_log(space, theirs, [target], agent=other.agent)
    scored_turn(other, theirs, "t1", **{field: [str(target.id)]})

    target.refresh_from_db()
    assert target.effective_confidence == held, (
        f"a deactivated agent's reports plus one report of another moved the thought past the one-agent "
        f"bound: {target.effective_confidence}"
    )


# --- highways: "used by at least two other agents" -----------------------------------------------------
def _ask(client, prompt: str) -> dict:
    response = client.post("/api/v1/memory", {"prompt": prompt, "contribute": False}, format="json")
    assert response.status_code == 200, response.content
    pheromones.reinforcement_fold_all()  # what the worker's minute job does
    return response.json()


def test_a_renamed_agent_is_not_two_agents_on_a_highway(space, agent_factory, thought_factory, fake_embedder):
    """Attack: one agent (steered by a prompt injection, or just busy) reads the same thought over and
    over; it is no highway, because a highway needs HIGHWAY_MIN_AGENTS (2) distinct agents besides the
    reader (SPEC 2.6; the session-start hook injects highways as "thoughts at least two other agents
    used"). An operator renames the agent (a clearer name; same agent, same token). Its next read adds
    its new name to ``accessed_by`` next to the old one (brain.services.pheromones' fold writes names,
    brain.selectors.activity counts names): the thought is now a highway with 3 "agents" for any other
    agent, and on the space's highway list (thought_highways), on one agent's traffic.
    Instead: distinct agents are distinct identities (the agent's id), as the quality floor already
    counts them: a rename changes nothing."""
    thought = thought_factory(FACT)
    loner, reader = agent_factory("dev", name="dev-1"), agent_factory("qa", name="qa-1")
    for _ in range(3):
        _ask(loner, FACT)
    assert str(thought.id) not in {h["thought_id"] for h in activity.thought_highways(space=space)}

    loner.agent.name = "dev-1-renamed"
    loner.agent.save()  # the admin's save
    _ask(loner, FACT)
    thought.refresh_from_db()
    listed = {h["thought_id"]: h["agents"] for h in activity.thought_highways(space=space)}
    assert str(thought.id) not in listed, (
        f"one agent, renamed once, is on the space's highway list: accessed_by {thought.accessed_by}, {listed}"
    )

    seen = _ask(reader, FACT)  # another agent: it sees a highway only if two *other* agents used it
    nearby = {h["thought_id"]: h["agents"] for h in seen["result"]["highways_nearby"]}
    thought.refresh_from_db()
    assert str(thought.id) not in nearby, (
        f"one agent, renamed once, is two agents on a highway: accessed_by {thought.accessed_by}, {nearby}"
    )


# --- the contributor a memory answer names ------------------------------------------------------------
def test_a_memory_source_names_its_agent_not_whoever_holds_its_old_name(space, agent_factory, fake_embedder):
    """Attack: agent dev-1 contributes a fact. The operator retires it (renames it dev-1-retired, so the
    name is free) and gives the name dev-1 to a new agent. Every memory answer now presents the retired
    agent's thought as the new dev-1's: ``result.sources[].contributor`` (and the answer's "Best (...,
    dev-1)" sentence, and what the prompt hook injects) is the name copied into
    ``Thought.contributor_name`` when it was stored (brain.services.memory.response.source_render), while
    GET /api/v1/thoughts already answers "dev-1-retired" for the same thought. A renamed agent also shows
    as two contributors: its older thoughts under the old name, its newer ones under the new.
    Instead: a source's contributor is the current registered name of the agent that contributed it
    (SPEC 2.2: "the registered name of the contributing agent"), as the thoughts API answers."""
    author, asker = agent_factory("dev", name="dev-1"), agent_factory("qa", name="qa-1")
    stored = author.post("/api/v1/memory", {"prompt": FACT}, format="json").json()["trace"]["thought_id"]
    assert stored

    author.agent.name = "dev-1-retired"
    author.agent.save()  # the admin's save
    agent_factory("dev", name="dev-1")  # a new agent takes the free name

    listed = {t["thought_id"]: t["contributor"] for t in asker.get("/api/v1/thoughts").json()["results"]}
    assert listed[stored] == "dev-1-retired"  # the thoughts API names the agent as it is now
    sources = asker.post("/api/v1/memory", {"prompt": FACT, "contribute": False}, format="json").json()
    named = {s["thought_id"]: s["contributor"] for s in sources["result"]["sources"]}
    assert named.get(stored) == "dev-1-retired", (
        f"the memory answer names {named.get(stored)!r} (now another agent) as the author of dev-1-retired's thought"
    )
    assert Thought.objects.get(pk=stored).agent_id == author.agent.pk


# --- an agent's quality record ------------------------------------------------------------------------
@pytest.mark.usefixtures("enqueued")
def test_an_agents_quality_record_stays_with_the_agent_not_its_old_name(space, agent_factory):
    """Attack: agent dev-1 contradicts what it was shown, turn after turn (its contradiction rate is
    the operator's sign that something steers it). The operator retires it (renames it dev-1-retired)
    and gives the name dev-1 to a fresh agent. GET /api/v1/quality/metrics?agent=dev-1 (and the
    dashboard) now charges the fresh agent with the retired one's turns and 100% contradiction rate,
    while ?agent=dev-1-retired shows no turns at all: the rollups are keyed by the name copied into
    TurnLog.agent_name at each turn (quality.services.rollups), and the metrics look the agent up by its
    current name. A plain rename likewise hides an agent's whole record before the rename.
    Instead: an agent's metrics are its own turns (by the agent's id), under whatever name it has now;
    a new agent starts with none."""
    old = agent_factory("dev", name="dev-1")
    target = make_thought(space, FACT)
    session = new_session()
    for n in range(3):
        make_query_log(space, session, [target], agent=old.agent)
        scored_turn(old, session, f"t{n}", contradicted_ids=[str(target.id)])

    old.agent.name = "dev-1-retired"
    old.agent.save()  # the admin's save
    fresh = agent_factory("dev", name="dev-1")
    for day in rollups.rollup_recompute_days():
        rollups.quality_rollup_day(day=day)  # the hourly job

    def record(name: str) -> tuple[int, int]:
        response = fresh.get("/api/v1/quality/metrics", {"agent": name, "days": 7})
        assert response.status_code == 200, response.content
        body = response.json()
        return body["turns"], body["metrics"]["contradiction_rate"]["numerator"]

    assert record("dev-1") == (0, 0), f"the fresh dev-1 is charged with the retired agent's turns: {record('dev-1')}"
    assert record("dev-1-retired") == (3, 1), record("dev-1-retired")  # one thought, once per session and day
