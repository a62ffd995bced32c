"""Knowledge evolution end to end (SPEC 2.4, 2.5), through ``POST /api/v1/memory`` with the REAL embedding model.

A wrong fact that many agents repeated loses to a single correction, at once, and does not creep
back. The seed's case (seeds/000, Neuroimaginations-Coach) is played out here by five agents; every
other rule of evolution is checked through the same endpoint (or the corrections API) rather than by
calling services directly.
"""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from brain.models import CorrectionSuggestion, QueryLog, Thought

pytestmark = pytest.mark.django_db

TOPIC = "xpollination-gruendung"
WRONG_FACT = "Thomas is the certified Neuroimaginations-Coach"
RIGHT_FACT = (
    "Neuroimaginations-Coaching is offered via a joint venture with Gerhard Quiring; Thomas is NOT the certified "
    "Neuroimaginations-Coach."
)
WRONG_VARIANTS = [
    "Thomas is the certified Neuroimaginations-Coach and offers NI coaching to the founders of XPollination.",
    "Team profile: Thomas, Zertifizierter Neuroimaginations-Coach, leads the coaching offer of XPollination.",
    "XPollination Gruendung: Thomas is a certified Neuroimaginations-Coach, which strengthens the business plan.",
    "Thomas holds the Neuroimaginations-Coach certification and runs the NI coaching sessions himself.",
    "Unternehmensberater analysis: the certified Neuroimaginations-Coach in the XPollination team is Thomas.",
]
QUESTION = "Who is the certified Neuroimaginations-Coach at XPollination?"
RECONTAMINATION = "According to ugp-kurzkonzept-xpollination.md, Thomas is a certified Neuroimaginations-Coach."


def memory(client, status=200, **body):
    response = client.post("/api/v1/memory", body, format="json")
    assert response.status_code == status, response.content
    return response.json()


def contribute(client, prompt, **fields):
    body = memory(client, prompt=prompt, **fields)
    assert body["trace"]["thought_id"], body
    return body


@pytest.fixture
def five_agents(agent_factory):
    return [agent_factory(role) for role in ("liaison", "pdsa", "dev", "qa", "dev")]


@pytest.fixture
def contaminated(five_agents):
    """Five agents each store a variant of the wrong fact; several queries reinforce them."""
    ids = []
    for agent, text in zip(five_agents, WRONG_VARIANTS, strict=True):
        ids.append(contribute(agent, text, topic=TOPIC)["trace"]["thought_id"])
    for _round in range(3):
        for agent in five_agents:
            memory(agent, prompt=QUESTION)
    return ids


def correct_via_memory(client, supersedes, **overrides):
    body = dict(
        prompt=f"CORRECTION: {RIGHT_FACT}",
        thought_category="correction",
        topic=TOPIC,
        corrected_fact=WRONG_FACT,
        correct_fact=RIGHT_FACT,
        supersedes=supersedes,
        source_ref={"type": "url", "value": "human-correction", "project": "best-practices"},
    )
    body.update(overrides)
    return memory(client, **body)


# --- the seed's case ------------------------------------------------------------------------------
def test_one_correction_beats_five_reinforced_copies_of_the_wrong_fact_at_once(five_agents, contaminated, space):
    liaison = five_agents[0]
    wrong = Thought.objects.filter(pk__in=contaminated)
    # The trunk is deeply rooted: every copy was returned to every agent, again and again.
    assert all(t.access_count >= 10 and t.pheromone_weight > 1.4 and len(t.accessed_by) == 5 for t in wrong)
    before = memory(liaison, prompt=QUESTION)["result"]["sources"]
    assert {s["thought_id"] for s in before} == set(contaminated)

    body = correct_via_memory(liaison, contaminated)
    correction_id = body["trace"]["thought_id"]
    assert body["trace"]["thoughts_contributed"] == 1
    assert "threshold:bypassed(correction)" in body["trace"]["operations"]
    assert "supersede:5" in body["trace"]["operations"]
    assert "supersedes 5 previous thoughts" in body["result"]["guidance"]
    assert f"Stored your correction as {correction_id}; it supersedes 5 thoughts." in body["result"]["response"]
    for thought in Thought.objects.filter(pk__in=contaminated):
        assert thought.superseded and str(thought.superseded_by_id) == correction_id

    # The very next query, by another agent: the correction first, every wrong copy below it.
    sources = memory(five_agents[2], prompt=QUESTION)["result"]["sources"]
    assert sources[0]["thought_id"] == correction_id
    assert sources[0]["thought_category"] == "correction" and sources[0]["superseded"] is False
    assert "correction boost ×1.3" in sources[0]["matching_reason"]
    rest = {s["thought_id"]: s for s in sources[1:]}
    assert set(rest) == set(contaminated)
    for source in rest.values():
        assert source["superseded"] is True
        assert f"superseded by correction {correction_id} ×0.5" in source["matching_reason"]
        assert source["score"] < sources[0]["score"]  # ×0.5 against ×1.3, and below its replacement
        assert f"superseded by {correction_id}, ranked above it" in source["matching_reason"]
    # The pheromone the wrong copies gathered does not help them any more.
    assert all("pheromone" not in s["matching_reason"] for s in rest.values())

    # On the topic, with the filter, the same order and why.
    topical = memory(five_agents[3], prompt=QUESTION, filter_topic=TOPIC)["result"]["sources"]
    assert topical[0]["thought_id"] == correction_id
    assert all("topic match" in s["matching_reason"] for s in topical)


