"""The brain explorer: search as the agents do, a thought with lineage and corrections, suggestions, corrections."""

from __future__ import annotations

import html
import re

import pytest

from brain.choices import SuggestionOrigin, SuggestionStatus, ThoughtCategory, ThoughtType
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.services.suggestions import suggestion_create
from brain.services.thoughts import thought_create
from tests import web_support
from tests.conftest import fake_vector

ada = web_support.ada  # the logged-in human fixture, defined once for the web tests

pytestmark = pytest.mark.django_db


def store(space, content, **fields):
    return thought_create(
        space=space,
        content=content,
        contributor_id=fields.pop("contributor_id", "agent-dev-1"),
        contributor_name=fields.pop("contributor_name", "dev-1"),
        embedding=fake_vector(content),
        **fields,
    )


def _body(response) -> str:
    return response.content.decode()


def test_explorer_lists_the_newest_thoughts_of_the_current_space(client, ada, space, other_space):
    store(space, "The parser caches compiled grammars per worker.")
    store(other_space, "Rival secret: their parser is slow.")
    body = _body(client.get("/brain/"))
    assert "caches compiled grammars" in body and "Rival secret" not in body


def _rows(body: str) -> list[str]:
    return re.findall(r'<tr data-thought="([0-9a-f-]+)"', body)


def test_the_explorer_pages_older_thoughts_and_a_new_contribution_moves_nothing(client, ada, space):
    """Before: the newest 20 thoughts and nothing further; a human could not browse older thoughts."""
    stored = [store(space, f"Observation number {i} about the nightly backup job.") for i in range(25)]
    newest_first = [str(t.id) for t in reversed(stored)]
    first = _body(client.get("/brain/"))
    assert _rows(first) == newest_first[:20] and "Newest thoughts" in first
    older = re.search(r'<a href="(/brain/\?cursor=[^"]+)" rel="next">Older thoughts', first)
    assert older, "no link to the older thoughts"
    store(space, "A contribution made while the human reads the first page.")
    second = _body(client.get(html.unescape(older[1])))
    assert _rows(second) == newest_first[20:]  # right after the first page: nothing repeated, nothing skipped
    assert "Older thoughts</h2>" in second and "Back to the newest" in second and 'rel="next"' not in second


def test_the_explorer_browses_a_topic_or_a_category_without_a_search(client, ada, space):
    backups = [store(space, f"Backups fact {i}: snapshots are kept for a week.", topic="backups") for i in range(22)]
    store(space, "Deploys run at noon.", topic="deploys")
    decision = store(space, "Keep two replicas.", thought_category="decision_record", alternatives_considered="x")
    first = _body(client.get("/brain/", {"topic": "backups"}))
    assert _rows(first) == [str(t.id) for t in reversed(backups)][:20] and "on topic backups" in first
    older = re.search(r'<a href="(/brain/\?[^"]+)" rel="next">', first)
    assert older and "topic=backups" in older[1]  # the next page keeps the filter
    assert _rows(_body(client.get(html.unescape(older[1])))) == [str(t.id) for t in reversed(backups)][20:]
    assert _rows(_body(client.get("/brain/", {"category": "decision_record"}))) == [str(decision.id)]
    assert "No thought of this space matches these filters." in _body(client.get("/brain/", {"topic": "nothing"}))


def test_a_tampered_older_link_shows_the_newest_with_a_message(client, ada, space):
    kept = store(space, "Backups are verified every Monday by restoring one.", topic="backups")
    store(space, "Deploys run at noon.", topic="deploys")
    body = _body(client.get("/brain/", {"topic": "backups", "cursor": "not-a-cursor"}))
    assert "not one the explorer gave" in body
    assert _rows(body) == [str(kept.id)]  # the valid filter still applies


def test_search_ranks_with_the_agents_retrieval_and_shows_category_flags_state_and_score(
    client, ada, space, other_space, fake_embedder
):
    text = "Deploys run through the blue green pipeline on Fridays."
    hit = store(space, text, thought_category="operational_learning", topic="deploy")
    old = store(space, text, superseded=True, superseded_by=hit)  # what hit replaced (a dead end isn't searched)
    flagged = store(space, "Deploys pipeline notes.", quality_flags=["stale"])
    store(space, "Unrelated note about lunch menus.")
    store(other_space, "Deploys run through the rival pipeline.")
    body = _body(client.get("/brain/", {"q": "deploys pipeline"}))
    assert f'data-thought="{hit.id}"' in body and f'data-thought="{old.id}"' in body
    assert f'data-thought="{flagged.id}"' in body
    assert "rival pipeline" not in body
    assert "operational_learning" in body and '<span class="chip flag">stale</span>' in body
    assert '<span class="chip superseded">superseded</span>' in body
    assert body.index(str(hit.id)) < body.index(str(old.id))  # same text: the superseded one ranks lower
    assert "superseded ×0.7" in body  # the ranking's own reasons
    assert '<td class="score">' in body


