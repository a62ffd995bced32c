"""Attacks on the invariants of knowledge evolution (SPEC 2.3 ordering invariant, 2.4 lineage, 2.5
corrections, 4.5 suggestions, 5 retraction with redact, 6 integrity) under concurrent and adversarial
writers.

Each test names the attack and what should happen instead.
"""

from __future__ import annotations

import pytest

from brain.judging.base import Verdict
from brain.models import CorrectionSuggestion, Thought
from brain.services import lineage
from brain.services.contradictions import thought_detect_contradictions
from tests.concurrency_support import run_concurrently
from tests.security.support import memory, remember

pytestmark = pytest.mark.django_db

MEMORY = "/api/v1/memory"


def ask(client, prompt: str, **fields) -> list[str]:
    """A retrieve-only memory call; the ids of its sources, best first."""
    response = client.post(MEMORY, {"prompt": prompt, "contribute": False, **fields}, format="json")
    assert response.status_code == 200, response.content
    return [source["thought_id"] for source in response.json()["result"]["sources"]]


def retract(client, thought_id: str, *, redact: bool) -> None:
    response = client.post(
        f"/api/v1/thoughts/{thought_id}/retract", {"reason": "leaked a secret", "redact": redact}, format="json"
    )
    assert response.status_code == 200, response.content


# --- redaction -------------------------------------------------------------------------------------


class _JudgeThatWaitsForARetraction:
    """A judge (an LLM call takes seconds) during which another agent retracts the old thought, with
    redact, in its own connection; then it answers "contradicts"."""

    name = "slow"

    def __init__(self, during):
        self.during = during

    def contradicts(self, a: str, b: str) -> Verdict:
        results = run_concurrently([self.during])
        assert not isinstance(results[0], BaseException), results[0]
        return Verdict(True, 0.95, "they disagree")


@pytest.mark.django_db(transaction=True)
def test_a_contradiction_judged_while_its_thought_is_redacted_keeps_no_copy_and_raises_nothing(
    agent_factory, space, thought_factory, fake_embedder
):
    """Attack (or two agents working): the contradiction detector (a Celery job) reads the old thought
    X as a candidate, then asks the judge (an LLM: seconds). Meanwhile X's author retracts X with
    ``redact`` (a leaked password). Were the suggestion raised with the X the detector read before, it
    would be PENDING on the retracted thought, its draft's ``corrected_fact`` X's erased text, served by
    GET /api/v1/corrections and memory answers' ``pending_corrections`` — and accepting it would store
    the secret again as a correction's ``corrected_fact``.

    Expected: nothing is raised against a thought that is retracted (or superseded) by the time the
    suggestion is written, and no suggestion holds the erased text (SPEC 5 retract/redact, 4.5)."""
    author = agent_factory("dev", name="author")
    other = agent_factory("qa", name="other")
    secret = "The billing admin console password is hunter2-QX7 and it is shared by every operator."
    old = thought_factory(secret, topic="billing", agent=author.agent)
    new = thought_factory(
        "The billing admin console uses per-operator SSO logins now, with no shared password.",
        topic="billing",
        agent=other.agent,
    )

    judge = _JudgeThatWaitsForARetraction(lambda: retract(author, str(old.pk), redact=True))
    thought_detect_contradictions(thought_id=str(new.pk), judge=judge)

    old.refresh_from_db()
    assert "hunter2" not in old.content  # the retraction did erase the thought itself
    leaks = [s for s in CorrectionSuggestion.objects.all() if "hunter2" in f"{s.statement} {s.draft} {s.reason}"]
    assert leaks == [], "a suggestion written after the redaction quotes the erased text"
    assert not CorrectionSuggestion.objects.filter(thought=old, status="pending").exists()