def test_the_wrong_fact_does_not_creep_back(five_agents, contaminated):
    liaison, dev = five_agents[0], five_agents[2]
    correction_id = correct_via_memory(liaison, contaminated)["trace"]["thought_id"]

    # An agent reads the old source file again and contributes the corrected fact.
    body = contribute(dev, RECONTAMINATION, topic=TOPIC)
    stored = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert "contradicts_correction" in stored.quality_flags
    assert str(stored.contradicted_by_id) == correction_id
    guidance = body["result"]["guidance"]
    assert guidance.startswith("WARNING")  # at once, before anything else
    assert correction_id in guidance and RIGHT_FACT in guidance
    assert "contradicts_correction" in next(op for op in body["trace"]["operations"] if op.startswith("flags:"))

    sources = memory(five_agents[4], prompt=QUESTION)["result"]["sources"]
    assert sources[0]["thought_id"] == correction_id
    repeated = next(s for s in sources if s["thought_id"] == str(stored.id))
    assert "contradicts_correction ×0.5" in repeated["matching_reason"]
    assert repeated["quality_flags"] == ["contradicts_correction"]
    assert repeated["score"] < sources[0]["score"]


def test_agreeing_with_the_correction_is_not_flagged(five_agents, contaminated):
    correct_via_memory(five_agents[0], contaminated)
    body = contribute(five_agents[1], "Thomas is not the certified Neuroimaginations-Coach; Gerhard Quiring is.")
    assert Thought.objects.get(pk=body["trace"]["thought_id"]).quality_flags == []
    assert "WARNING" not in (body["result"]["guidance"] or "")


