"""Shared fixtures: spaces, agents with real tokens, authenticated API clients."""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.test import APIClient

from config.celery import app as celery_app
from core import services
from core.models import Space
from runtime import embedded_db


def pytest_configure(config):
    # Unit tests run jobs inline; the integration tests start real workers instead.
    celery_app.conf.task_always_eager = True
    # Every memory call's accesses are counted right after its response, so a test reads them at once;
    # tests/test_brain_reinforcement.py sets the production interval where it checks the batching.
    from django.conf import settings

    settings.REINFORCEMENT_FOLD_SECONDS = 0


def pytest_unconfigure(config):
    if embedded_db.started_here:
        embedded_db.stop()


@pytest.fixture(autouse=True)
def _fresh_vector_index(request):
    """Each database test starts with an HNSW index holding only its own rows.

    Tests roll back, and an aborted row stays in the HNSW graph until VACUUM: with --reuse-db the
    graph fills with thousands of dead entries from earlier tests, and the approximate scan then
    occasionally missed the one live row a test had stored. REINDEX inside the test's transaction
    (rolled back with it, ~3 ms) gives every test the graph a fresh database would have. Skipped for
    transactional tests: other processes (workers, threads) must not wait on the index lock.
    """
    marker = request.node.get_closest_marker("django_db")
    wants_db = marker is not None or "db" in request.fixturenames
    transactional = "transactional_db" in request.fixturenames or bool(marker and marker.kwargs.get("transaction"))
    if wants_db and not transactional:
        request.getfixturevalue("db")
        with connection.cursor() as cursor:
            cursor.execute("REINDEX INDEX thought_embedding_hnsw")
    yield


@pytest.fixture
def space(db) -> Space:
    return services.space_get_or_create_default()


@pytest.fixture
def other_space(db) -> Space:
    return Space.objects.create(slug="other", name="Other space")


class AgentClient(APIClient):
    """An API client that authenticates as one agent."""

    agent = None
    token = ""


def make_agent_client(*, space: Space, name: str, role: str) -> AgentClient:
    agent, token = services.agent_create(name=name, role=role, space=space)
    client = AgentClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    client.agent = agent
    client.token = token
    return client


@pytest.fixture
def agent_factory(db, space):
    counter = {"n": 0}

    def factory(role: str = "dev", *, name: str | None = None, in_space: Space | None = None) -> AgentClient:
        counter["n"] += 1
        return make_agent_client(space=in_space or space, name=name or f"{role}-{counter['n']}", role=role)

    return factory


@pytest.fixture
def dev(agent_factory) -> AgentClient:
    return agent_factory("dev", name="dev-1")


@pytest.fixture
def url_token(dev) -> str:
    """A read-only URL token of ``dev`` (7 days), raw."""
    _, raw = services.url_token_create(agent=dev.agent, days=7, label="chat", created_by="test")
    return raw


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


def fake_vector(text: str) -> list[float]:
    """A deterministic bag-of-words embedding: equal texts give 1.0, shared words give similarity."""
    import hashlib
    import math
    import re

    vector = [0.0] * 384
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.md5(word.encode()).digest()
        vector[int.from_bytes(digest[:2], "big") % 384] += 1.0 if digest[2] % 2 else -1.0
    if not any(vector):
        vector[0] = 1.0
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


def synchronous_commit() -> str:
    """The connection's ``synchronous_commit`` now (bookkeeping writes turn it off for their own
    transaction only)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        return cursor.fetchone()[0]


#: PostgreSQL's array types among the parameters Colony binds (text[], float8[], uuid[]).
ARRAY_OIDS = {1009: "text[]", 1022: "float8[]", 2951: "uuid[]"}


@pytest.fixture
def parameter_formats(monkeypatch) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every statement psycopg binds from now on, as (its first words, [(parameter type, format)]):
    what the server is sent, as psycopg's query object holds it after dumping the values (a list
    dumped as text has no type, oid 0)."""
    from psycopg import _queries

    seen: list[tuple[str, list[tuple[str, str]]]] = []
    dump = _queries.PostgresQuery.dump

    def recording(self, vars):
        dump(self, vars)
        params = [(ARRAY_OIDS.get(oid, str(oid)), fmt.name) for oid, fmt in zip(self.types, self.formats, strict=True)]
        seen.append((" ".join(self.query.decode().split()[:3]), params))

    monkeypatch.setattr(_queries.PostgresQuery, "dump", recording)
    return seen


@pytest.fixture
def fake_embedder(monkeypatch):
    """Replace the model with :func:`fake_vector` where ranking quality is not the point (fast)."""
    from brain import embedding

    calls: list[str] = []

    def embed_many(texts, *, batch_size=64):
        calls.extend(texts)
        return [fake_vector(text) for text in texts]

    monkeypatch.setattr(embedding, "embed_many", embed_many)
    return calls


@pytest.fixture
def enqueued(monkeypatch) -> list[str]:
    """Scoring jobs enqueued (not run): the turn-log ids ``score_turn.delay`` was called with.

    The request path must only store and enqueue; a test scores a turn itself when it needs the verdicts.
    """
    from quality import jobs

    calls: list[str] = []
    monkeypatch.setattr(jobs.score_turn, "delay", lambda turn_log_id: calls.append(turn_log_id))
    return calls


@pytest.fixture
def thought_factory(db, space):
    """Store a thought through thought_create; the vector is fake_vector(content) unless given
    (``embedding="real"``: the real model's vector of the content)."""
    from brain.services.thoughts import thought_create

    def factory(content: str, *, in_space: Space | None = None, embedding="fake", **fields):
        if embedding == "real":  # the real model's vector (tests that claim similarity behaviour)
            from brain.embedding import embed

            vector = embed(content)
        else:
            vector = fake_vector(content) if embedding == "fake" else embedding
        fields.setdefault("contributor_id", "tester")
        fields.setdefault("contributor_name", "Tester")
        return thought_create(space=in_space or space, content=content, embedding=vector, **fields)

    return factory


@pytest.fixture
def asgi_server(transactional_db):
    """Colony's production ASGI application (``/mcp`` included) served by uvicorn on a free port."""
    from tests.asgi_support import AsgiServer

    server = AsgiServer().start()
    yield server
    server.stop()