def test_search_does_not_change_what_agents_get(client, ada, space, fake_embedder):
    thought = store(space, "Deploys run through the blue green pipeline.")
    client.get("/brain/", {"q": "deploys pipeline"})
    thought.refresh_from_db()
    assert thought.access_count == 0 and thought.pheromone_weight == 1.0
    assert not QueryLog.objects.exists()


def test_search_filters_by_topic_and_category(client, ada, space, fake_embedder):
    a = store(
        space,
        "Deploy pipeline decision: use blue green.",
        thought_category="decision_record",
        topic="deploy",
        alternatives_considered="canary",
    )
    b = store(
        space, "Deploy pipeline learning: retry flaky steps.", thought_category="operational_learning", topic="ci"
    )
    body = _body(client.get("/brain/", {"q": "deploy pipeline", "topic": "deploy"}))
    assert str(a.id) in body and str(b.id) not in body
    body = _body(client.get("/brain/", {"q": "deploy pipeline", "category": "operational_learning"}))
    assert str(b.id) in body


def test_search_results_escape_stored_text(client, ada, space, fake_embedder):
    store(space, "Pipeline <script>alert(1)</script> note")
    body = _body(client.get("/brain/", {"q": "pipeline note"}))
    assert "<script>alert(1)</script>" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_a_tampered_category_is_refused_with_a_message(client, ada, space):
    body = _body(client.get("/brain/", {"q": "x", "category": "gossip"}))
    assert "Search not run" in body


def test_thought_page_shows_content_metadata_and_lineage_tree(client, ada, space):
    original = store(space, "The cache is per process.", topic="cache")
    refinement = store(
        space,
        "The cache is per process and cleared on deploy.",
        thought_type=ThoughtType.REFINEMENT,
        source_ids=[original.id],
        topic="cache",
    )
    Thought.objects.filter(pk=original.pk).update(superseded=True, refined_by=refinement)
    body = _body(client.get(f"/brain/thoughts/{original.id}/"))
    assert "The cache is per process." in body and "agent-dev-1" in body
    assert "Superseded" in body and f'href="/brain/thoughts/{refinement.id}/"' in body
    assert "Built upon it" in body
    body = _body(client.get(f"/brain/thoughts/{refinement.id}/"))
    tree = body.split("Built on</h3>", 1)[1].split("Built upon it", 1)[0]
    assert f'href="/brain/thoughts/{original.id}/"' in tree


def test_thought_of_another_space_is_not_found(client, ada, other_space):
    foreign = store(other_space, "Their secret.")
    response = client.get(f"/brain/thoughts/{foreign.id}/")
    assert response.status_code == 404 and b"Their secret" not in response.content


def test_a_human_corrects_a_thought(client, ada, space, fake_embedder):
    wrong = store(space, "The API rate limit is 100 requests per minute.", topic="api")
    response = client.post(
        f"/brain/thoughts/{wrong.id}/correct/",
        {
            "correct_fact": "The API rate limit is 600 requests per minute.",
            "corrected_fact": wrong.content,
            "topic": "api",
            "content": "",
        },
        follow=True,
    )
    correction = Thought.objects.get(thought_category=ThoughtCategory.CORRECTION)
    wrong.refresh_from_db()
    assert wrong.superseded and wrong.superseded_by == correction
    assert correction.contributor_id == "human-ada"
    body = _body(response)
    assert (
        "Correction stored. This correction supersedes 1 previous thought" in body
        and response.redirect_chain[-1][0] == f"/brain/thoughts/{correction.id}/"
    )
    # the corrected thought lists its correction
    assert f'href="/brain/thoughts/{correction.id}/"' in _body(client.get(f"/brain/thoughts/{wrong.id}/"))


def test_a_correction_without_the_correct_fact_is_refused(client, ada, space, fake_embedder):
    wrong = store(space, "The API rate limit is 100 requests per minute.", topic="api")
    response = client.post(
        f"/brain/thoughts/{wrong.id}/correct/", {"correct_fact": "", "topic": "api", "corrected_fact": "x"}, follow=True
    )
    assert "Correction not stored" in _body(response)
    assert not Thought.objects.filter(thought_category=ThoughtCategory.CORRECTION).exists()


def test_a_correction_of_another_spaces_thought_is_refused(client, ada, other_space, fake_embedder):
    foreign = store(other_space, "Their fact.")
    response = client.post(
        f"/brain/thoughts/{foreign.id}/correct/",
        {"correct_fact": "x", "corrected_fact": "y", "topic": "t"},
        follow=True,
    )
    assert "Correction not stored" in _body(response)
    foreign.refresh_from_db()
    assert not foreign.superseded and Thought.objects.count() == 1


