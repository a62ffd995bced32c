"""Corrections API (SPEC 4.5, 5): list, accept, dismiss suggestions; correct a thought. Space-scoped,
envelope errors, nothing changes on failure."""

from __future__ import annotations

import uuid

import pytest

from brain import embedding
from brain.models import CorrectionSuggestion, Thought
from brain.services.flags import correction_guard
from brain.services.suggestions import suggestion_create, suggestions_pending_items
from brain.services.thoughts import thought_create

pytestmark = pytest.mark.django_db

WRONG = "Thomas is the certified Neuroimaginations-Coach"
RIGHT = "Neuroimaginations-Coaching is offered via a joint venture with Gerhard Quiring; Thomas is not the coach."


def store(space, content, *, topic="", vector=None):
    return thought_create(
        space=space,
        content=content,
        contributor_id="liaison-1",
        contributor_name="liaison-1",
        topic=topic,
        embedding=vector or embedding.embed(content),  # the model's: a correction of it is compared with it
    )


def suggest(thought, statement, *, agent=None, session_id=""):
    suggestion, _ = suggestion_create(
        thought=thought,
        statement=statement,
        origin="contradiction_detector",
        confidence=0.9,
        reason="test",
        agent=agent,
        session_id=session_id,
    )
    return suggestion


# --- list -----------------------------------------------------------------------------------------


