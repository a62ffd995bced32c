"""GET /api/v1/thoughts (filters, paging, space-bound) and POST /api/v1/thoughts/{id}/retract."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from brain.choices import ThoughtCategory
from brain.models import Thought
from tests import web_support

ada = web_support.ada

pytestmark = pytest.mark.django_db


def contribute(client, prompt: str, **fields) -> str:
    response = client.post("/api/v1/memory", {"prompt": prompt, **fields}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["trace"]["thought_id"]


@pytest.fixture
def brain(agent_factory, fake_embedder, other_space):
    dev, qa = agent_factory("dev", name="dev-a"), agent_factory("qa", name="qa-b")
    ids = {
        "deploy": contribute(
            dev,
            "Deploys run migrations before restarting the web workers, never after, to avoid errors.",
            thought_category="operational_learning",
            topic="deploys",
        ),
        "billing": contribute(qa, "Billing webhooks retry five times with jitter and exponential backoff."),
        "deploy2": contribute(
            qa,
            "Deploys run migrations before restarting the web workers and show the maintenance banner meanwhile.",
            thought_category="operational_learning",
            topic="deploys",
        ),
    }
    outsider = agent_factory("dev", name="outsider", in_space=other_space)
    contribute(
        outsider, "Another space's deploys run on Fridays after the weekly review meeting only.", topic="deploys"
    )
    return dev, qa, ids


def test_list_filters_and_space(brain):
    dev, qa, ids = brain
    everything = dev.get("/api/v1/thoughts").json()
    assert everything["count"] == 3  # the other space's thought is not listed
    assert [t["thought_id"] for t in everything["results"]] == [ids["deploy2"], ids["billing"], ids["deploy"]]
    by_topic = dev.get("/api/v1/thoughts", {"topic": "deploys"}).json()
    assert {t["thought_id"] for t in by_topic["results"]} == {ids["deploy"], ids["deploy2"]}
    assert dev.get("/api/v1/thoughts", {"contributor": "qa-b"}).json()["count"] == 2
    assert dev.get("/api/v1/thoughts", {"category": "operational_learning"}).json()["count"] == 2
    tomorrow = (timezone.now() + timedelta(days=1)).date().isoformat()
    assert dev.get("/api/v1/thoughts", {"since": tomorrow}).json()["count"] == 0
    yesterday = (timezone.now() - timedelta(days=1)).isoformat()
    assert dev.get("/api/v1/thoughts", {"since": yesterday}).json()["count"] == 3


def test_a_since_whose_offset_lost_its_plus_to_the_query_string_is_read_as_written(brain):
    """?since=2026-11-29T10:00:00+01:00 typed into a URL: an unencoded "+" is a space in a query string, and
    DRF refused the value with "Use one of these formats instead: ...[+HH:MM|-HH:MM|Z]", the format used."""
    dev, _, _ = brain
    an_hour_ago = timezone.now().astimezone(timezone.get_fixed_timezone(60)) - timedelta(hours=1)
    written = an_hour_ago.strftime("%Y-%m-%dT%H:%M:%S+01:00")
    for sent in (written.replace("+", "%2B"), written):  # encoded, then as typed
        response = dev.get(f"/api/v1/thoughts?since={sent}")
        assert response.status_code == 200, response.content
        assert response.json()["count"] == 3
    in_an_hour = (an_hour_ago + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S+01:00")
    assert dev.get(f"/api/v1/thoughts?since={in_an_hour}").json()["count"] == 0
    assert dev.get("/api/v1/thoughts?since=2026-11-29T10:00:00 +01:00").status_code == 400  # not a lost "+"


def test_list_paging(brain):
    dev, _, ids = brain
    first = dev.get("/api/v1/thoughts", {"limit": 2}).json()
    assert (first["count"], first["next_offset"], len(first["results"])) == (3, 2, 2)
    second = dev.get("/api/v1/thoughts", {"limit": 2, "offset": first["next_offset"]}).json()
    assert second["next_offset"] is None
    assert [t["thought_id"] for t in second["results"]] == [ids["deploy"]]


def _pages(client, params: dict, cursor: str | None = None, between=None) -> list[list[str]]:
    """Every page's ids, following next_cursor; ``between()`` runs after the first page."""
    pages = []
    while True:
        page = client.get("/api/v1/thoughts", {**params, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.json()
        pages.append([t["thought_id"] for t in page.json()["results"]])
        cursor = page.json()["next_cursor"]
        if len(pages) == 1 and between is not None:
            between()
        if cursor is None:
            return pages


def test_a_thought_contributed_between_pages_is_not_listed_twice_with_the_cursor(brain):
    """Offset paging, newest first: a contribution between two pages pushed every row down by one, and
    the second page (offset=next_offset) repeated the first page's last thought."""
    dev, qa, ids = brain
    before = [ids["deploy2"], ids["billing"], ids["deploy"]]
    new = []
    pages = _pages(
        dev,
        {"limit": 2},
        between=lambda: new.append(contribute(qa, "Invoices are archived nightly into the cold storage bucket.")),
    )
    assert pages == [before[:2], before[2:]]  # the new one is before the cursor: not repeated, not missed
    offset_page = dev.get("/api/v1/thoughts", {"limit": 2, "offset": 2}).json()["results"]
    assert [t["thought_id"] for t in offset_page] == [before[1], before[2]]  # what offset paging does
    assert _pages(dev, {"limit": 2}) == [[new[0], before[0]], before[1:]]


def test_a_thought_superseded_between_pages_does_not_hide_a_live_one_with_the_cursor(brain):
    """superseded=false, offset paging: a thought of the first page retracted meanwhile left the filter,
    every row moved up by one, and the second page skipped a live thought the agent had never seen."""
    dev, qa, ids = brain
    extra = contribute(dev, "Search indexes are rebuilt on Sundays while the traffic is lowest.")
    live = [extra, ids["deploy2"], ids["billing"], ids["deploy"]]

    def retract_the_first():
        response = dev.post(f"/api/v1/thoughts/{extra}/retract", {"reason": "wrong day"}, format="json")
        assert response.status_code == 200, response.json()

    pages = _pages(dev, {"limit": 2, "superseded": "false"}, between=retract_the_first)
    assert pages == [live[:2], live[2:]]


def test_the_cursor_keeps_the_filters_order_and_knows_the_last_page(brain):
    dev, _, ids = brain
    assert _pages(dev, {"limit": 1, "topic": "deploys"}) == [[ids["deploy2"]], [ids["deploy"]]]
    assert _pages(dev, {"limit": 3}) == [[ids["deploy2"], ids["billing"], ids["deploy"]]]  # exactly one page
    last = dev.get("/api/v1/thoughts", {"limit": 3}).json()
    assert (last["next_cursor"], last["next_offset"]) == (None, None)


def _cursor(values) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode()


A_UUID = "0360c942-5f24-4d23-b680-ef5c93b0fa69"


@pytest.mark.parametrize(
    "cursor",
    [
        "nonsense",
        "null",
        "%00",
        _cursor([]),
        _cursor(["yesterday", A_UUID]),  # not a time
        _cursor(["2026-11-29T10:00:00", A_UUID]),  # a time without its offset
        _cursor(["2026-11-29T10:00:00+00:00", "x"]),  # not a UUID
        _cursor(["2026-11-29T10:00:00+00:00", A_UUID, "extra"]),
        _cursor([1, 2]),
        _cursor({"created_at": "2026-11-29T10:00:00+00:00"}),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_a_cursor_the_list_did_not_give_is_a_400_saying_what_to_send(brain, cursor):
    dev, _, _ = brain
    response = dev.get("/api/v1/thoughts", {"cursor": cursor})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    if cursor != "%00":
        assert "next_cursor of the previous page" in error["message"], error


def test_a_well_formed_cursor_of_any_position_pages_from_there(brain):
    dev, _, ids = brain
    far_future = _cursor(["2999-01-01T00:00:00+00:00", A_UUID])
    assert [t["thought_id"] for t in dev.get("/api/v1/thoughts", {"cursor": far_future}).json()["results"]] == [
        ids["deploy2"],
        ids["billing"],
        ids["deploy"],
    ]
    long_ago = _cursor(["0001-01-01T00:00:00+14:00", A_UUID])
    assert dev.get("/api/v1/thoughts", {"cursor": long_ago}).json()["results"] == []


def test_a_cursor_with_an_offset_is_a_400(brain):
    dev, _, _ = brain
    cursor = dev.get("/api/v1/thoughts", {"limit": 1}).json()["next_cursor"]
    response = dev.get("/api/v1/thoughts", {"cursor": cursor, "offset": 0})
    assert response.status_code == 400
    assert "cursor or offset, not both" in response.json()["error"]["message"]


def test_another_spaces_cursor_lists_only_the_callers_thoughts(brain, agent_factory, other_space):
    dev, _, ids = brain
    outsider = agent_factory("dev", name="outsider-2", in_space=other_space)
    contribute(outsider, "The other space keeps its release notes in the wiki under Releases.")
    cursor = outsider.get("/api/v1/thoughts", {"limit": 1}).json()["next_cursor"]
    assert cursor is not None
    listed = [t["thought_id"] for t in dev.get("/api/v1/thoughts", {"cursor": cursor}).json()["results"]]
    assert set(listed) <= {ids["deploy"], ids["billing"], ids["deploy2"]}


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 201},
        {"offset": -1},
        {"category": "nonsense"},
        {"since": "yesterday"},
        {"superseded": "x"},
    ],
)
def test_list_bad_input_is_a_400_in_the_envelope(brain, params):
    dev, _, _ = brain
    response = dev.get("/api/v1/thoughts", params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_list_needs_a_token(anon):
    assert anon.get("/api/v1/thoughts").status_code == 401


def test_retract_own_thought(brain):
    dev, _, ids = brain
    response = dev.post(f"/api/v1/thoughts/{ids['deploy']}/retract", {"reason": "wrong team"}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()["thought"]
    assert body["superseded"] is True and body["superseded_by"] is None and "retracted" in body["quality_flags"]
    assert body["retraction"]["reason"] == "wrong team" and body["retraction"]["by"] == "dev-a"
    thought = Thought.objects.get(id=ids["deploy"])  # never deleted
    assert thought.superseded and thought.superseded_at is not None
    live = dev.get("/api/v1/thoughts", {"superseded": "false"}).json()
    assert ids["deploy"] not in {t["thought_id"] for t in live["results"]}
    gone = dev.get("/api/v1/thoughts", {"superseded": "true"}).json()
    assert [t["thought_id"] for t in gone["results"]] == [ids["deploy"]]
    again = dev.post(f"/api/v1/thoughts/{ids['deploy']}/retract", {"reason": "again"}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "ALREADY_RETRACTED"


def test_retract_refusals_change_nothing(brain, agent_factory, other_space):
    dev, qa, ids = brain
    other = qa.post(f"/api/v1/thoughts/{ids['deploy']}/retract", {"reason": "not mine"}, format="json")
    assert other.status_code == 403 and other.json()["error"]["code"] == "NOT_CONTRIBUTOR"
    assert "/correct" in other.json()["error"]["message"]
    no_reason = dev.post(f"/api/v1/thoughts/{ids['deploy']}/retract", {"reason": "  "}, format="json")
    assert no_reason.status_code == 400
    outsider = agent_factory("dev", name="outsider-2", in_space=other_space)
    foreign = outsider.post(f"/api/v1/thoughts/{ids['deploy']}/retract", {"reason": "x"}, format="json")
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "THOUGHT_NOT_FOUND"
    assert dev.post("/api/v1/thoughts/not-a-uuid/retract", {"reason": "x"}, format="json").status_code == 404
    assert not Thought.objects.get(id=ids["deploy"]).superseded


def test_markers_cannot_be_retracted(dev, space):
    from brain.services.thoughts import thought_create

    marker = thought_create(
        space=space,
        content="TASK ready→active: DEV t (p) — claiming",
        contributor_id="system",
        contributor_name="system",
        thought_category=ThoughtCategory.TRANSITION_MARKER,
        agent=dev.agent,
    )
    response = dev.post(f"/api/v1/thoughts/{marker.id}/retract", {"reason": "noise"}, format="json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "MARKER_NOT_RETRACTABLE"


def test_a_retracted_thought_answers_no_memory_call_and_stays_for_audit(brain):
    """Withdrawn with nothing after it, it has nothing to hand over: memory calls leave it out (the search's
    pools skip dead ends); the thought itself, its record and the list of superseded thoughts keep it."""
    dev, _, ids = brain
    query = "Deploys run migrations before restarting the web workers, never after, to avoid errors."
    before = dev.get("/api/v1/memory", {"prompt": query, "contribute": "false"}).json()["result"]["sources"]
    assert before[0]["thought_id"] == ids["deploy"]  # the exact text ranks first while live
    dev.post(f"/api/v1/thoughts/{ids['deploy']}/retract", {"reason": "wrong"}, format="json")
    after = dev.get("/api/v1/memory", {"prompt": query, "contribute": "false"}).json()["result"]["sources"]
    assert after and ids["deploy"] not in [s["thought_id"] for s in after]
    assert all(not s["superseded"] for s in after)
    kept = dev.get(f"/api/v1/thoughts/{ids['deploy']}").json()
    assert kept["superseded"] and "retracted" in kept["quality_flags"]


def test_human_retracts_on_the_thought_page(brain, client, ada):
    _, _, ids = brain
    page = client.get(f"/brain/thoughts/{ids['billing']}/")
    assert b"Retract this thought" in page.content
    response = client.post(f"/brain/thoughts/{ids['billing']}/retract/", {"reason": "posted by mistake"}, follow=True)
    assert b"Retracted by ada: posted by mistake" in response.content
    thought = Thought.objects.get(id=ids["billing"])
    assert thought.superseded and thought.context_metadata["retraction"]["by_kind"] == "human"
    assert b"Retract this thought" not in response.content


def test_a_human_retraction_with_a_nul_in_its_reason_is_refused_on_the_page(brain, client, ada):
    """The web form passed the reason straight to the service: a NUL reached PostgreSQL's jsonb (a 500)."""
    _, _, ids = brain
    response = client.post(f"/brain/thoughts/{ids['billing']}/retract/", {"reason": "posted\x00 twice"}, follow=True)
    assert response.status_code == 200
    assert b"Not retracted" in response.content and b"NUL" in response.content
    assert not Thought.objects.get(id=ids["billing"]).superseded


# --- what a retracted thought superseded is handed back ------------------------------------------


def retract(client, thought_id, reason="stored by mistake"):
    response = client.post(f"/api/v1/thoughts/{thought_id}/retract", {"reason": reason}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def state(thought_id):
    t = Thought.objects.get(id=thought_id)
    return t.superseded, t.refined_by_id and str(t.refined_by_id), t.superseded_by_id and str(t.superseded_by_id)


def test_retracting_a_refinement_brings_its_source_back(brain):
    # Before: the source stayed superseded by a retracted refinement, so the topic had no live thought.
    dev, _, ids = brain
    refinement = contribute(
        dev, "Deploys run migrations first, then restart web workers one at a time.", refines=ids["deploy"]
    )
    assert state(ids["deploy"]) == (True, refinement, None)
    body = retract(dev, refinement)
    assert body["live_again"] == [ids["deploy"]]
    assert f"The 1 thought it had superseded is live again: {ids['deploy']}." in body["guidance"]
    assert state(ids["deploy"]) == (False, None, None)
    assert Thought.objects.get(id=ids["deploy"]).superseded_at is None
    live = dev.get("/api/v1/thoughts", {"superseded": "false", "topic": "deploys"}).json()["results"]
    assert ids["deploy"] in {t["thought_id"] for t in live}


def test_retracting_a_consolidation_hands_each_source_to_what_else_supersedes_it(brain):
    dev, qa, ids = brain
    by_qa = contribute(
        qa, "Deploys show the maintenance banner while migrations run, then restart.", refines=ids["deploy2"]
    )
    merged = contribute(
        dev,
        "Deploys: migrations first, banner on, then restart the web workers.",
        consolidates=[ids["deploy"], ids["deploy2"]],
    )
    assert state(ids["deploy2"]) == (True, merged, None)
    body = retract(dev, merged)
    assert body["live_again"] == [ids["deploy"]]
    assert state(ids["deploy"]) == (False, None, None)
    assert state(ids["deploy2"]) == (True, by_qa, None)  # still refined by qa's live refinement


def test_retracting_a_correction_brings_back_what_it_superseded(brain):
    dev, qa, ids = brain
    first = qa.post(
        f"/api/v1/thoughts/{ids['billing']}/correct",
        {"correct_fact": "Billing webhooks retry three times."},
        format="json",
    )
    first_id = first.json()["correction"]["thought_id"]
    second = dev.post(
        f"/api/v1/thoughts/{ids['billing']}/correct", {"correct_fact": "They retry ten times."}, format="json"
    )
    second_id = second.json()["correction"]["thought_id"]
    assert state(first_id) == (True, None, second_id)
    # dev's correction was the mistake: the billing thought goes back to qa's correction, which is live again.
    body = retract(dev, second_id)
    assert body["live_again"] == [first_id]
    assert state(ids["billing"]) == (True, None, first_id)
    assert state(first_id) == (False, None, None)
    body = retract(qa, first_id)
    assert body["live_again"] == [ids["billing"]] and state(ids["billing"]) == (False, None, None)


def test_retracting_a_refinement_that_was_refined_leaves_the_line_to_its_successor(brain):
    dev, _, ids = brain
    middle = contribute(dev, "Deploys run migrations first; the web workers restart after them.", refines=ids["deploy"])
    head = contribute(
        dev, "Deploys run migrations first; web workers restart one at a time after them.", refines=middle
    )
    body = retract(dev, middle)
    assert body["live_again"] == [] and "live again" not in body["guidance"]
    assert state(ids["deploy"]) == (True, middle, None) and state(head)[0] is False


def test_a_retracted_source_stays_retracted_when_its_refinement_is_retracted(brain):
    dev, _, ids = brain
    refinement = contribute(
        dev, "Deploys run migrations first, then restart web workers one at a time.", refines=ids["deploy"]
    )
    retract(dev, ids["deploy"], reason="the source was wrong too")
    assert retract(dev, refinement)["live_again"] == []
    assert state(ids["deploy"]) == (True, None, None)
    assert "retracted" in Thought.objects.get(id=ids["deploy"]).quality_flags


def test_a_human_retracting_a_refinement_on_its_page_is_told_what_is_live_again(brain, client, ada):
    dev, _, ids = brain
    refinement = contribute(
        dev, "Billing webhooks retry five times with jitter, then alert on-call.", refines=ids["billing"]
    )
    response = client.post(f"/brain/thoughts/{refinement}/retract/", {"reason": "posted by mistake"}, follow=True)
    assert f"The 1 thought it had superseded is live again: {ids['billing']}.".encode() in response.content
    assert state(ids["billing"]) == (False, None, None)


# --- redact: a leaked secret ----------------------------------------------------------------------

SECRET = "The production database password is hunter2-Zebra-91; the deploy script reads it from this note."


def test_a_retraction_with_redact_erases_the_text_wherever_colony_keeps_it(brain, space):
    # Before there was no way to: a retracted secret stayed in the thought (served, ranked last, in
    # GET /thoughts/{id}, the explorer and the export), in its query-log entry, in turn excerpts and in
    # the suggestions quoting it.
    from brain.models import CorrectionSuggestion, QueryLog
    from brain.services.retraction import REDACTED_CONTENT
    from quality.models import TurnItem
    from tests.quality_support import make_turn

    dev, _, ids = brain
    secret = contribute(dev, SECRET)
    thought = Thought.objects.get(id=secret)
    make_turn(dev.agent, timezone.now(), [(thought, True, True, False)])
    old = Thought.objects.get(id=ids["deploy"])
    CorrectionSuggestion.objects.create(
        space=space, thought=old, contradicting_thought=thought, statement=SECRET, origin="contradiction_detector"
    )
    kept = "The staging mail relay token is relay-Kept-55, stored here by mistake; rotate it next week."
    body = retract(dev, contribute(dev, kept), reason="not a brain fact")
    assert body["thought"]["content"] == kept  # not asked to redact: kept for audit

    response = dev.post(
        f"/api/v1/thoughts/{secret}/retract", {"reason": "a leaked password", "redact": True}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["guidance"].startswith("Retracted and redacted")
    stored = Thought.objects.get(id=secret)
    assert stored.content == REDACTED_CONTENT and stored.embedding is None  # a new vector comes after commit
    assert stored.context_metadata["retraction"]["redacted"] is True
    assert dev.get(f"/api/v1/thoughts/{secret}").json()["content"] == REDACTED_CONTENT
    assert not QueryLog.objects.filter(query_text__contains="hunter2").exists()
    assert not TurnItem.objects.filter(excerpt__contains="hunter2").exists()
    assert not CorrectionSuggestion.objects.filter(statement__contains="hunter2").exists()
    found = dev.get("/api/v1/memory", {"prompt": "production database password hunter2", "contribute": "false"}).json()
    assert "hunter2" not in json.dumps(found)


def test_a_secret_retracted_without_redact_can_be_redacted_afterwards(brain):
    # Before: the second retraction was a 409 ALREADY_RETRACTED, and the secret stayed for good.
    from brain.services.retraction import REDACTED_CONTENT

    dev, _, _ = brain
    secret = contribute(dev, SECRET)
    retract(dev, secret, reason="stored by mistake")
    response = dev.post(
        f"/api/v1/thoughts/{secret}/retract", {"reason": "it holds a password", "redact": True}, format="json"
    )
    assert response.status_code == 200, response.json()
    stored = Thought.objects.get(id=secret)
    assert stored.content == REDACTED_CONTENT
    assert stored.context_metadata["retraction"]["reason"] == "stored by mistake"  # the first record stays
    assert stored.context_metadata["retraction"]["redacted_reason"] == "it holds a password"
    again = dev.post(f"/api/v1/thoughts/{secret}/retract", {"reason": "again", "redact": True}, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "ALREADY_RETRACTED"


def test_a_redaction_erases_the_copies_another_agents_correction_made_of_the_text(brain):
    # Before: a correction made with only correct_fact copies the thought's text into its corrected_fact
    # and its default content; redacting the original left that copy served (GET, memory search) and in
    # the correction's idempotency receipt, which a replay answers with.
    from brain.models import ImportReceipt, QueryLog

    dev, qa, _ = brain
    secret = contribute(dev, SECRET)
    right = "The production database password lives in the vault; no note holds it."
    made = qa.post(
        f"/api/v1/thoughts/{secret}/correct", {"correct_fact": right}, format="json", HTTP_IDEMPOTENCY_KEY="fix-1"
    )
    assert made.status_code == 201, made.json()
    correction = made.json()["correction"]["thought_id"]
    assert "hunter2" in dev.get(f"/api/v1/thoughts/{correction}").content.decode()  # the copy, before
    asked = qa.post(
        "/api/v1/memory",
        {"prompt": "Where is the production database password?", "contribute": False},
        format="json",
        HTTP_IDEMPOTENCY_KEY="ask-1",
    )
    assert "hunter2" in asked.content.decode()  # the answer its receipt keeps previews the secret

    response = dev.post(f"/api/v1/thoughts/{secret}/retract", {"reason": "a password", "redact": True}, format="json")
    assert response.status_code == 200, response.json()

    served = dev.get(f"/api/v1/thoughts/{correction}")
    assert served.status_code == 200 and "hunter2" not in served.content.decode()
    assert served.json()["content"] == f"CORRECTION: It is wrong that [redacted] Correct: {right}"
    stored = Thought.objects.get(id=correction)
    assert stored.corrected_fact_embedding is None and stored.embedding is None  # vectors of the old text go
    assert not ImportReceipt.objects.filter(response__icontains="hunter2").exists()
    assert not QueryLog.objects.filter(query_text__contains="hunter2").exists()
    found = dev.get("/api/v1/memory", {"prompt": "production database password hunter2", "contribute": "false"})
    assert "hunter2" not in found.content.decode()
    replay = qa.post(
        f"/api/v1/thoughts/{secret}/correct", {"correct_fact": right}, format="json", HTTP_IDEMPOTENCY_KEY="fix-1"
    )
    assert "hunter2" not in replay.content.decode()


def test_a_human_redacts_on_the_thought_page(brain, client, ada):
    from brain.services.retraction import REDACTED_CONTENT

    dev, _, _ = brain
    secret = contribute(dev, SECRET)
    assert b"Also erase its text" in client.get(f"/brain/thoughts/{secret}/").content
    response = client.post(f"/brain/thoughts/{secret}/retract/", {"reason": "leaked", "redact": "on"}, follow=True)
    assert b"Retracted and redacted" in response.content and b"hunter2" not in response.content
    assert Thought.objects.get(id=secret).content == REDACTED_CONTENT
    assert b"Erase its text" not in response.content  # nothing left to erase
    kept = contribute(dev, "The staging relay token is relay-Kept-55, stored here by mistake; rotate it soon.")
    page = client.post(f"/brain/thoughts/{kept}/retract/", {"reason": "mistake"}, follow=True).content
    assert b"Erase its text" in page and b"relay-Kept-55" in page  # retracted, its text kept: it can be erased
    page = client.post(f"/brain/thoughts/{kept}/retract/", {"reason": "a token", "redact": "on"}, follow=True).content
    assert b"relay-Kept-55" not in page and b"Erase its text" not in page


def test_a_topic_is_one_topic_whatever_its_case(brain, space):
    # Before: "Deploys" and "deploys" were two topics; a filter in the other case silently matched nothing.
    dev, _, ids = brain  # the fixture's two deploy thoughts have topic "deploys"
    capital = contribute(
        dev, "Deploys drain the queue workers before the migrations run, then restart them.", topic=" Deploys "
    )
    assert Thought.objects.get(id=capital).topic == "deploys"
    listed = dev.get("/api/v1/thoughts", {"topic": "DEPLOYS"}).json()
    assert {t["thought_id"] for t in listed["results"]} == {ids["deploy"], ids["deploy2"], capital}
    found = dev.get(
        "/api/v1/memory", {"prompt": "how do deploys run", "filter_topic": "Deploys", "contribute": "false"}
    ).json()
    assert {s["thought_id"] for s in found["result"]["sources"]} == {ids["deploy"], ids["deploy2"], capital}
    imported = dev.post(
        "/api/v1/thoughts/import", [{"content": "Backups run nightly at two.", "topic": "Backups"}], format="json"
    )
    assert imported.status_code in (200, 201), imported.json()
    assert Thought.objects.filter(topic="backups").count() == 1


def test_the_explorer_browses_a_topic_whatever_its_case(brain, client, ada):
    _, _, ids = brain
    page = client.get("/brain/", {"topic": "DePloys"}).content.decode()
    assert ids["deploy"] in page and ids["deploy2"] in page
