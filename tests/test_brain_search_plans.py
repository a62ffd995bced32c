"""The search statement's plans (brain.selectors.search.GENERIC_PLAN_MIN_THOUGHTS): a big space is
searched with the prepared statement's generic plan, a small one with a plan made for its values, and
both find the same thoughts in the same order. The generic plan's shape is fixed by the statement,
whatever the table's statistics suggest."""

from __future__ import annotations

import re

import pytest
from django.db import connection, transaction

from brain.selectors import search
from core.models import Space
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db

TOPICS = ["deploy", "pgbouncer", "migrations", "cache", "celery", "tokens", "backups", "search"]
QUERIES = [
    "how do deploys run migrations",
    "pgbouncer pool size for celery workers",
    "where are the backups kept",
    "search ranking with tokens",
]


@pytest.fixture
def brain(thought_factory, space):
    for i in range(48):
        topic, other = TOPICS[i % len(TOPICS)], TOPICS[(i * 3 + 1) % len(TOPICS)]
        thought_factory(f"Note {i}: the {topic} setup depends on {other}; checked on host {i % 5} after the incident.")
    return space


def _search(space, query):
    result = search.thought_search(space=space, vector=fake_vector(query), query_text=query, limit=10)
    return [(c.id, round(c.score, 6)) for c in result.candidates]


def _plans() -> tuple[int, int]:
    """(generic, custom) plans of this connection's prepared search statements (terms and lexical side,
    and the rest) so far."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(sum(generic_plans), 0), COALESCE(sum(custom_plans), 0) FROM pg_prepared_statements "
            "WHERE statement LIKE %s",
            ["%idf AS MATERIALIZED%"],  # statement 2 (terms and the lexical side) and the search statement
        )
        generic, custom = cursor.fetchone()
    return int(generic), int(custom)


def test_a_big_space_uses_the_generic_plan_a_small_one_a_plan_of_its_own_and_both_find_the_same(brain, monkeypatch):
    monkeypatch.setattr(search, "GENERIC_PLAN_MIN_THOUGHTS", 10**9)
    custom = {query: _search(brain, query) for query in QUERIES for _ in range(2)}
    assert _plans()[0] == 0 and _plans()[1] >= len(QUERIES)
    monkeypatch.setattr(search, "GENERIC_PLAN_MIN_THOUGHTS", 40)  # the space holds 48
    generic = {query: _search(brain, query) for query in QUERIES for _ in range(2)}
    assert _plans()[0] >= len(QUERIES)
    assert generic == custom and all(custom.values())


def test_a_search_filtered_by_topic_keeps_a_plan_of_its_own_in_a_big_space(brain, monkeypatch):
    monkeypatch.setattr(search, "GENERIC_PLAN_MIN_THOUGHTS", 40)
    for query in QUERIES:
        search.thought_search(space=brain, vector=fake_vector(query), query_text=query, limit=10, filter_topic="deploy")
    generic, custom = _plans()
    assert generic == 0 and custom >= len(QUERIES)


def _numbered(sql: str) -> str:
    """The statement with psycopg's named placeholders (text ``%(name)s`` and binary ``%(name)b``)
    numbered ($1, $2 ... by first appearance)."""
    names: dict[str, int] = {}

    def number(match: re.Match) -> str:
        return f"${names.setdefault(match.group(1), len(names) + 1)}"

    return re.sub(r"%\((\w+)\)[sb]", number, sql).replace("%%", "%")


def test_the_generic_plan_scans_hnsw_and_gin_even_when_statistics_say_spaces_are_tiny(brain, monkeypatch):
    monkeypatch.setattr(search, "GENERIC_TERMS_SPACES", set())
    # 300 spaces of one thought each: to the planner, "space_id = $1" now means about one row, which
    # makes an exact scan of the space look cheaper than HNSW, for a space of 10,000 as for this one.
    spaces = Space.objects.bulk_create(Space(slug=f"tiny-{i}", name=f"Tiny {i}") for i in range(300))
    from brain.services.thoughts import thought_create

    for i, tiny in enumerate(spaces):
        thought_create(
            space=tiny,
            content=f"tiny note {i} about pgbouncer",
            embedding=fake_vector(f"tiny {i}"),
            contributor_id="tester",
            contributor_name="Tester",
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE brain_thought")
    monkeypatch.setattr(search, "GENERIC_PLAN_MIN_THOUGHTS", 40)
    seen = []
    execute = search.prepared_cursor

    def capturing():
        cursor = execute()
        original = cursor.execute

        def remember(sql, params=None):
            seen.append((sql, params))
            return original(sql, params)

        cursor.execute = remember
        return cursor

    monkeypatch.setattr(search, "prepared_cursor", capturing)
    query = "pgbouncer pool size for celery workers"
    assert _search(brain, query)
    (settings_sql, settings_params), (terms_sql, terms_params), (search_sql, _params) = seen[:3]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(settings_sql, settings_params)  # the transaction's settings, as the search has them
        cursor.execute(terms_sql, terms_params)
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_generic_plan"
        cursor.execute("EXPLAIN (GENERIC_PLAN) " + _numbered(search_sql))
        search_plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan using thought_embedding_hnsw" in search_plan, search_plan

    # Statement 2 of the space's next search runs its generic plan (the first one found the space big):
    # its lexical candidates come from the GIN index, not from a scan of the whole space.
    seen.clear()
    assert _search(brain, query)
    (settings_sql, settings_params), (terms_sql, terms_params) = seen[:2]
    assert settings_params["terms_plan"] == "force_generic_plan"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(settings_sql, settings_params)
        cursor.execute("EXPLAIN (GENERIC_PLAN) " + _numbered(terms_sql))
        terms_plan = "\n".join(row[0] for row in cursor.fetchall())
    thought_scans = [line.strip() for line in terms_plan.splitlines() if " on brain_thought t " in line]
    assert [scan.split("  (")[0] for scan in thought_scans] == ["->  Bitmap Heap Scan on brain_thought t"], terms_plan
    assert "Bitmap Index Scan on thought_search_gin" in terms_plan, terms_plan


def _terms_plans() -> dict[str, tuple[int, int]]:
    """(generic, custom) plans of this connection's prepared statement 2 (terms and the lexical side),
    by how its lexical scan names the space: ``"values"`` (``t.space_id =``, planned for its values)
    or ``"generic"`` (``t.space_id + 0 =``, the text a known-big space's search sends)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement LIKE %s, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%WHERE t.space_id + 0 = $%", "%WITH q AS%lexical AS MATERIALIZED%"],
        )
        plans = {"values": (0, 0), "generic": (0, 0)}
        for plus_zero, generic, custom in cursor.fetchall():  # one statement per parameter types, too
            key = "generic" if plus_zero else "values"
            plans[key] = (plans[key][0] + int(generic), plans[key][1] + int(custom))
    return plans