def test_list_pending_own_first_then_newest(space, other_space, agent_factory):
    dev, qa = agent_factory("dev"), agent_factory("qa")
    old = store(space, WRONG, topic="team")
    for_qa = suggest(old, "statement for qa", agent=qa.agent)
    for_dev = suggest(old, "statement for dev", agent=dev.agent)
    # one pending suggestion per agent and thought: qa's newest is about another thought
    newest_for_qa = suggest(store(space, WRONG + " Again."), "newest statement for qa", agent=qa.agent)
    suggest(store(other_space, WRONG), "elsewhere")
    CorrectionSuggestion.objects.create(
        space=space, thought=old, statement="already dismissed", origin="contradiction_detector", agent=dev.agent,
        status="dismissed",
    )  # fmt: skip

    response = dev.get("/api/v1/corrections?status=pending")
    assert response.status_code == 200
    ids = [item["suggestion_id"] for item in response.json()["results"]]
    assert ids == [str(for_dev.id), str(newest_for_qa.id), str(for_qa.id)]
    item = response.json()["results"][0]
    assert item["thought_id"] == str(old.id) and item["thought_preview"] == WRONG
    assert item["draft"]["supersedes"] == [str(old.id)] and item["agent"] == dev.agent.name

    assert [i["suggestion_id"] for i in dev.get("/api/v1/corrections?mine=true").json()["results"]] == [str(for_dev.id)]
    assert dev.get("/api/v1/corrections?status=dismissed").json()["count"] == 1
    assert dev.get("/api/v1/corrections?status=all").json()["count"] == 4
    first = dev.get("/api/v1/corrections?limit=1").json()
    assert first["count"] == 3 and [i["suggestion_id"] for i in first["results"]] == [str(for_dev.id)]
    second = dev.get("/api/v1/corrections", {"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [i["suggestion_id"] for i in second["results"]] == [str(newest_for_qa.id), str(for_qa.id)]
    assert second["next_cursor"] is None


@pytest.mark.parametrize("query", ["status=maybe", "limit=0", "limit=abc", "mine=perhaps"])
def test_list_bad_filters_are_400(dev, query):
    response = dev.get(f"/api/v1/corrections?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_endpoints_need_a_token(anon, space):
    old = store(space, WRONG)
    suggestion = suggest(old, RIGHT)
    assert anon.get("/api/v1/corrections").status_code == 401
    assert anon.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json").status_code == 401
    assert anon.post(f"/api/v1/thoughts/{old.id}/correct", {"correct_fact": RIGHT}, format="json").status_code == 401
    assert CorrectionSuggestion.objects.get().status == "pending"


# --- accept / dismiss -----------------------------------------------------------------------------


def test_accept_creates_the_correction_and_supersedes_the_old_thought(space, dev):
    old = store(space, WRONG, topic="team")
    suggestion = suggest(old, RIGHT, agent=dev.agent)

    response = dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["superseded_count"] == 1
    assert "supersedes 1 previous thought" in body["guidance"]
    assert body["suggestion"]["status"] == "accepted" and body["suggestion"]["resolved_by"] == dev.agent.name
    correction = Thought.objects.get(pk=body["correction"]["thought_id"])
    assert body["suggestion"]["correction_id"] == str(correction.id)
    assert (correction.thought_category, correction.topic) == ("correction", "team")
    assert (correction.corrected_fact, correction.correct_fact) == (WRONG, RIGHT)
    assert correction.agent == dev.agent and correction.corrected_fact_embedding is not None
    old.refresh_from_db()
    assert old.superseded and old.superseded_by_id == correction.id


def test_accept_can_reword_the_correct_fact(space, dev):
    suggestion = suggest(store(space, WRONG), "Thomas isn't it")
    response = dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {"correct_fact": RIGHT}, format="json")
    assert response.status_code == 201
    assert response.json()["correction"]["correct_fact"] == RIGHT
    assert response.json()["correction"]["content"] == f"CORRECTION: It is wrong that {WRONG} Correct: {RIGHT}"


def test_double_accept_is_409_and_creates_one_correction(space, dev):
    suggestion = suggest(store(space, WRONG), RIGHT)
    assert dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json").status_code == 201
    again = dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "CONFLICT"
    assert Thought.objects.filter(thought_category="correction").count() == 1
    assert dev.post(f"/api/v1/corrections/{suggestion.id}/dismiss", {}, format="json").status_code == 409


def test_a_suggestion_whose_thought_is_corrected_first_is_closed_as_superseded(space, dev):
    # Before: it stayed pending, listed in the agent's every memory answer, and accepting it stored
    # a correction of a thought that a correction had already replaced.
    old = store(space, WRONG, topic="team", vector=embedding.embed(WRONG))
    suggestion = suggest(old, "Thomas is not a coach at all.", agent=dev.agent)
    other = suggest(store(space, "Billing retries five times."), "Billing retries three times.", agent=dev.agent)
    pending = dev.get("/api/v1/memory", {"prompt": "Who coaches?", "contribute": "false"}).json()["result"]
    assert {p["suggestion_id"] for p in pending["pending_corrections"]} == {str(suggestion.id), str(other.id)}

    fixed = dev.post(f"/api/v1/thoughts/{old.id}/correct", {"correct_fact": RIGHT}, format="json").json()
    closed = dev.get("/api/v1/corrections", {"status": "superseded"}).json()["results"]
    assert [(c["suggestion_id"], c["resolved_by"], c["correction_id"]) for c in closed] == [
        (str(suggestion.id), "colony", fixed["correction"]["thought_id"])
    ]
    pending = dev.get("/api/v1/memory", {"prompt": "Who coaches?", "contribute": "false"}).json()["result"]
    assert [p["suggestion_id"] for p in pending["pending_corrections"]] == [str(other.id)]
    late = dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert late.status_code == 409 and "already superseded" in late.json()["error"]["message"]
    assert Thought.objects.filter(thought_category="correction").count() == 1


def test_a_suggestion_whose_thought_is_refined_moves_to_the_refinement_one_retracted_is_closed(space, dev):
    refined, retracted, accepted = (
        thought_create(
            space=space,
            content=text,
            contributor_id="dev-1",
            contributor_name="dev-1",
            agent=dev.agent,
            embedding=embedding.embed(text),
        )
        for text in ("Deploys run on Fridays.", "Backups run hourly.", "Caches expire daily.")
    )
    on_refined, on_retracted = suggest(refined, "Deploys run on Mondays."), suggest(retracted, "Backups run nightly.")
    taken, sibling = suggest(accepted, "Caches expire hourly."), suggest(accepted, "Caches never expire.")
    response = dev.post(
        "/api/v1/memory",
        {"prompt": "Deploys run on Mondays since the freeze policy.", "refines": str(refined.id)},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert dev.post(f"/api/v1/thoughts/{retracted.id}/retract", {"reason": "wrong"}, format="json").status_code == 200
    assert dev.post(f"/api/v1/corrections/{taken.id}/accept", {}, format="json").status_code == 201
    status = dict(CorrectionSuggestion.objects.values_list("id", "status"))
    # Its author's refinement restates the claim: the contradiction stays open, on the new version (a fix
    # of a wrong fact is a correction, which closes it).
    assert [status[s.id] for s in (on_refined, on_retracted, taken, sibling)] == [
        "pending",
        "superseded",
        "accepted",
        "superseded",
    ]
    refinement = response.json()["trace"]["thought_id"]
    assert str(CorrectionSuggestion.objects.get(pk=on_refined.pk).thought_id) == refinement
    assert CorrectionSuggestion.objects.get(pk=taken.pk).resolved_by == dev.agent.name


def test_a_suggestion_raised_by_a_statement_its_author_retracts_is_closed(space, dev):
    # Before: it stayed pending, and accepting it stored the withdrawn statement as the correct fact.
    old = store(space, WRONG, topic="team")
    statement = thought_create(
        space=space, content="Thomas is not a coach at all, he is the accountant.", contributor_id="dev-1",
        contributor_name="dev-1", agent=dev.agent, embedding=[1.0] + [0.0] * 383,
    )  # fmt: skip
    suggestion, _ = suggestion_create(
        thought=old, statement=statement.content, origin="contradiction_detector", confidence=0.9, reason="test",
        contradicting_thought=statement, agent=dev.agent,
    )  # fmt: skip
    assert dev.post(f"/api/v1/thoughts/{statement.id}/retract", {"reason": "wrong"}, format="json").status_code == 200
    suggestion.refresh_from_db()
    assert (suggestion.status, suggestion.resolved_by) == ("superseded", "colony")
    assert dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json").status_code == 409
    old.refresh_from_db()
    assert not old.superseded


def test_dismiss_closes_it_and_changes_nothing_else(space, dev):
    old = store(space, WRONG)
    suggestion = suggest(old, RIGHT)
    response = dev.post(
        f"/api/v1/corrections/{suggestion.id}/dismiss", {"reason": "the old fact is right"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["suggestion"]["status"] == "dismissed"
    suggestion.refresh_from_db()
    assert suggestion.status == "dismissed" and suggestion.resolved_by == dev.agent.name
    assert "the old fact is right" in suggestion.reason and suggestion.resolved_at is not None
    old.refresh_from_db()
    assert not old.superseded
    assert not Thought.objects.filter(thought_category="correction").exists()
    accept = dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert accept.status_code == 409


def test_other_space_and_unknown_suggestions_are_404(space, other_space, dev):
    theirs = suggest(store(other_space, WRONG), RIGHT)
    for target in (theirs.id, uuid.uuid4()):
        for action in ("accept", "dismiss"):
            response = dev.post(f"/api/v1/corrections/{target}/{action}", {}, format="json")
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "SUGGESTION_NOT_FOUND"
    theirs.refresh_from_db()
    assert theirs.status == "pending"
    for action in ("accept", "dismiss"):  # a malformed id is the same JSON 404 as an unknown one
        response = dev.post(f"/api/v1/corrections/not-a-uuid/{action}", {}, format="json")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "SUGGESTION_NOT_FOUND"


def test_accept_failing_half_way_changes_nothing(space, dev, monkeypatch):
    """A failure half-way (here: the embedding model) rolls back the suggestion's status too."""
    suggestion = suggest(store(space, WRONG), RIGHT)

    def broken(texts, **kwargs):
        raise embedding.EmbeddingError("model gone")

    monkeypatch.setattr(embedding, "embed_many", broken)
    response = dev.post(f"/api/v1/corrections/{suggestion.id}/accept", {}, format="json")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "EMBEDDING_FAILED"
    suggestion.refresh_from_db()
    assert suggestion.status == "pending"
    assert not Thought.objects.filter(thought_category="correction").exists()


# --- POST /thoughts/{id}/correct -------------------------------------------------------------------


def test_correct_a_thought_and_the_wrong_fact_is_guarded_from_then_on(space, dev):
    wrong = store(space, WRONG, topic="team", vector=embedding.embed(WRONG))
    copy = store(space, "Thomas, certified Neuroimaginations-Coach, runs the coaching.", topic="team")
    response = dev.post(
        f"/api/v1/thoughts/{wrong.id}/correct",
        {
            "correct_fact": RIGHT,
            "supersedes": [str(copy.id)],
            "source_ref": {"type": "url", "value": "human-correction", "project": "best-practices"},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["superseded_count"] == 2
    assert "supersedes 2 previous thoughts" in body["guidance"]
    correction = body["correction"]
    assert correction["corrected_fact"] == WRONG and correction["topic"] == "team"
    assert correction["supersedes"] == [str(wrong.id), str(copy.id)]
    assert correction["source_ref"]["value"] == "human-correction"
    for thought in (wrong, copy):
        thought.refresh_from_db()
        assert thought.superseded and str(thought.superseded_by_id) == correction["thought_id"]

    paraphrase = "Thomas is a certified Neuroimaginations coach."
    hit = correction_guard(space=space, vector=embedding.embed(paraphrase), text=paraphrase)
    assert hit is not None and str(hit.id) == correction["thought_id"]


def test_a_thought_corrected_twice_answers_with_one_live_correction(space, dev):
    # Before: the first correction stayed live beside the second; a question about the fact got both
    # "correct" facts as live sources, the outdated one above the newer.
    wrong = store(space, WRONG, topic="team", vector=embedding.embed(WRONG))
    first = dev.post(f"/api/v1/thoughts/{wrong.id}/correct", {"correct_fact": RIGHT}, format="json").json()
    newer = "Gerhard Quiring is the certified Neuroimaginations-Coach; he coaches through the joint venture."
    response = dev.post(f"/api/v1/thoughts/{wrong.id}/correct", {"correct_fact": newer}, format="json")
    assert response.status_code == 201, response.json()
    second = response.json()
    assert second["superseded_count"] == 2 and "supersedes 2 previous thoughts" in second["guidance"]
    assert second["correction"]["supersedes"] == [str(wrong.id), first["correction"]["thought_id"]]

    answer = dev.get("/api/v1/memory", {"prompt": "Who is the certified Neuroimaginations-Coach?"}).json()
    corrections = [s for s in answer["result"]["sources"] if s["thought_id"] != str(wrong.id)]
    assert [(s["thought_id"], s["superseded"]) for s in corrections] == [
        (second["correction"]["thought_id"], False),
        (first["correction"]["thought_id"], True),
    ]


def test_a_correction_answers_with_the_copies_it_flagged_and_outranks_them(space, dev):
    wrong = store(space, WRONG, topic="team", vector=embedding.embed(WRONG))
    missed_text = "Team profile: Thomas, certified Neuroimaginations-Coach, leads the coaching offer."
    missed = store(space, missed_text, vector=embedding.embed(missed_text))
    response = dev.post(f"/api/v1/thoughts/{wrong.id}/correct", {"correct_fact": RIGHT}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["repeats_flagged"] == [str(missed.id)]
    assert "1 other live thought repeat the wrong fact and was flagged" in body["guidance"]
    answer = dev.get("/api/v1/memory", {"prompt": "Who is the certified Neuroimaginations-Coach?"}).json()
    order = [s["thought_id"] for s in answer["result"]["sources"]]
    assert order.index(body["correction"]["thought_id"]) < order.index(str(missed.id))


def test_correct_with_explicit_fields(space, dev):
    wrong = store(space, "Team page: Thomas (NI coach).")
    response = dev.post(
        f"/api/v1/thoughts/{wrong.id}/correct",
        {"correct_fact": RIGHT, "corrected_fact": WRONG, "prompt": "CORRECTION: NI coaching is a JV.", "topic": "x"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()["correction"]
    assert (body["corrected_fact"], body["content"], body["topic"]) == (WRONG, "CORRECTION: NI coaching is a JV.", "x")


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"correct_fact": "   "},
        {"correct_fact": RIGHT, "supersedes": ["nope"]},
        {"correct_fact": RIGHT, "source_ref": {"type": "rumour", "value": "x"}},
        {"correct_fact": "x" * 10001},
    ],
)
def test_correct_bad_input_is_400_and_changes_nothing(space, dev, payload):
    wrong = store(space, WRONG)
    response = dev.post(f"/api/v1/thoughts/{wrong.id}/correct", payload, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    wrong.refresh_from_db()
    assert not wrong.superseded
    assert not Thought.objects.filter(thought_category="correction").exists()


def test_correct_with_unknown_or_foreign_extra_id_changes_nothing(space, other_space, dev):
    wrong = store(space, WRONG)
    theirs = store(other_space, WRONG)
    for extra in (uuid.uuid4(), theirs.id):
        response = dev.post(
            f"/api/v1/thoughts/{wrong.id}/correct", {"correct_fact": RIGHT, "supersedes": [str(extra)]}, format="json"
        )
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "THOUGHT_NOT_FOUND"
        assert response.json()["error"]["missing"] == [str(extra)]
    wrong.refresh_from_db()
    theirs.refresh_from_db()
    assert not wrong.superseded and not theirs.superseded
    assert not Thought.objects.filter(thought_category="correction").exists()


def test_correct_a_thought_of_another_space_is_404(space, other_space, dev):
    theirs = store(other_space, WRONG)
    for target in (theirs.id, uuid.uuid4(), "12345"):  # malformed: THOUGHT_NOT_FOUND like thoughts/{id}
        response = dev.post(f"/api/v1/thoughts/{target}/correct", {"correct_fact": RIGHT}, format="json")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "THOUGHT_NOT_FOUND"
    theirs.refresh_from_db()
    assert not theirs.superseded


# --- pending corrections for the memory response --------------------------------------------------


def test_pending_for_an_agent_or_its_session(space, other_space, agent_factory):
    dev, qa = agent_factory("dev"), agent_factory("qa")
    old = store(space, WRONG)
    by_agent = suggest(old, "one", agent=dev.agent)
    by_session = suggest(old, "two", session_id="sess-1")
    by_other = suggest(old, "three", agent=qa.agent, session_id="sess-2")
    CorrectionSuggestion.objects.create(
        space=space, thought=old, statement="four", origin="contradiction_detector", agent=dev.agent, status="accepted"
    )
    suggest(store(other_space, WRONG), "five", session_id="sess-1")

    def pending(agent=None, session_id=None, limit=20) -> list[str]:
        items = suggestions_pending_items(space=space, agent=agent, session_id=session_id, limit=limit)
        return [item["suggestion_id"] for item in items]

    assert pending(dev.agent) == [str(by_agent.id)]
    assert pending(dev.agent, "sess-1") == [str(by_session.id), str(by_agent.id)]
    assert pending(None, "sess-1") == [str(by_session.id)]
    assert pending() == [str(by_other.id), str(by_session.id), str(by_agent.id)]
    assert pending(dev.agent, "sess-1", limit=1) == [str(by_session.id)]
    (item,) = suggestions_pending_items(space=space, agent=dev.agent, limit=20)
    assert item["suggestion_id"] == str(by_agent.id) and item["thought_preview"] == old.content[:80]
    assert item["thought_id"] == str(old.id) and item["accept"] == f"/api/v1/corrections/{by_agent.id}/accept"
    # Each item is the suggestion's row as the ORM reads it, in the memory response's shape.
    from django.db.models.functions import Left

    from brain.services.suggestions import PENDING_FIELDS, suggestion_as_pending

    items = suggestions_pending_items(space=space, agent=dev.agent, session_id="sess-1", limit=20)
    for item, suggestion in zip(items, (by_session, by_agent), strict=True):
        (row,) = CorrectionSuggestion.objects.filter(pk=suggestion.pk).values(
            *PENDING_FIELDS, thought_preview=Left("thought__content", 80)
        )
        assert item == suggestion_as_pending(row)
    assert items[0]["draft"]["supersedes"] == [str(old.id)]