def _suggestion(thought, statement="The rate limit is 600 per minute, not 100."):
    suggestion, _ = suggestion_create(
        thought=thought,
        statement=statement,
        origin=SuggestionOrigin.QUALITY_JUDGE,
        confidence=0.8,
        reason="contradicted in turn t-1",
    )
    return suggestion


def test_pending_suggestions_show_on_the_thought_and_accepting_creates_the_correction(
    client, ada, space, fake_embedder
):
    wrong = store(space, "The API rate limit is 100 requests per minute.", topic="api")
    suggestion = _suggestion(wrong)
    body = _body(client.get(f"/brain/thoughts/{wrong.id}/"))
    assert f'data-suggestion="{suggestion.id}"' in body and "contradicted in turn t-1" in body
    response = client.post(f"/brain/suggestions/{suggestion.id}/accept/", {"correct_fact": ""}, follow=True)
    suggestion.refresh_from_db()
    wrong.refresh_from_db()
    assert suggestion.status == SuggestionStatus.ACCEPTED and suggestion.resolved_by == "human-ada"
    assert wrong.superseded and wrong.superseded_by == suggestion.correction
    assert "Suggestion accepted" in _body(response)
    assert response.redirect_chain[-1][0] == f"/brain/thoughts/{suggestion.correction_id}/"


def test_dismissing_a_suggestion_leaves_the_thought_standing(client, ada, space):
    wrong = store(space, "The API rate limit is 100 requests per minute.", topic="api")
    suggestion = _suggestion(wrong)
    response = client.post(f"/brain/suggestions/{suggestion.id}/dismiss/", {"reason": "judge misread"}, follow=True)
    suggestion.refresh_from_db()
    wrong.refresh_from_db()
    assert suggestion.status == SuggestionStatus.DISMISSED and not wrong.superseded
    assert "Suggestion dismissed" in _body(response)
    assert f'data-suggestion="{suggestion.id}"' not in _body(response)


def test_resolving_twice_is_refused_with_a_message(client, ada, space):
    suggestion = _suggestion(store(space, "Old fact.", topic="t"))
    client.post(f"/brain/suggestions/{suggestion.id}/dismiss/", {})
    response = client.post(f"/brain/suggestions/{suggestion.id}/accept/", {}, follow=True)
    assert "already dismissed" in _body(response)
    assert not Thought.objects.filter(thought_category=ThoughtCategory.CORRECTION).exists()


def test_another_spaces_suggestion_can_not_be_resolved(client, ada, other_space):
    suggestion = _suggestion(store(other_space, "Their fact.", topic="t"))
    response = client.post(f"/brain/suggestions/{suggestion.id}/accept/", {}, follow=True)
    assert "nothing changed" in _body(response)
    suggestion.refresh_from_db()
    assert suggestion.status == SuggestionStatus.PENDING
    assert CorrectionSuggestion.objects.count() == 1 and Thought.objects.count() == 1


def test_explorer_search_and_thought_page_query_counts_are_fixed(
    client, ada, space, fake_embedder, django_assert_max_num_queries
):
    thoughts = [store(space, f"Thought number {i} about caching.", topic=f"t{i % 3}") for i in range(25)]
    for t in thoughts[:5]:
        _suggestion(t, statement=f"Contradiction {t.id}")
    # session, user, spaces, topics, newest thoughts
    with django_assert_max_num_queries(5):
        assert client.get("/brain/").status_code == 200
    # ... + lexemes, savepoint, 2 settings, vector, exact live corrections and full-text candidates
    # (one round), release
    with django_assert_max_num_queries(13):
        assert client.get("/brain/", {"q": "caching thought"}).status_code == 200
    # session, user, spaces, thought (x2), ancestors, descendants, corrections, related, suggestions
    with django_assert_max_num_queries(10):
        assert client.get(f"/brain/thoughts/{thoughts[0].id}/").status_code == 200


def test_pages_name_a_thoughts_agent_as_it_is_called_now(client, ada, space, agent_factory, fake_embedder):
    """A renamed agent's thoughts follow it, and a newcomer given its old name is credited with none of
    them: the explorer's list, its search, the thought page and its corrections say the name now."""
    dev = agent_factory("dev", name="dev-old").agent
    thought = store(space, "Deploys run through the blue green pipeline.", agent=dev, contributor_name="dev-old")
    correction = store(
        space, "Deploys run through the canary pipeline.", agent=dev, contributor_name="dev-old",
        thought_category="correction", supersedes=[thought.id], correct_fact="canary",
    )  # fmt: skip
    dev.name = "dev-renamed"
    dev.save(update_fields=["name"])
    agent_factory("dev", name="dev-old")  # someone else has the old name now
    pages = [
        _body(client.get("/brain/")),
        _body(client.get("/brain/", {"q": "deploys pipeline"})),
        _body(client.get(f"/brain/thoughts/{thought.id}/")),
    ]
    for body in pages:
        assert "dev-renamed" in body and "dev-old" not in body, body[-1500:]
    assert str(correction.id) in pages[2]
