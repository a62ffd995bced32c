"""Attacks on the authority of a correction (SPEC 2.5; SPEC 6: "corrections, not votes, supersede", and
every write path holds whatever the caller sends: an agent may be steered by a prompt injection).

A correction is replaced only by another correction. A refinement or consolidation that names one
(``refines``, ``consolidates``, or ``supersedes`` on a thought that is not a correction) is refused
with 409 CORRECTION_NEEDS_CORRECTION, saying what to send instead, and changes nothing; a refinement
of anything else that repeats a corrected fact is flagged like any contribution.

These tests use the real embedding model: they claim that the correction, not the wrong fact, is
what a search serves first.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from brain.models import CorrectionSuggestion, QueryLog, Thought
from tests.security.support import remember

pytestmark = pytest.mark.django_db

MEMORY = "/api/v1/memory"
WRONG = "The billing service retries a failed webhook twice and then drops it for good."
RIGHT = "The billing service retries a failed webhook five times with jitter, then parks it in the dead-letter queue."
#: What an injected agent sends: the wrong fact again, worded as an update.
RESTATED = "Update: the billing service retries a failed webhook twice and then drops it for good."
QUESTION = "How many times does the billing service retry a failed webhook?"


def correct(client, thought_id: str, **fields) -> str:
    body = {"correct_fact": RIGHT, "source_ref": {"type": "url", "value": "billing-runbook"}, **fields}
    response = client.post(f"/api/v1/thoughts/{thought_id}/correct", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["correction"]["thought_id"]


def ask(client, prompt: str = QUESTION) -> list[dict]:
    response = client.post(MEMORY, {"prompt": prompt, "contribute": False}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["result"]["sources"]


def brain_state() -> tuple:
    """Everything a refused write could have changed: every thought's lineage, weight, flags and
    accesses, the query log (a refused call logs no query) and the suggestions."""
    thoughts = sorted(
        Thought.objects.values_list(
            "id",
            "superseded",
            "refined_by_id",
            "superseded_by_id",
            "pheromone_weight",
            "quality_flags",
            "access_count",
            "contradicted_by_id",
        )
    )
    return thoughts, QueryLog.objects.count(), CorrectionSuggestion.objects.count()


@pytest.fixture
def corrected(agent_factory, space):
    """Agent ``author`` stored the wrong fact W, agent ``reviewer`` corrected it with C; ``other`` is an
    unrelated live thought of the same area. Returns (attacker client, W, C, other)."""
    author = agent_factory("dev", name="author")
    reviewer = agent_factory("qa", name="reviewer")
    wrong = remember(author, WRONG)
    correction = correct(reviewer, wrong)
    other = remember(author, "Billing webhooks are signed with HMAC-SHA256; the secret rotates every quarter.")
    attacker = agent_factory("dev", name="attacker")
    return attacker, wrong, correction, other


@pytest.mark.parametrize(
    "how",
    ["refines", "consolidates", "supersedes", "supersedes_several", "categorized_refines"],
)
def test_a_refinement_or_consolidation_can_not_replace_a_correction(corrected, how):
    """Attack: agent ``attacker`` (steered by a prompt injection) sends the wrong fact again as a
    refinement of the correction C (or a consolidation of C with another thought, or ``supersedes``
    C on a thought that is not a correction, which the endpoint reads as ``refines``). C became
    superseded (×0.7, out of the search's correction scan) and the refinement, its "live
    replacement", was lifted above it: the wrong fact was served first, as the current version of
    the correction, flagged but ranked above C.

    Expected: 409 CORRECTION_NEEDS_CORRECTION whose message names C and says what to send instead
    (a correction superseding C); nothing changes; C stays live and answers first."""
    attacker, wrong, correction, other = corrected
    fields = {
        "refines": {"refines": correction},
        "consolidates": {"consolidates": [other, correction]},
        "supersedes": {"supersedes": [correction]},
        "supersedes_several": {"supersedes": [other, correction]},
        "categorized_refines": {
            "refines": correction,
            "thought_category": "operational_learning",
            "topic": "billing",
        },
    }[how]
    before = brain_state()

    response = attacker.post(MEMORY, {"prompt": RESTATED, **fields}, format="json")

    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "CORRECTION_NEEDS_CORRECTION"
    assert correction in error["message"]
    assert '"thought_category": "correction"' in error["message"]
    assert f'"supersedes": ["{correction}"]' in error["message"]
    assert f"/api/v1/thoughts/{correction}/correct" in error["message"]
    assert error["corrections"] == [correction]
    assert brain_state() == before

    sources = ask(attacker)
    assert sources[0]["thought_id"] == correction and not sources[0]["superseded"]


def test_a_correction_of_the_correction_is_the_way_to_replace_it(corrected, agent_factory):
    """What the refusal says to send instead works: a correction whose ``supersedes`` names C replaces
    C (C superseded by it, ranked below it) and guards the fact it corrects from then on."""
    attacker, wrong, correction, other = corrected
    refused = attacker.post(MEMORY, {"prompt": RESTATED, "refines": correction}, format="json")
    assert refused.status_code == 409

    better = (
        "The billing service retries a failed webhook five times with exponential backoff and jitter, then parks it "
        "in the dead-letter queue for a day."
    )
    response = attacker.post(
        MEMORY,
        {
            "prompt": f"CORRECTION: {better}",
            "thought_category": "correction",
            "topic": "billing",
            "corrected_fact": WRONG,
            "correct_fact": better,
            "supersedes": [correction],
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    replacement = response.json()["trace"]["thought_id"]
    old = Thought.objects.get(pk=correction)
    assert old.superseded and str(old.superseded_by_id) == replacement and old.refined_by_id is None
    assert ask(attacker)[0]["thought_id"] == replacement

    again = agent_factory("dev", name="later").post(
        MEMORY, {"prompt": "Note: the billing service retries a failed webhook twice and then drops it."}, format="json"
    )
    assert again.status_code == 200, again.content
    assert "contradicts_correction" in Thought.objects.get(pk=again.json()["trace"]["thought_id"]).quality_flags
    assert f"Correction {replacement}" in again.json()["result"]["guidance"]


@pytest.mark.parametrize("target", ["wrong", "other"])
def test_a_refinement_that_repeats_a_corrected_fact_is_flagged_and_ranks_below_the_correction(corrected, target):
    """Attack: the wrong fact sent again as a refinement of a thought that is not a correction (the
    corrected thought W itself, or another live thought), hoping ``refines`` skips the
    re-contamination guard or lifts the refinement above the correction as W's replacement.

    Expected: stored (a refinement of a thought that is not a correction is allowed), flagged
    contradicts_correction with the warning quoting the correct fact, and C answers first."""
    attacker, wrong, correction, other = corrected
    source = {"wrong": wrong, "other": other}[target]

    response = attacker.post(MEMORY, {"prompt": RESTATED, "refines": source}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    refinement = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert refinement.thought_type == "refinement" and refinement.source_ids == [Thought.objects.get(pk=source).pk]
    assert "contradicts_correction" in refinement.quality_flags
    assert str(refinement.contradicted_by_id) == correction
    assert f"Correction {correction}" in body["result"]["guidance"] and RIGHT in body["result"]["guidance"]
    assert not Thought.objects.get(pk=correction).superseded
    ids = [source["thought_id"] for source in ask(attacker)]
    assert ids[0] == correction and ids.index(correction) < ids.index(str(refinement.pk))


def test_the_guidance_never_suggests_refining_or_merging_a_correction(corrected, agent_factory):
    """The near-duplicate guidance of a contribution that says almost what the correction says
    suggested ``"refines": "<C>"`` or ``"consolidates": ["<C>", ...]``, calls that are refused. It says
    how a correction is replaced instead."""
    attacker, wrong, correction, other = corrected
    content = Thought.objects.get(pk=correction).content
    response = agent_factory("dev", name="echo").post(
        MEMORY, {"prompt": content.replace("CORRECTION: ", "Reminder: "), "store": True}, format="json"
    )
    assert response.status_code == 200, response.content
    guidance = response.json()["result"]["guidance"]
    assert correction in guidance, guidance
    assert f'"refines": "{correction}"' not in guidance
    assert f'"consolidates": ["{correction}"' not in guidance
    assert f'"supersedes": ["{correction}"]' in guidance


@pytest.mark.parametrize("subcommand", ["refine", "consolidate"])
def test_the_cli_refuses_to_refine_or_consolidate_a_correction(corrected, subcommand):
    """``manage.py brain refine C ...`` / ``brain consolidate C,other ...`` run the same orchestration:
    refused with the same code and message, nothing changed."""
    attacker, wrong, correction, other = corrected
    ids = correction if subcommand == "refine" else f"{other},{correction}"
    before = brain_state()
    with pytest.raises(CommandError, match="CORRECTION_NEEDS_CORRECTION") as refused:
        call_command("brain", subcommand, ids, RESTATED, "--agent", "attacker", stdout=StringIO(), stderr=StringIO())
    assert "brain correct" in str(refused.value)
    assert brain_state() == before


@pytest.mark.django_db(transaction=True)
def test_the_mcp_tool_refuses_to_refine_a_correction(asgi_server, agent_factory, space):
    """``memory_contribute(refines=C)`` over MCP: the tool's error carries the REST code and message,
    nothing changed."""
    from tests.test_mcp_server import Tools, in_session

    author = agent_factory("dev", name="author")
    correction = correct(agent_factory("qa", name="reviewer"), remember(author, WRONG))
    attacker = agent_factory("dev", name="attacker")
    before = brain_state()

    async def body(session):
        return await Tools(session).raw("memory_contribute", content=RESTATED, refines=correction)

    is_error, answer = in_session(asgi_server.url, attacker.token, body)
    assert is_error and answer["status"] == 409
    assert answer["error"]["code"] == "CORRECTION_NEEDS_CORRECTION"
    assert "memory_correct" in answer["error"]["message"]
    assert brain_state() == before