def test_a_truncated_correction_text_keeps_no_part_of_a_redacted_thought(agent_factory, space, fake_embedder):
    """Attack: X (long: a pasted config dump with a key at its start) is corrected through
    POST /thoughts/{id}/correct with a long ``correct_fact`` and no ``content``. The correction's
    default content is "CORRECTION: It is wrong that {X} Correct: {fact}", each side cut to fit
    10,000 characters: it holds the first ~5,000 characters of X followed by "…". X's author then
    retracts X with ``redact``. ``_erase_copies`` only replaces X's WHOLE text inside the correction's
    content, which holds a cut copy: the key and ~5,000 characters of X stay in the correction, served
    by GET /thoughts/{id}, searches and lineage.

    Expected: after the redaction no text an agent can read holds any of X's erased text (SPEC 5:
    redact erases the copies Colony made)."""
    author = agent_factory("dev", name="author")
    other = agent_factory("qa", name="other")
    secret_head = "Vendor API key sk-live-9f8e7d6c5b4a and the rest of the pasted staging configuration: "
    dump = secret_head + " ".join(f"setting{i}=value{i};" for i in range(320))
    assert 6000 < len(dump) < 10000
    x = remember(author, dump)
    right = "The staging configuration lives in the vault; " + " ".join(f"setting{i} moved." for i in range(400))
    assert 5000 < len(right) < 10000
    corrected = other.post(f"/api/v1/thoughts/{x}/correct", {"correct_fact": right}, format="json")
    assert corrected.status_code == 201, corrected.content
    correction_id = corrected.json()["correction"]["thought_id"]

    retract(author, x, redact=True)

    correction = Thought.objects.get(pk=correction_id)
    assert "sk-live-9f8e7d6c5b4a" not in correction.content
    served = other.get(f"/api/v1/thoughts/{correction_id}")
    assert "sk-live-9f8e7d6c5b4a" not in served.content.decode()


# --- ranking: a superseded thought never above its live replacement ------------------------------


def test_a_refined_state_snapshot_never_ranks_above_its_refinement_under_a_topic_filter(
    agent_factory, space, fake_embedder
):
    """Attack: state snapshot S1 of topic "deploy" dated 2025-06-10 is refined by S2, a state snapshot
    of the same topic whose ``temporal_scope`` says the state was in fact as of 2025-06-01 (the
    refinement fixes the date too). A ``filter_topic`` search reorders the topic's snapshots by
    ``temporal_scope`` AFTER the replacement rule (``ranking._newest_snapshots_first`` ignores
    ``superseded``): superseded S1 is served first, above the live S2 that replaces it.

    Expected: S2 ranks above S1 (SPEC 2.3 ordering invariant: a thought superseded by a refinement
    always ranks below the live thought that supersedes it; "newest first" is among live snapshots)."""
    dev = agent_factory("dev", name="author")
    snapshot = {
        "thought_category": "state_snapshot",
        "topic": "deploy",
        "source_ref": {"type": "task", "value": "deploy-1"},
    }
    s1 = remember(
        dev,
        "Deploy pipeline state: the release train ships nightly from main behind manual approval gates.",
        temporal_scope="2025-06-10",
        **snapshot,
    )
    s2 = remember(
        dev,
        "Deploy pipeline state: the release train ships nightly from main behind automated approval gates.",
        temporal_scope="2025-06-01",
        refines=s1,
        **snapshot,
    )
    assert Thought.objects.get(pk=s1).superseded
    ids = ask(dev, "deploy pipeline release train approval gates", filter_topic="deploy")
    assert s1 in ids and s2 in ids
    assert ids.index(s2) < ids.index(s1), "the superseded snapshot ranks above its live refinement"


def test_a_superseded_thought_six_refinements_deep_is_served_with_its_live_replacement(
    agent_factory, space, fake_embedder, monkeypatch
):
    """Attack: X0 is refined six times in a row (X1 refines X0, X2 refines X1, ... X6), each version
    reworded so that only X0 still matches the question. The search follows ``refined_by`` only
    REPLACEMENT_DEPTH (5) hops from a superseded result to find its live replacement: X0 is served
    (superseded, the question's best match) and X6, the one live version, is not in the answer at all.
    An agent that asks with X0's words gets only the outdated text.

    Expected: whenever a superseded thought is in the result, its live replacement is too, above it
    (SPEC 2.3 ordering invariant), however long the chain.

    A rewording about nothing its source says is refused at the door (lineage.RELATED_FLOOR); the chain
    is built with that check off, since a chain of small related steps drifts as far."""
    drifter = agent_factory("dev", name="drifter")
    first = remember(drifter, "Copper tulip bramble oyster meridian.")
    refused = memory(drifter, prompt="Kiwi mango quartz zephyr lantern orbit violet.", store=True, refines=first)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "UNRELATED_SOURCE"
    monkeypatch.setattr(lineage, "RELATED_FLOOR", -1.0)
    dev = agent_factory("dev", name="author")
    x0_text = "Staging database credentials rotate every Tuesday at noon through the ops runbook."
    chain = [remember(dev, x0_text)]
    rewordings = [
        "Vault leases renew quarterly; platform group audits them.",
        "Kiwi mango quartz zephyr lantern orbit violet.",
        "Harbor crane ferry anchor lagoon pebble cobalt.",
        "Falcon meadow ember tundra glacier saffron walnut.",
        "Jasper nebula orchid pylon rhubarb sonnet thimble.",
        "Warehouse inventory sync completes hourly via Kafka connectors.",
    ]
    for text in rewordings:
        chain.append(remember(dev, text, refines=chain[-1]))
    live = chain[-1]
    assert not Thought.objects.get(pk=live).superseded
    assert Thought.objects.filter(pk__in=chain[:-1], superseded=True).count() == 6

    ids = ask(dev, x0_text)
    assert chain[0] in ids  # the outdated version is served...
    assert live in ids, "...without the live version that replaces it"
    assert ids.index(live) < ids.index(chain[0])


