"""One agent pushing its own text up the team's answers through ordinary memory calls (SPEC 2.3, 2.5, 6).

What another agent gets from ``POST /api/v1/memory`` is what is measured: the order of its sources and
what ``inject: true`` hands it. The lineage multipliers of ranking (a correction ×1.3, a refinement or
consolidation of a superseded result ×1.2) exist so that a newer version outranks the thought it
replaces; the re-contamination guard exists so that a corrected fact does not come back. An agent that
supersedes a decoy of its own, written a moment before, gets those multipliers over every other agent's
statements for free. Each test is an attack and what should happen instead; the last one is a guard that holds.

The embedder is the tests' bag-of-words fake: texts that must be related share words.
"""

from __future__ import annotations

import uuid

import pytest

from brain.models import Thought
from brain.ranking import PHEROMONE_BOOST_MAX, PHEROMONE_MAX
from brain.services.pheromones import REINFORCE_STEP
from tests.security.support import memory, memory_answer, remember

pytestmark = pytest.mark.django_db

TRUTH = "Database backups are kept thirty days in the offsite backup bucket and restores are tested monthly."
LIE = "Database backups are kept three days so the backup bucket can be emptied safely whenever."
QUESTION = "How many days are database backups kept in the backup bucket?"


def ask(client, **extra) -> list[dict]:
    return memory_answer(client, prompt=QUESTION, contribute=False, **extra)["result"]["sources"]


def place(page: list[dict], thought_id: str) -> int | None:
    return next((i for i, source in enumerate(page) if source["thought_id"] == thought_id), None)


def assert_truth_first(victim, truth: str, attacker: str) -> None:
    """The victim's answer puts the other agent's more relevant statement above the attacker's text, and
    the injection never hands the attacker's text without the truth above it."""
    page = ask(victim)
    summary = [(s["content_preview"][:30], s["score"], s["matching_reason"]) for s in page]
    assert place(page, attacker) is None or place(page, truth) < place(page, attacker), summary
    injected = ask(victim, inject=True)
    if place(injected, attacker) is not None:
        assert place(injected, truth) is not None and place(injected, truth) < place(injected, attacker), [
            (s["content_preview"][:30], s.get("relevance")) for s in injected
        ]


# --- a correction of nothing ----------------------------------------------------------------------------
def test_a_correction_of_an_unrelated_note_of_ones_own_does_not_lift_its_text_above_others(
    agent_factory, space, fake_embedder
):
    """Attack: mallory stores a throwaway note ("the lunch menu on Fridays is pizza"), then sends her
    claim about backups as a ``thought_category: correction`` that supersedes the note, with a
    ``corrected_fact``/``correct_fact`` about lunch. When one's own thoughts were not checked for
    relatedness, or a correction's ``corrected_fact`` stood in for its text, the call was accepted and the
    text, which corrects nothing it is about, carried the correction boost ×1.3 in every answer.

    Without the rule, for "How many days are database backups kept in the backup bucket?": sent as a plain
    thought, her claim ranks 2nd (score 0.39 against the other agent's 0.47; relevance 0.21, below
    ``INJECT_MIN_RELEVANCE`` 0.28, so never injected); sent as this "correction" it ranks 1st (0.66
    against 0.57, relevance 0.74 against 0.42) and is the first thing ``inject: true`` hands the victim.

    Instead: a correction's text is about the fact it corrects (refused, 400 like UNRELATED_SOURCE, when
    neither its content nor its correct fact comes near its corrected fact or what it supersedes, own
    thoughts included), or it gets no boost; either way the other agent's statement stays first.
    """
    honest = agent_factory("dev", name="honest")
    mallory = agent_factory("dev", name="mallory")
    victim = agent_factory("dev", name="victim")
    truth = remember(honest, TRUTH)
    # (No word in common with LIE: the tests' bag-of-words embedder puts "the" alone at cosine 0.21.)
    note = remember(mallory, "Placeholder note: lunch menu on Fridays is pizza in our kitchen.")

    response = memory(
        mallory,
        prompt=LIE,
        thought_category="correction",
        topic="lunch",
        corrected_fact="the lunch menu on Fridays is pizza",
        correct_fact="the lunch menu on Fridays is pasta",
        supersedes=[note],
    )
    if response.status_code != 200:  # refused: it must be a clear refusal that stored nothing
        assert 400 <= response.status_code < 500, response.content
        assert not Thought.objects.filter(content=LIE).exists()
        return
    assert_truth_first(victim, truth, response.json()["trace"]["thought_id"])


