"""The memory call's reads of the query log go by index under any plan: the log keeps 90 days of
every call, so a read that walks it in table or primary-key order grows with it.

Prepared statements run generic plans (after five runs, or always in the search's transaction, which
forces them and turns sequential scans off). With a few agents and many calls the planner expects an
agent's or a session's rows everywhere; written without the ``+ 0`` guards, the
"queried before?" read walked the space's rows until it met the agent's (1.8 ms for 3,370 rows at
7,000) and implicit feedback read every row of the log below the call's id (9–11 ms at 300,000 rows).
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from brain.selectors import search
from brain.services import pheromones
from tests.test_brain_search_plans import _numbered

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_log(agent_factory, space, thought_factory):
    """Three agents' 6,000 calls in 300 sessions (20 calls each, a third of them contributions), 2,000
    resolved correction suggestions, with statistics."""
    agents = [agent_factory("dev").agent for _ in range(3)]
    stored = thought_factory("The deploy pipeline runs migrations before restarting the workers.")
    with connection.cursor() as cursor:
        for index, agent in enumerate(agents):
            cursor.execute(
                """
                INSERT INTO brain_querylog
                    (space_id, agent_id, agent_ref, session_id, query_text, results, stored_thought_id,
                     created_at, reinforced)
                SELECT %s, %s, %s, 'busy-' || (g %% 100 + %s), 'why does the deploy fail ' || g, '[]'::jsonb,
                       CASE WHEN g %% 3 = 0 THEN %s::uuid END, now() - make_interval(secs => 6000 - g), true
                FROM generate_series(1, 2000) g
                """,
                [space.pk, agent.pk, agent.name, index * 100, stored.pk],
            )
        cursor.execute(
            """
            INSERT INTO brain_correctionsuggestion
                (id, space_id, thought_id, statement, draft, origin, confidence, reason, agent_id, session_id,
                 status, created_at, resolved_by)
            SELECT gen_random_uuid(), %s, %s, 'it is 40, not 30', '{}'::jsonb, 'contradiction', 0.9, '', %s,
                   'busy-' || (g %% 300), CASE WHEN g %% 2 = 0 THEN 'accepted' ELSE 'dismissed' END,
                   now() - make_interval(secs => 2000 - g), 'tester'
            FROM generate_series(1, 2000) g
            """,
            [space.pk, stored.pk, agents[0].pk],
        )
        cursor.execute("ANALYZE brain_querylog")
        cursor.execute("ANALYZE brain_correctionsuggestion")
    return agents


def _generic_plan(sql: str, *, search_settings: bool) -> list[str]:
    """EXPLAIN (GENERIC_PLAN) of ``sql``, alone or in a transaction with the search's settings (as the
    search's companion statement runs), as lines."""
    with transaction.atomic(), connection.cursor() as cursor:
        if search_settings:
            cursor.execute(search._SETTINGS_SQL, {"ef_search": "40", "terms_plan": "force_generic_plan"})
        cursor.execute("EXPLAIN (GENERIC_PLAN) " + _numbered(sql))
        return [row[0] for row in cursor.fetchall()]


def _scans(plan: list[str], table: str) -> list[str]:
    """How each read of ``table`` is done (its INSERT is not a read), its alias left out."""
    scans = []
    for line in plan:
        node = line.strip().removeprefix("->  ").split("  (")[0]
        if f" on {table}" in node and not node.startswith("Insert"):
            scans.append(node.split(f" on {table}")[0] + f" on {table}")
    return scans


@pytest.mark.parametrize("search_settings", [False, True], ids=["alone", "in the search's transaction"])
@pytest.mark.parametrize("variant", [0, 1], ids=["in a caller's transaction", "committing asynchronously"])
def test_the_log_statement_reads_the_agents_rows_and_pending_suggestions_by_index(busy_log, search_settings, variant):
    plan = _generic_plan(pheromones._LOG[variant], search_settings=search_settings)
    assert _scans(plan, "brain_querylog") == ["Index Scan using querylog_agent on brain_querylog"], "\n".join(plan)
    assert _scans(plan, "brain_correctionsuggestion") == [
        "Index Scan using suggestion_status on brain_correctionsuggestion"
    ], "\n".join(plan)


@pytest.mark.parametrize("variant", [0, 1], ids=["in a caller's transaction", "committing asynchronously"])
def test_implicit_feedback_reads_the_sessions_rows_only(busy_log, variant):
    plan = _generic_plan(pheromones._FEEDBACK[variant], search_settings=False)
    assert _scans(plan, "brain_querylog") == ["Index Scan using querylog_session on brain_querylog"] * 2, "\n".join(
        plan
    )


def test_the_log_statement_still_answers_as_before(busy_log, agent_factory, space):
    """The reads' new form keeps their meaning: queried before in this space, a pending suggestion."""
    newcomer, regular = agent_factory("dev").agent, busy_log[0]

    def logged(agent):
        return pheromones.retrieval_log(
            space=space, agent=agent, agent_ref=agent.name, session_id="answers", query_text="q", results=[]
        )

    first = logged(newcomer)
    assert (first.queried_before, first.suggestions_pending) == (False, False)
    assert logged(newcomer).queried_before is True
    assert logged(regular).queried_before is True