def test_statement_2_takes_its_generic_plan_once_a_search_found_the_space_big(brain, monkeypatch):
    """Statement 2 is planned for its values until a search of the space finds it big
    (GENERIC_TERMS_SPACES); after that it runs its generic plan, and a space found small again goes
    back to plans made for its values. The answers are the same either way."""
    monkeypatch.setattr(search, "GENERIC_TERMS_SPACES", set())
    monkeypatch.setattr(search, "GENERIC_PLAN_MIN_THOUGHTS", 10**9)
    small = {query: _search(brain, query) for query in QUERIES}
    assert _terms_plans() == {"values": (0, len(QUERIES)), "generic": (0, 0)}
    assert search.GENERIC_TERMS_SPACES == set()

    monkeypatch.setattr(search, "GENERIC_PLAN_MIN_THOUGHTS", 40)  # the space holds 48
    big = {query: _search(brain, query) for query in QUERIES for _ in range(2)}
    assert search.GENERIC_TERMS_SPACES == {brain.pk}
    # The first search found it big (a plan for its values); the 2 x 4 - 1 others ran the generic plan.
    assert _terms_plans() == {"values": (0, len(QUERIES) + 1), "generic": (2 * len(QUERIES) - 1, 0)}
    assert big == small and all(small.values())

    # A filtered search keeps plans made for its values and leaves the space's entry alone.
    search.thought_search(space=brain, vector=fake_vector("x"), query_text=QUERIES[0], limit=10, filter_topic="deploy")
    assert search.GENERIC_TERMS_SPACES == {brain.pk}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans, statement LIKE %s FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%WHERE t.space_id = $%", "%WITH q AS%AND t.topic = $%"],
        )
        assert cursor.fetchall() == [(0, 1, True)]

    monkeypatch.setattr(search, "GENERIC_PLAN_MIN_THOUGHTS", 10**9)  # as if the space had shrunk
    again = {query: _search(brain, query) for query in QUERIES}
    assert search.GENERIC_TERMS_SPACES == set()
    assert _terms_plans()["generic"] == (2 * len(QUERIES), 0)  # one more, the search that found it small
    assert again == small