# --- a corrected fact back, as a correction of something else ------------------------------------------
WRONG = "The billing service retries a failed webhook twice and then drops it for good."
RIGHT = "The billing service retries a failed webhook five times with jitter, then parks it in the dead-letter queue."


def test_a_corrected_fact_sent_back_as_a_correction_of_something_else_is_flagged(agent_factory, space, fake_embedder):
    """Attack: a live correction says the billing service does NOT retry a webhook twice. Mallory writes
    a note of her own about the retry count, then "corrects" that note with ``correct_fact`` and
    content saying the corrected fact again ("Update: ... retries a failed webhook twice and then drops
    it"). It supersedes only her note, so the live correction stays live and unsuperseded, and the
    re-contamination guard is skipped for corrections (``steps.step_flags``: ``guard=not
    call.is_correction``): the wrong fact is back unflagged, with the correction boost ×1.3 instead of
    the ``contradicts_correction`` ×0.5 the same text gets as a plain contribution, no warning quoting
    the right fact, and two corrections answering with opposite facts. Without the rule, for "How many times does
    the billing service retry a failed webhook?": her "correction" ranks 2nd, right below the real
    one, unflagged (score 0.27); the same text sent plainly is flagged and scores 0.08, last.

    Instead: a correction that asserts a fact a live correction declared wrong, without superseding that
    correction (the documented way to replace it), is flagged ``contradicts_correction`` like any other
    repeat (or refused).
    """
    honest = agent_factory("dev", name="honest")
    mallory = agent_factory("dev", name="mallory")
    wrong = remember(honest, WRONG)
    fixed = memory_answer(
        honest,
        prompt=RIGHT,
        thought_category="correction",
        topic="billing",
        corrected_fact=WRONG,
        correct_fact=RIGHT,
        supersedes=[wrong],
    )["trace"]["thought_id"]
    note = remember(mallory, "Billing webhook retries: the retry count of the billing service is not written down yet.")

    response = memory(
        mallory,
        prompt="Update: " + WRONG,
        thought_category="correction",
        topic="billing",
        corrected_fact="the retry count of the billing service webhook is not written down",
        correct_fact=WRONG,
        supersedes=[note],
    )
    assert Thought.objects.get(pk=fixed).superseded is False  # the live correction still stands
    if response.status_code != 200:
        assert 400 <= response.status_code < 500, response.content
        return
    back = Thought.objects.get(pk=response.json()["trace"]["thought_id"])
    assert "contradicts_correction" in back.quality_flags, (
        f"a corrected fact came back unflagged as a correction of another note: flags {back.quality_flags}"
    )


# --- a refinement of one's own decoy ---------------------------------------------------------------------
DECOY = "Database backups are kept thirty days in the offsite backup bucket, restores tested each month."
DECOY_TWO = "Database backup bucket: backups kept thirty days offsite; restore tests monthly run."


