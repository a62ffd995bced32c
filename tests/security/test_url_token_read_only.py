"""Read-only means read-only (SPEC 6): a URL token's ``GET /api/v1/memory`` retrieves and writes
nothing: no reinforcement, no query-log row (so no ``memory_query_session`` gate evidence), no
correction suggestions, and it reads no pending corrections, whatever session it names."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from brain.choices import SuggestionOrigin
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.services import pheromones
from brain.services.suggestions import suggestion_create
from tasks.models import Task
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db

STATEMENT = "The staging cluster is rebuilt every Sunday night from the infrastructure repository main branch."


def read(url_token, **params):
    response = APIClient().get("/api/v1/memory", {"prompt": STATEMENT, "token": url_token, **params})
    assert response.status_code == 200, response.json()
    return response.json()


def test_url_token_read_does_not_reinforce_or_log(dev, space, url_token, fake_embedder):
    assert dev.post("/api/v1/memory", {"prompt": STATEMENT}, format="json").status_code == 200
    pheromones.reinforcement_fold_all()
    counts = list(Thought.objects.values_list("id", "access_count", "pheromone_weight"))
    logs = QueryLog.objects.count()
    for _ in range(3):
        body = read(url_token, session_id="chat-session")
        assert body["result"]["sources"], body  # it does read
    pheromones.reinforcement_fold_all()
    assert list(Thought.objects.values_list("id", "access_count", "pheromone_weight")) == counts
    assert QueryLog.objects.count() == logs
    assert not QueryLog.objects.filter(session_id="chat-session").exists()


def test_url_token_read_is_no_memory_query_session_evidence(dev, space, url_token, fake_embedder):
    project = make_project(space)
    make_task(project, slug="t", status="ready", role="dev", dna={"pdsa_ref": "docs/d.md"})
    read(url_token, session_id="link-session")
    assert dev.patch("/api/v1/tasks/t/dna", {"memory_query_session": "link-session"}, format="json").status_code == 200
    response = dev.post("/api/v1/tasks/t/transition", {"to": "active"}, format="json")
    assert response.status_code in (400, 403, 409), response.content
    assert "memory_query_session" in response.json()["error"]["message"]
    assert Task.objects.get(slug="t").status == "ready"


def test_url_token_read_creates_no_correction_suggestions(dev, space, url_token, fake_embedder):
    assert dev.post("/api/v1/memory", {"prompt": STATEMENT}, format="json").status_code == 200
    read(url_token)
    read(url_token, prompt="The staging cluster is never rebuilt; it has run unchanged since it was created.")
    assert not CorrectionSuggestion.objects.exists()


def test_url_token_cannot_read_pending_corrections_of_another_session(
    dev, agent_factory, space, url_token, fake_embedder
):
    other = agent_factory("dev", name="dev-2")
    assert other.post("/api/v1/memory", {"prompt": STATEMENT}, format="json").status_code == 200
    thought = Thought.objects.get()
    for agent, session in ((other.agent, "their-session"), (dev.agent, "own-session")):
        suggestion_create(
            thought=thought,
            statement=f"It is rebuilt on Saturdays now ({session}).",
            origin=SuggestionOrigin.QUALITY_JUDGE,
            agent=agent,
            session_id=session,
        )
    for session in ("their-session", "own-session"):
        body = read(url_token, session_id=session)
        assert body["result"]["pending_corrections"] == []
        assert "It is rebuilt on Saturdays" not in str(body)
    # The agent's own token still sees its session's pending correction.
    own = dev.post("/api/v1/memory", {"prompt": STATEMENT, "session_id": "own-session"}, format="json").json()
    assert [p["statement"] for p in own["result"]["pending_corrections"]] == [
        "It is rebuilt on Saturdays now (own-session)."
    ]
