"""The hot paths' statements are prepared once per connection (core.db.prepared_cursor) and planned
with their values; the ORM's are never prepared (config/settings.py DATABASE_PREPARED_STATEMENTS)."""

from __future__ import annotations

import pytest
from django.db import connection

from brain.models import Thought

pytestmark = pytest.mark.django_db


def _prepared() -> dict[str, tuple[int, int]]:
    """This connection's prepared statements: text -> (generic plans, custom plans)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        return {" ".join(text.split()): (generic, custom) for text, generic, custom in cursor.fetchall()}


def _memory(client, prompt: str) -> None:
    response = client.get("/api/v1/memory", {"prompt": prompt, "contribute": "false"})
    assert response.status_code == 200, response.content


def test_a_memory_calls_statements_are_prepared_once_and_planned_with_their_values(dev, fake_embedder):
    before = _prepared()
    for _ in range(7):  # PostgreSQL's own default would switch to a generic plan after 5
        _memory(dev, "how does the deploy pipeline restart the workers")
    statements = {text: plans for text, plans in _prepared().items() if text not in before}
    search = [plans for text, plans in statements.items() if text.startswith("WITH RECURSIVE idf")]
    terms = [plans for text, plans in statements.items() if text.startswith("WITH q AS")]
    log = [plans for text, plans in statements.items() if text.startswith("WITH logged AS")]
    assert search == [(0, 7)] and terms == [(0, 7)] and log == [(0, 7)], statements


def test_the_orms_statements_are_not_prepared():
    before = set(_prepared())
    for _ in range(10):
        assert not Thought.objects.filter(content="nothing like this").exists()
    assert set(_prepared()) == before


def test_djangos_query_log_sees_a_prepared_statements_text(dev, fake_embedder):
    from django.test.utils import CaptureQueriesContext

    _memory(dev, "how does the deploy pipeline restart the workers")  # prepares them
    with CaptureQueriesContext(connection) as ctx:
        _memory(dev, "how does the deploy pipeline restart the workers")
    texts = [q["sql"] for q in ctx.captured_queries]
    assert all(isinstance(text, str) for text in texts), texts
    assert any(" ".join(text.split()).startswith("WITH RECURSIVE idf") for text in texts)
