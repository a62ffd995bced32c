"""The per-token throttle keeps one bucket per token: a URL token and an agent token whose rows happen to
have the same id (two tables, two id sequences) never share one, in one space or across spaces. A
throttled request is the envelope's 429 with Retry-After."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from core import services
from core.models import AgentToken, UrlToken
from core.throttling import throttle_key, throttle_store

pytestmark = pytest.mark.django_db

PROMPT = "How are the web workers restarted after a deploy?"


@pytest.fixture
def colliding(agent_factory, other_space, settings):
    """An agent token in the default space and a URL token (another agent's, in another space) whose row
    ids are equal, at a rate of 2 requests a minute."""
    settings.API_THROTTLE_RATE = "2/min"
    agent = agent_factory("dev")
    reader = agent_factory("dev", in_space=other_space)
    agent_token = AgentToken.objects.get(agent=agent.agent)
    row, raw = services.url_token_create(agent=reader.agent, days=1)
    UrlToken.objects.filter(pk=row.pk).update(id=agent_token.pk)  # before any lookup: no cached row
    url_token = UrlToken.objects.get(pk=agent_token.pk)
    assert url_token.pk == agent_token.pk
    keys = [throttle_key(agent_token), throttle_key(url_token)]
    for key in keys:
        throttle_store().forget(key)
    yield agent, raw
    for key in keys:
        throttle_store().forget(key)


def _url_get(raw: str):
    return APIClient().get("/api/v1/memory", {"prompt": PROMPT, "token": raw})


def _throttled(response) -> None:
    assert response.status_code == 429, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "THROTTLED" and error["retry_after"] == int(response["Retry-After"]) >= 1


def test_a_url_tokens_requests_do_not_throttle_the_agent_token_with_the_same_row_id(colliding, fake_embedder):
    agent, raw = colliding
    assert [_url_get(raw).status_code for _ in range(2)] == [200, 200]
    _throttled(_url_get(raw))
    assert agent.get("/api/v1/agents/me").status_code == 200


def test_an_agent_tokens_requests_do_not_throttle_the_url_token_with_the_same_row_id(colliding, fake_embedder):
    agent, raw = colliding
    assert [agent.get("/api/v1/agents/me").status_code for _ in range(2)] == [200, 200]
    _throttled(agent.get("/api/v1/agents/me"))
    assert _url_get(raw).status_code == 200


def test_the_throttle_key_names_the_tokens_kind_and_id(colliding):
    agent, _ = colliding
    agent_token = AgentToken.objects.get(agent=agent.agent)
    url_token = UrlToken.objects.get(pk=agent_token.pk)
    assert throttle_key(agent_token) == f"agent:{agent_token.pk}"
    assert throttle_key(url_token) == f"url:{url_token.pk}"
    assert throttle_key(None) is None