# --- one row per fact ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_identical_refinements_sent_at_once_store_one_row(agent_factory, space, thought_factory, fake_embedder):
    """Attack (or a client retrying a timed-out call): two agents send the same refinement of B, the
    same text, at the same moment. ``_one_row_per_fact`` skips every call with ``refines``: both are
    stored, two live thoughts with one text; B's ``refined_by`` names the later one and the earlier
    stays live beside it, with nothing superseding it — every later search serves the fact twice.

    Expected: one row per fact: the second identical refinement of B stores nothing and names the
    first (``already_known``), as a plain contribution does."""
    first, second = agent_factory("dev", name="dev-a"), agent_factory("qa", name="qa-b")
    base = thought_factory("The nightly export job writes to the reports bucket in us-east-1.", agent=first.agent)
    text = "The nightly export job writes to the reports bucket in eu-west-1 since the region move."

    def refine(client):
        return lambda: client.post(MEMORY, {"prompt": text, "refines": str(base.pk)}, format="json").status_code

    results = run_concurrently([refine(first), refine(second)])
    assert results == [200, 200], results
    live = Thought.objects.filter(space=space, content=text, superseded=False)
    assert live.count() == 1, f"{live.count()} live rows say the same refined fact"


# --- redaction and kept answers (Idempotency-Key) -----------------------------------------------


def test_a_redacted_imported_thought_leaves_no_preview_in_a_replayed_answer(agent_factory, space, fake_embedder):
    """Attack: an agent imports a thought whose content starts with a line break (imports keep text as
    given: Mem0 dumps often do), a secret in its first line. Another agent's memory call with an
    ``Idempotency-Key`` is answered with it as a source: the kept answer quotes ``content[:80]`` and
    ``content[:200]``. The importer retracts it with ``redact``; ``_erase_copies`` looks for the
    STRIPPED text and its starts, which the kept quotes (starting with the line break) don't contain:
    replaying the key serves the secret again.

    Expected: after the redaction the replayed answer holds none of the erased text (SPEC 5 redact:
    kept answers quoting it are erased)."""
    importer = agent_factory("dev", name="importer")
    reader = agent_factory("qa", name="reader")
    secret = "\nWarehouse VPN shared secret is vpn-Zk29-Lq88-Xr55; rotate it with the network team every month " + (
        "and log the rotation in the shared operations calendar so the whole warehouse team knows. " * 4
    )
    response = importer.post("/api/v1/thoughts/import", [{"content": secret}], format="json")
    assert response.status_code == 201, response.content
    thought_id = response.json()["ids"][0]
    question = {"prompt": "warehouse VPN shared secret rotation", "contribute": False}
    first = reader.post(MEMORY, question, format="json", HTTP_IDEMPOTENCY_KEY="ask-1")
    assert first.status_code == 200, first.content
    assert "vpn-Zk29-Lq88-Xr55" in first.content.decode()  # the answer quoted it

    retract(importer, thought_id, redact=True)

    replay = reader.post(MEMORY, question, format="json", HTTP_IDEMPOTENCY_KEY="ask-1")
    assert replay.get("Idempotent-Replayed") == "true"
    assert "vpn-Zk29-Lq88-Xr55" not in replay.content.decode()  # kept as content_preview