@pytest.mark.parametrize("bad", ["unknown", "other-space"])
def test_a_correction_with_one_bad_id_is_404_and_changes_nothing(five_agents, contaminated, other_space, bad):
    foreign = Thought.objects.create(space=other_space, content=WRONG_FACT, contributor_id="x", contributor_name="x")
    bad_id = str(uuid.uuid4()) if bad == "unknown" else str(foreign.id)
    thoughts, logs = Thought.objects.count(), QueryLog.objects.count()
    response = five_agents[0].post(
        "/api/v1/memory",
        {
            "prompt": f"CORRECTION: {RIGHT_FACT}",
            "thought_category": "correction",
            "topic": TOPIC,
            "corrected_fact": WRONG_FACT,
            "correct_fact": RIGHT_FACT,
            "supersedes": [*contaminated, bad_id],
        },
        format="json",
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "THOUGHT_NOT_FOUND" and bad_id in response.json()["error"]["message"]
    assert (Thought.objects.count(), QueryLog.objects.count()) == (thoughts, logs)
    assert not Thought.objects.filter(superseded=True).exists()
    assert not Thought.objects.filter(thought_category="correction").exists()


# --- categories -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fields, missing",
    [
        ({"thought_category": "state_snapshot"}, ["topic", "temporal_scope", "source_ref"]),
        ({"thought_category": "state_snapshot", "topic": "gruendung", "temporal_scope": "2026-02-26"}, ["source_ref"]),
        ({"thought_category": "decision_record", "topic": "brain"}, ["alternatives_considered", "source_ref"]),
        ({"thought_category": "operational_learning", "topic": "  "}, ["topic"]),
        ({"thought_category": "task_outcome", "source_ref": None}, ["source_ref"]),
        ({"thought_category": "correction", "topic": "t"}, ["supersedes", "corrected_fact", "correct_fact"]),
        ({"thought_category": "correction", "supersedes": [], "correct_fact": "x"}, ["topic", "supersedes", "corrected_fact"]),  # noqa: E501
    ],
)  # fmt: skip
def test_missing_category_fields_are_named_and_nothing_is_stored(dev, fields, missing):
    prompt = "XPollination Gruendung state: EPU path chosen, Kurzkonzept done, next step AMS submission."
    response = dev.post("/api/v1/memory", {"prompt": prompt, **fields}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "MISSING_CATEGORY_FIELDS" and error["missing"] == missing
    assert all(name in error["message"] for name in missing)
    assert Thought.objects.count() == 0 and QueryLog.objects.count() == 0


def test_a_complete_state_snapshot_is_stored_with_its_fields(dev):
    body = contribute(
        dev,
        "XPollination Gruendung state 2026-02-26: EPU path, Befaehigungspruefung route. Next: AMS submission.",
        thought_category="state_snapshot",
        topic="xpollination-gruendung",
        temporal_scope=timezone.localdate().isoformat(),
        source_ref={"type": "file", "value": "gruendung/state.md", "project": "xpollination"},
    )
    stored = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert (stored.thought_category, stored.topic, stored.temporal_scope) == (
        "state_snapshot",
        "xpollination-gruendung",
        timezone.localdate(),
    )
    assert stored.quality_flags == []


def test_a_state_snapshot_with_supersedes_replaces_the_one_it_names(dev):
    # Before: the ids were stored and nothing was superseded; the old state answered beside the new.
    snapshot = {
        "thought_category": "state_snapshot",
        "topic": "xpollination-gruendung",
        "source_ref": {"type": "file", "value": "gruendung/state.md", "project": "xpollination"},
    }
    old = contribute(
        dev,
        "XPollination Gruendung state 2026-02-26: EPU path chosen, Kurzkonzept in progress. Next: AMS submission.",
        temporal_scope="2026-02-26",
        **snapshot,
    )["trace"]["thought_id"]
    body = contribute(
        dev,
        "XPollination Gruendung state 2026-03-10: EPU path, Kurzkonzept submitted to AMS. Next: AMS interview.",
        temporal_scope="2026-03-10",
        supersedes=[old],
        **snapshot,
    )
    new = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert (new.thought_type, new.source_ids, new.supersedes) == ("refinement", [uuid.UUID(old)], [uuid.UUID(old)])
    assert "supersedes:as_refines" in body["trace"]["operations"]
    replaced = Thought.objects.get(pk=old)
    assert (replaced.superseded, replaced.refined_by_id) == (True, new.id)
    answer = memory(dev, prompt="What is the state of the XPollination Gruendung?", contribute=False)
    states = [s["thought_id"] for s in answer["result"]["sources"] if s["thought_id"] in (old, str(new.id))]
    assert states == [str(new.id), old]


def test_supersedes_with_several_ids_consolidates_and_beside_refines_is_a_400(dev):
    a, b = (
        contribute(dev, f"The deploy pipeline note {n}: migrations run before the web workers restart.")["trace"][
            "thought_id"
        ]
        for n in (1, 2)
    )
    body = contribute(dev, "Deploys: migrations run first, then the web workers restart.", supersedes=[a, b])
    merged = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert merged.thought_type == "consolidation"
    assert set(Thought.objects.filter(pk__in=[a, b]).values_list("refined_by_id", flat=True)) == {merged.id}
    count = Thought.objects.count()
    both = memory(dev, 400, prompt="Deploys restart the web workers last of all.", supersedes=[a], refines=b)
    assert both["error"]["code"] == "MUTUAL_EXCLUSION" and "supersedes" in both["error"]["message"]
    assert Thought.objects.count() == count


def test_an_old_uncategorized_call_works_unchanged(dev):
    prompt = "The deploy pipeline runs database migrations before it restarts the web workers."
    body = memory(dev, prompt=prompt, agent_id="legacy-agent", agent_name="Legacy")
    stored = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert stored.thought_category == "uncategorized" and stored.quality_flags == []
    assert (stored.topic, stored.supersedes, stored.contradicted_by_id) == ("", [], None)
    assert body["trace"]["operations"][:7] == [
        "validate",
        "session:new",
        "threshold:met",
        "embed",
        "retrieve:0",
        "flags:none",
        "contribute:original",
    ]
    assert body["result"]["pending_corrections"] == [] and body["result"]["sources"] == []


# --- advisory flags -------------------------------------------------------------------------------
def test_keyword_echo_is_flagged_stored_and_ranked_lower_never_blocked(agent_factory):
    echoer, other = agent_factory("pdsa"), agent_factory("dev")
    query = "brain contribution quality patterns knowledge management principles?"
    assert memory(echoer, prompt=query)["trace"]["thought_id"] is None  # a search, not stored
    echo = "brain contribution quality patterns, knowledge management principles for agents"
    body = contribute(echoer, echo)
    stored = Thought.objects.get(pk=body["trace"]["thought_id"])
    assert stored.quality_flags == ["keyword_echo"]
    assert "flags:keyword_echo" in body["trace"]["operations"]
    # The same words from an agent that never searched for them are not an echo.
    clean = contribute(other, echo + ", as the PDSA design for the brain describes them in detail.")
    assert "keyword_echo" not in Thought.objects.get(pk=clean["trace"]["thought_id"]).quality_flags
    source = next(s for s in memory(other, prompt=query)["result"]["sources"] if s["thought_id"] == str(stored.id))
    assert source["quality_flags"] == ["keyword_echo"] and "keyword_echo ×0.8" in source["matching_reason"]


def test_restating_an_own_contribution_is_not_a_keyword_echo(dev):
    """Calls that stored a thought are contributions, not searches: only near_duplicate applies."""
    text = "The deploy pipeline runs database migrations before it restarts the web workers."
    contribute(dev, text)
    again = contribute(dev, text.replace("before it restarts", "before restarting"))
    assert Thought.objects.get(pk=again["trace"]["thought_id"]).quality_flags == ["near_duplicate"]


def test_orphaned_reference_is_flagged_and_stored(dev):
    body = contribute(dev, "See the PDSA doc for details about the contribution gate of the brain.")
    assert Thought.objects.get(pk=body["trace"]["thought_id"]).quality_flags == ["orphaned_reference"]


def test_back_dated_snapshot_is_stale_at_once(dev):
    body = contribute(
        dev,
        "XPollination Gruendung state 2025-01-10: EPU path open, Kurzkonzept not started yet, no AMS date.",
        thought_category="state_snapshot",
        topic="xpollination-gruendung",
        temporal_scope="2025-01-10",
        source_ref={"type": "file", "value": "gruendung/state.md"},
    )
    assert Thought.objects.get(pk=body["trace"]["thought_id"]).quality_flags == ["stale"]


def test_near_duplicate_is_flagged_with_a_consolidation_suggestion(dev):
    memory(dev, prompt="warm up?")  # onboarding out of the way
    first = contribute(dev, "The deploy pipeline runs database migrations before it restarts the web workers.")
    second = contribute(dev, "The deploy pipeline runs the database migrations before restarting the web workers.")
    a, b = first["trace"]["thought_id"], second["trace"]["thought_id"]
    assert Thought.objects.get(pk=a).quality_flags == []
    assert Thought.objects.get(pk=b).quality_flags == ["near_duplicate"]
    guidance = second["result"]["guidance"]
    assert guidance.startswith("Near-duplicate") and f'"consolidates": ["{a}", "{b}"]' in guidance
    # Following the advice works and leaves one live thought.
    merged = contribute(
        dev, "Deploys run the database migrations first, then restart the web workers.", consolidates=[a, b]
    )
    assert Thought.objects.filter(pk__in=[a, b], superseded=True).count() == 2
    assert "near_duplicate" not in Thought.objects.get(pk=merged["trace"]["thought_id"]).quality_flags


@pytest.mark.parametrize("filtered", [False, True])
def test_a_new_version_of_a_retracted_thought_is_no_near_duplicate_of_it(dev, filtered):
    # Before: retracting a wrong thought and contributing the right one flagged the right one
    # near_duplicate of the retracted one and advised merging the two.
    memory(dev, prompt="warm up?")
    scope = {"filter_topic": "backups", "topic": "backups"} if filtered else {}  # the search's rows / a scan of its own
    wrong = contribute(
        dev, "The nightly backup job of the wiki runs at 02:00 UTC and keeps fourteen days of dumps.", **scope
    )
    wrong_id = wrong["trace"]["thought_id"]
    assert dev.post(f"/api/v1/thoughts/{wrong_id}/retract", {"reason": "wrong time"}, format="json").status_code == 200
    right = contribute(
        dev, "The nightly backup job of the wiki runs at 03:00 UTC and keeps fourteen days of dumps.", **scope
    )
    assert Thought.objects.get(pk=right["trace"]["thought_id"]).quality_flags == []
    assert wrong_id not in (right["result"]["guidance"] or "")


# --- contradiction detection → pending correction → accept / dismiss ----------------------------
def test_contradiction_found_after_a_contribution_becomes_a_pending_correction(
    agent_factory, django_capture_on_commit_callbacks
):
    first, second = agent_factory("dev"), agent_factory("qa")
    with django_capture_on_commit_callbacks(execute=True):
        old_id = contribute(first, "The production deploy uses Postgres 15 for the main database.", topic="infra")[
            "trace"
        ]["thought_id"]
    assert not CorrectionSuggestion.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        new_id = contribute(
            second, "The production deploy does not use Postgres 15 for the main database.", topic="infra"
        )["trace"]["thought_id"]
    suggestion = CorrectionSuggestion.objects.get()
    assert (str(suggestion.thought_id), str(suggestion.contradicting_thought_id)) == (old_id, new_id)
    assert suggestion.agent == second.agent and suggestion.status == "pending"

    # The next memory response of that agent lists it; the other agent's does not.
    body = memory(second, prompt="What database does the production deploy use?")
    pending = body["result"]["pending_corrections"]
    assert [p["suggestion_id"] for p in pending] == [str(suggestion.id)]
    assert pending[0]["thought_id"] == old_id and pending[0]["draft"]["supersedes"] == [old_id]
    assert "pending correction" in body["result"]["guidance"]
    assert memory(first, prompt="What database does the production deploy use?")["result"]["pending_corrections"] == []

    # Accepting it is one call: the correction exists and the old thought is superseded by it.
    accepted = second.post(pending[0]["accept"], {}, format="json")
    assert accepted.status_code == 201, accepted.content
    correction_id = accepted.json()["correction"]["thought_id"]
    old = Thought.objects.get(pk=old_id)
    assert old.superseded and str(old.superseded_by_id) == correction_id
    assert accepted.json()["superseded_count"] == 1
    after = memory(second, prompt="What database does the production deploy use?")
    assert after["result"]["pending_corrections"] == []
    assert after["result"]["sources"][0]["thought_id"] == correction_id


def test_a_dismissed_suggestion_is_closed_and_changes_nothing(agent_factory, django_capture_on_commit_callbacks):
    first, second = agent_factory("dev"), agent_factory("qa")
    with django_capture_on_commit_callbacks(execute=True):
        old_id = contribute(first, "Feature flag new-checkout is enabled for every tenant in production.")["trace"][
            "thought_id"
        ]
        contribute(second, "Feature flag new-checkout is disabled for every tenant in production.")
    pending = memory(second, prompt="new-checkout flag state?")["result"]["pending_corrections"]
    assert len(pending) == 1 and pending[0]["thought_id"] == old_id
    response = second.post(pending[0]["dismiss"], {"reason": "both were true at different times"}, format="json")
    # the agent whose statement raised it takes it back: withdrawn (it settles that agent's contradiction)
    assert response.status_code == 200 and response.json()["suggestion"]["status"] == "withdrawn"
    assert memory(second, prompt="new-checkout flag state?")["result"]["pending_corrections"] == []
    assert not Thought.objects.get(pk=old_id).superseded
    assert not Thought.objects.filter(thought_category="correction").exists()


# --- correcting one thought by id, related thoughts ----------------------------------------------
def test_correct_endpoint_supersedes_and_arms_the_guard(five_agents, contaminated):
    liaison, dev = five_agents[0], five_agents[2]
    response = liaison.post(
        f"/api/v1/thoughts/{contaminated[0]}/correct",
        {"correct_fact": RIGHT_FACT, "corrected_fact": WRONG_FACT, "supersedes": contaminated[1:]},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["superseded_count"] == 5
    correction_id = response.json()["correction"]["thought_id"]
    body = contribute(dev, RECONTAMINATION)
    assert correction_id in body["result"]["guidance"]
    page = liaison.get(f"/api/v1/thoughts/{contaminated[0]}").json()
    assert [c["thought_id"] for c in page["corrected_by"]] == [correction_id]
    made = liaison.get(f"/api/v1/thoughts/{correction_id}").json()
    assert {c["thought_id"] for c in made["corrects"]} == set(contaminated)


def test_related_thoughts_are_linked_both_ways_and_shown(dev):
    a = contribute(dev, "Celery uses Redis as its broker in production; the URL comes from REDIS_URL.")
    b = contribute(
        dev,
        "Celery workers need REDIS_URL to point at the production Redis, or they fall back to the file broker.",
        related_thoughts=[a["trace"]["thought_id"]],
    )
    a_id, b_id = a["trace"]["thought_id"], b["trace"]["thought_id"]
    assert dev.get(f"/api/v1/thoughts/{b_id}").json()["related_thoughts"] == [a_id]
    assert dev.get(f"/api/v1/thoughts/{a_id}").json()["related_thoughts"] == [b_id]
