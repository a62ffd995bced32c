"""No one agent can bury shared knowledge (SPEC 6; SPEC 2.3, 4.4, 4.5): what ONE agent, using only its own
token, can do to push a teammate's live, correct thought down or out of what other agents get.

Each test is an attack measured where it lands: the victim's answer to a question the teammate's thought
answers (its place in ``POST /api/v1/memory``, with and without ``inject: true``), before and after. What
is covered elsewhere is not repeated here: feedback on thoughts never shown, the single-agent floor and
ceiling themselves (tests/security/test_feedback_burial.py), unrelated or own-decoy lineage
(test_evolution_abuse_holds.py, test_ranking_gaming_holds.py), corrections of corrections
(test_correction_authority_holds.py), twelve paraphrases on one page (test_memory_poisoning_holds.py).

The ranking tests use the real embedding model (what a search serves is the claim); the quality-loop tests
use the bag-of-words fake, where only the loop's arithmetic is the point.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from brain.embedding import embed_many
from brain.models import Thought
from quality import formulas
from quality.models import ConfidenceChange, TurnLog
from quality.services.scoring import turn_score
from tests.quality_support import ScriptedJudge, new_session
from tests.security.support import import_post, memory_answer, remember
from tests.security.test_memory_poisoning_holds import CORPUS

pytestmark = pytest.mark.django_db

TRUTH = "The staging database password rotates every 90 days; the new one is in Vault under staging/db."
QUESTION = "Where do I find the staging database password?"
#: How many notes the attacker writes: past the search's candidate pools (``search.MIN_POOL`` = 30 rows a
#: side for a page of up to 10), with a margin.
FLOOD = 40


def flood_note(n: int) -> str:
    """One of the attacker's notes: the question's words, a wrong pointer, a number so that no two are one
    fact (``one row per fact``)."""
    return f"Where to find the staging database password, note {n}: the staging database password is in #ops."


def sources(client, **fields) -> list[dict]:
    return memory_answer(client, prompt=QUESTION, contribute=False, limit=5, **fields)["result"]["sources"]


def place(page: list[dict], thought_id: str) -> int | None:
    return next((i for i, s in enumerate(page) if s["thought_id"] == thought_id), None)


def summary(page: list[dict]) -> list[tuple]:
    return [(s["contributor"], s["content_preview"][:30], round(s["score"], 3), s["quality_flags"]) for s in page]


@pytest.fixture
def team(agent_factory, thought_factory):
    """A space holding the team's ~100 ordinary thoughts (real vectors) and ``honest``'s answer to QUESTION,
    which is the victim's first source and injected. Returns (honest, mallory, victim, the answer's id)."""
    for text, vector in zip(CORPUS, embed_many(CORPUS), strict=True):
        thought_factory(text, embedding=vector)
    honest = agent_factory("dev", name="honest")
    mallory = agent_factory("dev", name="mallory")
    victim = agent_factory("qa", name="victim")
    truth = remember(honest, TRUTH)
    assert place(sources(victim), truth) == 0
    assert place(sources(victim, inject=True), truth) == 0
    return honest, mallory, victim, truth


# --- the candidate pools ------------------------------------------------------------------------------
def assert_still_answered(victim, truth: str) -> None:
    page = sources(victim)
    assert place(page, truth) == 0, f"the teammate's answer is gone from the victim's top 5: {summary(page)}"
    injected = sources(victim, inject=True)
    assert place(injected, truth) is not None, f"the teammate's answer is no longer injected: {summary(injected)}"
    assert not [s for s in injected if "retracted" in s["quality_flags"]], summary(injected)


def test_retracted_notes_do_not_push_another_agents_thought_out_of_the_search(team):
    """Attack: mallory stores FLOOD notes that echo the question (each pointing to the wrong place), then
    retracts every one, "stored by mistake". Retracted thoughts stay for audit and are ranked "below every
    live thought", so nothing she wrote seems to be left in anyone's answers. But the search's two candidate
    pools (the dense side's 30 nearest, the lexical side's 30 best by BM25: ``brain/selectors/search.py``
    ``_SEARCH_SQL`` ``dense`` and ``_TERMS_LEXICAL_SQL`` ``lexical``) take retracted and superseded thoughts
    like live ones: her 40 withdrawn notes fill both, and honest's answer is never fetched.

    Without the rule, for "Where do I find the staging database password?" (limit 5): before, honest's answer is
    first (score 0.65, relevance 0.71) and the only thing ``inject: true`` hands over; after, the top 5 is
    five of mallory's RETRACTED notes (scores 0.58-0.59) and so is the injection (relevance 0.32-0.59: the
    threshold keeps what is retracted, since no live source is left to outrank it). 25 notes leave the answer
    first; past the pools' 30 rows it is gone. Nothing but a search for ``contributor=mallory&superseded=true``
    shows why.

    Rule: a withdrawn thought takes no place a live one needs: the pools are filled with live thoughts
    first (retracted ones are fetched only after them, or not at all), so honest's answer stays first, and
    the injection never hands over a retracted thought (it has no replacement to come with).
    """
    _, mallory, victim, truth = team
    notes = [remember(mallory, flood_note(n)) for n in range(FLOOD)]
    for note in notes:
        response = mallory.post(f"/api/v1/thoughts/{note}/retract", {"reason": "stored by mistake"}, format="json")
        assert response.status_code == 200, response.content

    assert_still_answered(victim, truth)


def test_one_import_of_retracted_notes_does_not_push_another_agents_thought_out_of_the_search(team):
    """Attack: the same, in ONE request. ``POST /api/v1/thoughts/import`` stores an agent's own thoughts,
    and "a retracted item is sent as a retraction leaves it" (``quality_flags: ["retracted"]``, superseded
    true): mallory imports FLOOD notes already retracted, embedded by the server from their text. No memory
    call, no answer ever showed them, none is live: measured, honest's answer leaves the victim's top 5 and
    its injection, which now hand over five of mallory's retracted notes (scores 0.65, relevance 0.42-0.68).

    Rule: as above; a batch of withdrawn notes takes no place in the search a live thought needs."""
    _, mallory, victim, truth = team
    items = [{"content": flood_note(n), "superseded": True, "quality_flags": ["retracted"]} for n in range(FLOOD)]
    response = import_post(mallory, items)
    assert response.status_code in (200, 201), response.content[:2000]
    assert Thought.objects.filter(agent=mallory.agent, superseded=True).count() == FLOOD

    assert_still_answered(victim, truth)


def test_one_agents_flood_past_the_candidate_pools_does_not_push_another_agents_thought_off_the_page(team):
    """Attack: mallory stores FLOOD notes that echo the question and keeps them live. Ranking's
    ``SAME_CONTRIBUTOR_PLACES`` rule (one contributor's close rewordings take at most two places "while
    candidates of several contributors can still be placed") held for twelve copies
    (test_memory_poisoning_holds.py). It applies to the candidates the search fetched; past the pools' 30
    rows a side, honest's answer is not fetched at all, every candidate is mallory's, the page counts as a
    one-author space and the cap is off.

    Without the rule, for "Where do I find the staging database password?" (limit 5): before, honest's answer first
    (0.65, relevance 0.71); after, the top 5 and the injection are five of mallory's notes (0.83-0.84),
    honest's answer nowhere.

    Rule (SPEC 6; ranking.SAME_CONTRIBUTOR_PLACES): one contributor's notes can't crowd the others out of the
    candidate pools either (the pools keep room for other contributors, e.g. a bounded share per
    contributor, or a second fetch without the dominant one): honest's answer stays first and is injected.
    """
    _, mallory, victim, truth = team
    for n in range(FLOOD):
        remember(mallory, flood_note(n))

    page = sources(victim)
    assert place(page, truth) is not None, f"the teammate's answer is off the victim's top 5: {summary(page)}"
    assert sum(s["contributor"] == "mallory" for s in page) <= 2, summary(page)
    injected = sources(victim, inject=True)
    assert place(injected, truth) is not None, f"the teammate's answer is no longer injected: {summary(injected)}"


# --- the quality loop -----------------------------------------------------------------------------------
QA_QUESTION = "How often does the staging database password rotate?"
QA_TRUTH = "The staging database password rotates every 90 days and the new one is stored in Vault."
QA_OTHER = "Staging database credentials for the reporting replica are requested from the ops team by ticket."


def shown_then_reported(client, session: str, turn_id: str, **feedback) -> list[dict]:
    """A memory call of ``client`` in ``session`` (what its turn is shown), then its turn with ``feedback``,
    scored (explicit feedback wins over the judge). Returns the call's sources."""
    page = memory_answer(client, prompt=QA_QUESTION, contribute=False, session_id=session)["result"]["sources"]
    response = client.post(
        "/api/v1/turns",
        {
            "session_id": session,
            "turn_id": turn_id,
            "user_prompt": QA_QUESTION,
            "assistant_response": "Checked the staging password.",
            **feedback,
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    turn_score(turn_log_id=response.json()["turn_log_id"], judge=ScriptedJudge())
    return page


@pytest.mark.usefixtures("enqueued", "fake_embedder")
def test_one_old_report_of_another_agent_does_not_hand_one_agent_the_power_to_bury(agent_factory):
    """Attack: months ago agent ``qa-old`` reported honest's thought T contradicted once (a slip: T is
    right); ``qa-user`` then used T five times, which took it back to 1.25. Today mallory, alone, reports
    T contradicted six times (each after a memory call that showed it to her session). The floor counts the
    distinct agents that EVER reported T contradicted (``quality/services/scoring.py``, the
    ``ConfidenceChange`` rows, no time bound, no weight): qa-old's one outweighed report makes two, the floor
    is off, and mallory's reports alone take T from 1.25 to 0.0.

    Without the rule: without qa-old's report, mallory's six reports stop at 0.5 (the floor); with it, 0.0: T's score
    is multiplied by 0 in every agent's ranking, last on the page, below a thought that barely answers the
    question. One agent's reports did that; the other agent's single report from 90 days ago, since
    outweighed by five uses, took it to 0.5 at the time and not lower.

    Rule (SPEC 6: "one agent's reports alone can't push a thought below a documented floor"): going below
    the floor takes contradictions of two agents that still count: corroboration that the EMA has since
    outweighed (or that is older than the EMA's memory, or the metrics' window) doesn't break the floor for
    a third party. E.g. the floor holds unless the confidence computed without the heaviest contradicting
    agent's reports is below it too.
    """
    honest, mallory = agent_factory("dev", name="honest"), agent_factory("dev", name="mallory")
    old, user = agent_factory("qa", name="qa-old"), agent_factory("qa", name="qa-user")
    victim = agent_factory("liaison", name="victim")
    truth = remember(honest, QA_TRUTH)
    other = remember(agent_factory("dev", name="other"), QA_OTHER)
    before = memory_answer(victim, prompt=QA_QUESTION, contribute=False)["result"]["sources"]
    assert place(before, truth) == 0 and place(before, other) is not None

    shown_then_reported(old, new_session(), "t1", contradicted_ids=[truth])
    long_ago = timezone.now() - dt.timedelta(days=90)
    ConfidenceChange.objects.filter(agent=old.agent).update(changed_at=long_ago)
    TurnLog.objects.filter(agent=old.agent).update(created_at=long_ago)
    session = new_session()
    for n in range(5):
        shown_then_reported(user, session, f"u{n}", used_ids=[truth])
    assert Thought.objects.get(pk=truth).effective_confidence == formulas.SINGLE_AGENT_CEILING

    session = new_session()
    for n in range(6):
        shown_then_reported(mallory, session, f"m{n}", contradicted_ids=[truth])

    confidence = Thought.objects.get(pk=truth).effective_confidence
    after = memory_answer(victim, prompt=QA_QUESTION, contribute=False)["result"]["sources"]
    assert confidence >= formulas.SINGLE_AGENT_FLOOR, (
        f"one agent's reports took T to {confidence:.2f}; the page now: {summary(after)}"
    )
    assert place(after, truth) < place(after, other), summary(after)


@pytest.mark.usefixtures("enqueued", "fake_embedder")
@pytest.mark.parametrize("how", ["refines", "retract_and_resend"])
def test_an_agent_cannot_wipe_the_contradictions_of_its_claim_by_storing_it_again(agent_factory, how):
    """Attack: mallory's claim (L, the wrong place for the password, worded to match the question: it ranks
    above honest's answer T) was reported contradicted by two agents, each from what its own session was
    shown: L's effective confidence fell to 0.0 and T answers first again; a correction suggestion on L
    waits for a reviewer. Mallory then stores L again: as a refinement of L with one word changed
    (``refines``), or by retracting L and sending its text again ("a repeat of a superseded thought is
    stored anew"). The new row starts with no history (confidence 1.0), the suggestion on L is closed as
    ``superseded`` (which the discovery metric counts as resolved), and the claim is back above T for every
    agent.

    Without the rule: before the reports, L first (score 0.71), T second (0.28); after them, T first, L last (0.0);
    after the re-store, the claim first again at full weight (0.69), T second, the reviewers' queue empty.

    Rule (SPEC 6 "corrections, not votes, supersede"; SPEC 4.4): what the team reported about a claim stays
    with it when its author stores it again: a refinement (or a re-sent copy) of one's own contradicted
    thought inherits its EMAs and confidence (and its pending suggestions), so T keeps its place; only a
    correction starts a fact afresh.
    """
    honest, mallory = agent_factory("dev", name="honest"), agent_factory("dev", name="mallory")
    victim = agent_factory("liaison", name="victim")
    truth = remember(honest, QA_TRUTH)
    claim_text = "How often does the staging database password rotate? It rotates yearly; it is pinned in #ops."
    claim = remember(mallory, claim_text)
    assert place(sources_for(victim), claim) < place(sources_for(victim), truth)
    for name in ("qa-1", "qa-2"):
        shown_then_reported(agent_factory("qa", name=name), new_session(), "t1", contradicted_ids=[claim])
    assert Thought.objects.get(pk=claim).effective_confidence < formulas.SINGLE_AGENT_FLOOR
    assert place(sources_for(victim), truth) == 0

    if how == "refines":
        again = remember(mallory, claim_text.replace("pinned", "posted"), refines=claim)
    else:
        response = mallory.post(f"/api/v1/thoughts/{claim}/retract", {"reason": "stored by mistake"}, format="json")
        assert response.status_code == 200, response.content
        again = remember(mallory, claim_text)
        assert again != claim

    page = sources_for(victim)
    confidence = Thought.objects.get(pk=again).effective_confidence
    assert place(page, truth) == 0, f"the claim is back above T at confidence {confidence}: {summary(page)}"
    if how == "refines":
        # The two agents' reports about the earlier version still count for its floor: the next report
        # about the new version (a third agent's use) doesn't lift it back to the one-agent floor.
        shown_then_reported(agent_factory("qa", name="qa-3"), new_session(), "t1", used_ids=[again])
        assert ConfidenceChange.objects.filter(thought_id=again, used=True).exists(), "the use did not count"
        assert Thought.objects.get(pk=again).effective_confidence < formulas.SINGLE_AGENT_FLOOR


def sources_for(client) -> list[dict]:
    return memory_answer(client, prompt=QA_QUESTION, contribute=False)["result"]["sources"]
