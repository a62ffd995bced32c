"""Calibrated relevance on every memory source, ``min_relevance``, the injection mode (API, MCP, hook)."""

from __future__ import annotations

import pytest

from brain import ranking
from brain.models import Thought
from tests.test_contrib_hooks import context_of, run
from tests.test_mcp_server import Tools, in_session

DATABASE = "The staging database pg-core-east runs PostgreSQL 16 with the pgvector extension 0.7."
THEME = "Alice moved the team dashboard to the dark theme because the light one tired her eyes."
DEPLOY = "Deploys to production happen on Tuesdays after the QA sign-off, never on Fridays."
RELATED = "Which PostgreSQL version does the staging database pg-core-east run?"
UNRELATED = "What is a good recipe for banana bread with walnuts and cinnamon?"


def search(client, prompt: str, **params) -> dict:
    response = client.get("/api/v1/memory", {"prompt": prompt, "contribute": "false", **params})
    assert response.status_code == 200, response.content
    return response.json()["result"]


@pytest.fixture
def real_space(thought_factory):
    return [thought_factory(text, embedding="real") for text in (DATABASE, THEME, DEPLOY)]


def test_every_source_carries_a_relevance_between_0_and_1(dev, real_space):
    sources = search(dev, "Who changed the dashboard theme and why? database deploys")["sources"]
    assert len(sources) >= 2
    assert all(isinstance(s["relevance"], float) and 0.0 <= s["relevance"] <= 1.0 for s in sources)


def test_relevance_rises_with_the_score_when_the_rest_is_equal():
    values = [
        ranking.calibrated_relevance(ranking.relevance_features(score=score, similarity=0.5, top_score=0.7, position=3))
        for score in (0.0, 0.2, 0.4, 0.6, 0.7)
    ]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert all(0.0 <= value <= 1.0 for value in values)
    # the best source (its score is the top score) too
    best = [
        ranking.calibrated_relevance(ranking.relevance_features(score=s, similarity=0.5, top_score=s, position=1))
        for s in (0.1, 0.5, 0.9)
    ]
    assert best == sorted(best)


def test_min_relevance_drops_the_sources_below_it_on_get_and_post(dev, real_space):
    prompt = "Which database runs PostgreSQL, and when do deploys happen?"
    everything = search(dev, prompt)["sources"]
    relevances = sorted((s["relevance"] for s in everything), reverse=True)
    assert len(relevances) >= 2 and relevances[0] > relevances[-1]
    floor = (relevances[0] + relevances[-1]) / 2
    kept = search(dev, prompt, min_relevance=str(floor))["sources"]
    assert kept and all(s["relevance"] >= floor for s in kept)
    assert [s["thought_id"] for s in kept] == [s["thought_id"] for s in everything if s["relevance"] >= floor]
    posted = dev.post("/api/v1/memory", {"prompt": prompt, "contribute": False, "min_relevance": floor}, format="json")
    assert [s["thought_id"] for s in posted.json()["result"]["sources"]] == [s["thought_id"] for s in kept]
    assert search(dev, prompt, min_relevance="1")["sources"] == []


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.5", True, "nan"])
def test_min_relevance_outside_0_to_1_or_not_a_number_is_refused(dev, real_space, bad):
    before = Thought.objects.count()
    response = dev.post("/api/v1/memory", {"prompt": RELATED, "contribute": False, "min_relevance": bad}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and "min_relevance" in error["message"]
    assert Thought.objects.count() == before


def test_injection_mode_is_silent_on_an_unrelated_prompt(dev, real_space):
    assert search(dev, UNRELATED, inject="true")["sources"] == []


def test_injection_mode_returns_the_matching_thought_for_a_related_prompt(dev, real_space):
    sources = search(dev, RELATED, inject="true")["sources"]
    assert sources and sources[0]["thought_id"] == str(real_space[0].id)
    assert all(s["relevance"] >= ranking.INJECT_MIN_RELEVANCE for s in sources)
    assert str(real_space[1].id) not in {s["thought_id"] for s in sources}


def test_an_explicit_min_relevance_overrides_the_injection_default(dev, real_space):
    assert search(dev, RELATED, inject="true", min_relevance="1")["sources"] == []


@pytest.mark.django_db(transaction=True)
def test_mcp_memory_search_takes_min_relevance_and_inject(asgi_server, agent_factory, thought_factory):
    dev = agent_factory("dev")
    database = thought_factory(DATABASE, embedding="real")
    thought_factory(THEME, embedding="real")

    async def body(session):
        tools = Tools(session)
        plain = await tools.call("memory_search", query=RELATED)
        strict = await tools.call("memory_search", query=RELATED, min_relevance=1.0)
        injected = await tools.call("memory_search", query=RELATED, inject=True)
        silent = await tools.call("memory_search", query=UNRELATED, inject=True)
        refused = await tools.raw("memory_search", query=RELATED, min_relevance=2.0)
        return plain, strict, injected, silent, refused

    plain, strict, injected, silent, (is_error, refused) = in_session(asgi_server.url, dev.token, body)
    assert all(0.0 <= s["relevance"] <= 1.0 for s in plain["result"]["sources"])
    assert strict["result"]["sources"] == []
    assert injected["result"]["sources"][0]["thought_id"] == str(database.id)
    assert silent["result"]["sources"] == []
    assert is_error and refused["error"]["code"] == "VALIDATION_ERROR"


@pytest.mark.django_db(transaction=True)
def test_prompt_hook_injects_nothing_when_no_source_qualifies(asgi_server, agent_factory, thought_factory):
    dev = agent_factory("dev", name="claude-dev")
    database = thought_factory(DATABASE, embedding="real")
    done = run("prompt-submit", {"session_id": "s-1", "prompt": UNRELATED}, url=asgi_server.url, token=dev.token)
    context = context_of(done, "UserPromptSubmit").split("\nGuidance: ")[0]  # onboarding guidance, first call
    assert context == "Colony session id: s-1 (use it as memory_query_session in a task's DNA)."
    done = run("prompt-submit", {"session_id": "s-1", "prompt": RELATED}, url=asgi_server.url, token=dev.token)
    assert f"[{database.id}]" in context_of(done, "UserPromptSubmit")


@pytest.mark.parametrize("bad", ["nan", "inf", "abc", "2"])
def test_min_relevance_in_a_query_string_must_be_a_number_from_0_to_1(dev, real_space, bad):
    response = dev.get("/api/v1/memory", {"prompt": RELATED, "contribute": "false", "min_relevance": bad})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