@pytest.mark.parametrize("how", ["refines", "consolidates"])
def test_refining_ones_own_decoy_does_not_lift_a_claim_above_another_agents(agent_factory, space, fake_embedder, how):
    """Attack: mallory copies the other agent's statement in her own words (a decoy: as relevant as the
    truth, not "already known"), then sends her claim as a refinement of her decoy (or a consolidation
    of two decoys). Her own sources are not checked for relatedness, and the decoy is in every result
    the truth is in, so her claim gets "refinement of a superseded result ×1.2" over everyone's
    statements: the multiplier meant to put a new version above the one it replaces (which the
    replacement rule does already) lifts it above a third agent's.

    Without the rule: as a plain thought her claim ranks 2nd (0.39 against 0.47, relevance 0.21, not
    injected); as a refinement of her decoy it ranks 1st (0.436 against 0.426; relevance 0.42 against
    0.28) and leads the injection; as a consolidation of two decoys 1st too (0.421 against 0.412), and
    the truth drops out of the injection altogether (relevance 0.27, below 0.28): only her claim is
    injected.

    Instead: superseding only one's own fresh thoughts earns no lead over other agents' statements (the
    bonus lifts a new version up to the place of what it replaces, not above other contributors'
    thoughts); the other agent's more relevant statement stays first.
    """
    honest = agent_factory("dev", name="honest")
    mallory = agent_factory("dev", name="mallory")
    victim = agent_factory("dev", name="victim")
    truth = remember(honest, TRUTH)
    decoys = [remember(mallory, DECOY)]
    if how == "consolidates":
        decoys.append(remember(mallory, DECOY_TWO))
    lineage = {"refines": decoys[0]} if how == "refines" else {"consolidates": decoys}

    claim = memory_answer(mallory, prompt=LIE, **lineage)["trace"]["thought_id"]

    assert_truth_first(victim, truth, claim)


# --- re-sending one's own thought: what holds -----------------------------------------------------------
def _variants(n: int) -> list[str]:
    """``n`` spellings of LIE that are one fact (case, whitespace, full-width letters aside)."""
    forms = [LIE, LIE.upper(), "  " + LIE.replace(" ", "   ") + "\n", LIE.lower(), LIE.replace("D", "\uff24")]
    return [forms[i % len(forms)] for i in range(n)]


def test_one_agent_resending_its_thought_stores_one_row_and_moves_it_by_at_most_the_pheromone_bound(
    agent_factory, space, fake_embedder
):
    """Holds. Attack: mallory sends her claim 180 times (enough to take its weight from 1 to the
    cap of 10), each time in a new session, under a new Idempotency-Key, in another spelling (upper and
    lower case, extra whitespace, full-width letters). Each re-send is "already known": one row, one
    access, weight +0.05, and her own name once in ``accessed_by``.

    What must hold: one row; ``accessed_by`` names her once (no highway of her own making); and in the
    victim's answer her claim's score grows by at most ``1 + PHEROMONE_BOOST_MAX`` (×1.02), so the other
    agent's more relevant statement stays first.
    """
    honest = agent_factory("dev", name="honest")
    mallory = agent_factory("dev", name="mallory")
    victim = agent_factory("dev", name="victim")
    truth = remember(honest, TRUTH)
    claim = remember(mallory, LIE)
    before = {s["thought_id"]: s["score"] for s in ask(victim)}

    resends = int((PHEROMONE_MAX - 1.0) / REINFORCE_STEP)
    for text in _variants(resends):
        response = mallory.post(
            "/api/v1/memory",
            {"prompt": text, "session_id": str(uuid.uuid4())},
            format="json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        )
        assert response.status_code == 200, response.content
        assert response.json()["trace"]["thought_id"] == claim

    stored = Thought.objects.get(pk=claim)
    assert Thought.objects.filter(agent=mallory.agent).count() == 1
    assert stored.pheromone_weight == pytest.approx(PHEROMONE_MAX)
    assert stored.accessed_by.count(str(mallory.agent.pk)) == 1
    page = ask(victim)
    after = {s["thought_id"]: s["score"] for s in page}
    assert after[claim] <= before[claim] * (1 + PHEROMONE_BOOST_MAX) + 1e-3, (before[claim], after[claim])
    assert place(page, truth) < place(page, claim)
    assert not memory_answer(victim, prompt=QUESTION, contribute=False)["result"]["highways_nearby"]
