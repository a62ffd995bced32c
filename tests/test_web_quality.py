"""The quality dashboard: the four metrics over time against their targets, per space and per agent,
the judge's validation status, the most contradicted thoughts and pending corrections."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.utils import timezone

from brain.choices import SuggestionOrigin
from brain.services.suggestions import suggestion_create
from core.models import Agent
from quality.models import JudgeValidation, QualityRollup, TurnItem, TurnLog
from tests import web_support
from tests.web_support import make_marker

ada = web_support.ada  # the logged-in human fixture, defined once for the web tests

pytestmark = pytest.mark.django_db


def rollup(space, days_ago: int, *, agent: str = "", items=10, on_topic=9, used=6, contradicted=0):
    return QualityRollup.objects.create(
        space=space,
        day=timezone.now().date() - dt.timedelta(days=days_ago),
        agent_id=Agent.objects.get(space=space, name=agent).pk if agent else None,  # an agent's row is keyed by id
        agent_name=agent,
        turns=items // 2,
        items=items,
        on_topic=on_topic,
        used=used,
        contradicted=contradicted,
        computed_at=timezone.now(),
    )


def _body(response) -> str:
    return response.content.decode()


def test_dashboard_draws_the_four_metrics_with_their_target_lines(client, ada, space):
    for days_ago in range(10):
        rollup(space, days_ago, contradicted=1 if days_ago % 2 else 0)
    body = _body(client.get("/quality/"))
    for metric in ("on_topic_rate", "usage_rate", "contradiction_rate", "discovery_rate"):
        assert f'<figure class="chart" data-metric="{metric}">' in body
    assert body.count('<line class="target"') == 4
    assert body.count('<polyline class="series"') >= 3  # discovery has no data here: no line, no fake 0
    assert "target ≤5%" in body and "target ≥80%" in body
    assert 'data-points="10"' in body


def test_dashboard_shows_current_values_and_whether_they_meet_target(client, ada, space):
    rollup(space, 0, items=100, on_topic=90, used=40, contradicted=10)
    body = _body(client.get("/quality/"))
    row = body.split('data-metric="contradiction_rate"><th scope="row">', 1)[1].split("</tr>", 1)[0]
    assert "10.0%" in row and "misses target" in row
    row = body.split('data-metric="on_topic_rate"><th scope="row">', 1)[1].split("</tr>", 1)[0]
    assert "90.0%" in row and "meets target" in row


def test_dashboard_per_agent(client, ada, space, agent_factory):
    agent_factory("dev", name="dev-7")
    rollup(space, 0, items=10, used=5)
    rollup(space, 0, agent="dev-7", items=10, used=1)
    body = _body(client.get("/quality/?agent=dev-7"))
    assert "agent dev-7" in body
    row = body.split('data-metric="usage_rate"><th scope="row">', 1)[1].split("</tr>", 1)[0]
    assert "10.0%" in row
    per_agent = body.split('id="agents-h"', 1)[1].split("</table>", 1)[0]
    assert "dev-7" in per_agent and "10.0%" in per_agent


def test_an_unknown_agent_is_refused_with_a_message(client, ada, space):
    body = _body(client.get("/quality/?agent=ghost"))
    assert "Showing the whole space" in body


def test_judge_validation_status_is_shown(client, ada, space, settings):
    assert "Never validated" in _body(client.get("/quality/"))
    JudgeValidation.objects.create(
        judge_name=settings.QUALITY_JUDGE,
        source="labelled.jsonl",
        turns=40,
        items=120,
        on_topic_agreement=0.9,
        used_agreement=0.8,
        contradicted_agreement=0.95,
        trusted=False,
    )
    body = _body(client.get("/quality/"))
    assert "not trusted" in body and "80.0%" in body and "labelled.jsonl" in body


def test_most_contradicted_thoughts_and_pending_corrections(client, ada, space, other_space):
    bad = make_marker(space, "The cache is <b>global</b>.", seed=1)
    fine = make_marker(space, "The cache is per process.", seed=2)
    foreign = make_marker(other_space, "Their contradicted thing.", seed=3)
    for i, (thought, contradicted) in enumerate([(bad, True), (bad, True), (fine, False), (foreign, True)]):
        turn = TurnLog.objects.create(
            space=thought.space,
            agent_name="dev-1",
            session_id="s",
            turn_id=f"t{i}",
            injected_from="explicit",
            status="scored",
        )
        TurnItem.objects.create(
            turn=turn,
            thought=thought,
            position=0,
            excerpt=thought.content[:500],
            content_length=len(thought.content),
            contradicted=contradicted,
        )
    suggestion_create(thought=bad, statement="The cache is per process.", origin=SuggestionOrigin.QUALITY_JUDGE)
    body = _body(client.get("/quality/"))
    table = body.split('id="contra-h"', 1)[1].split("</table>", 1)[0]
    assert "The cache is &lt;b&gt;global&lt;/b&gt;." in table and "2×" in table
    assert "per process" not in table and "Their contradicted" not in table
    pending = body.split('id="pending-h"', 1)[1].split("</ul>", 1)[0]
    assert f'href="/brain/thoughts/{bad.id}/"' in pending


def test_dashboard_query_count_is_fixed(client, ada, space, agent_factory, django_assert_max_num_queries):
    for name in ("dev-1", "qa-1", "pdsa-1"):
        agent_factory(name.split("-")[0], name=name)
        for days_ago in range(30):
            rollup(space, days_ago, agent=name)
    # session, user, spaces, agents, rollups, judge, rolled-up-at, per agent, contradicted, pending
    with django_assert_max_num_queries(10):
        assert client.get("/quality/").status_code == 200
    with django_assert_max_num_queries(11):  # + the agent's lookup
        assert client.get("/quality/?agent=dev-1").status_code == 200


def test_dashboard_per_agent_keeps_agents_apart_by_identity(client, ada, space, agent_factory):
    """A renamed agent's rows are one agent under its name now; a deleted agent's rows stay its own even
    when a newcomer was given its name."""
    agent_factory("dev", name="dev-7")
    rollup(space, 1, agent="dev-7", items=10, used=1)  # written while it was called dev-7
    renamed = Agent.objects.get(space=space, name="dev-7")
    renamed.name = "dev-8"
    renamed.save(update_fields=["name"])
    rollup(space, 0, agent="dev-8", items=10, used=3)
    retired = agent_factory("qa", name="qa-1").agent
    rollup(space, 1, agent="qa-1", items=10, used=10)
    Agent.objects.filter(pk=retired.pk).delete()
    agent_factory("qa", name="qa-1")  # a newcomer with the retired agent's name
    rollup(space, 0, agent="qa-1", items=10, used=0)
    per_agent = _body(client.get("/quality/")).split('id="agents-h"', 1)[1].split("</table>", 1)[0]
    usage = re.findall(r'">([^<]+)</a></th><td>[^<]*</td><td>([^<]*)</td>', per_agent)
    # dev-7 then dev-8: one agent, 4 of 20 items used; the retired qa-1 and the newcomer: two agents
    assert sorted(usage) == [("dev-8", "20.0%"), ("qa-1", "0.0%"), ("qa-1", "100.0%")], per_agent
