"""Advisory quality flags (SPEC 2.5, seeds/000 2d/5b): each rule on its own, at and around its threshold."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import override_settings
from django.utils import timezone

from brain import jobs
from brain.models import QueryLog, Thought
from brain.services import flags
from brain.services.flags import (
    contribution_flags,
    is_keyword_echo,
    is_near_duplicate,
    is_orphaned_reference,
    is_stale,
    thoughts_flag_stale,
)
from brain.services.thoughts import thought_create
from core import services as core_services

TODAY = dt.date(2026, 3, 20)
WORDS10 = "alpha bravo charlie delta echo foxtrot golf hotel india juliet"


# --- keyword_echo ---------------------------------------------------------------------------------


def _recent_queries(*, space, agent=None, agent_ref=None) -> list[str]:
    """The recent queries a contribution's keyword-echo rule reads (its half of contribution_checks)."""
    return flags.contribution_checks(space=space, agent=agent, agent_ref=agent_ref, guard=False)[0]


def test_keyword_echo_seed_example():
    query = "brain contribution quality patterns, PageIndex.ai principles for knowledge management"
    assert is_keyword_echo("brain contribution quality patterns, PageIndex.ai principles for knowledge", [query])


@pytest.mark.parametrize(
    "shared,expected",
    [(5, False), (6, False), (7, True), (10, True)],
    ids=["50%", "60%-is-not-more-than-60%", "70%", "100%"],
)
def test_keyword_echo_threshold_is_more_than_60_percent(shared, expected):
    words = WORDS10.split()
    query = " ".join(words[:shared] + ["zulu"] * 3)
    assert is_keyword_echo(WORDS10, [query]) is expected


def test_keyword_echo_needs_the_overlap_in_one_query_not_across_queries():
    words = WORDS10.split()
    assert not is_keyword_echo(WORDS10, [" ".join(words[:5]), " ".join(words[5:])])
    assert is_keyword_echo(WORDS10, ["unrelated words", " ".join(words[:7])])


def test_keyword_echo_ignores_case_and_edge_punctuation_and_repeats():
    assert is_keyword_echo("Postgres, HNSW; Postgres! index tuning?", ["postgres hnsw index tuning"])


@pytest.mark.parametrize("text,queries", [("", ["anything"]), ("   ", ["x"]), (WORDS10, []), (WORDS10, ["", None])])
def test_keyword_echo_edge_cases_are_not_echoes(text, queries):
    assert not is_keyword_echo(text, queries)


def test_self_contained_thought_is_not_an_echo_of_its_search():
    text = (
        "XPollination Gründung state 2026-02-26: EPU path selected, Befähigungsprüfung chosen over Vorpraxis "
        "because of the Kleinstunternehmen rule; next step is the AMS submission."
    )
    assert not is_keyword_echo(text, ["xpollination gründung state"])


# --- orphaned_reference ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["See the PDSA doc for details", "see my notes", "For the rest, see our wiki.", "SEE WORKFLOW.md"],
)
def test_orphaned_reference_short_see_x(text):
    assert is_orphaned_reference(text)


def test_orphaned_reference_length_threshold():
    head = "See the PDSA doc. "
    assert is_orphaned_reference(head + "x" * (149 - len(head)))  # 149 chars: too short to hold substance
    assert not is_orphaned_reference(head + "x" * (150 - len(head)))  # 150: long enough


@pytest.mark.parametrize(
    "text",
    ["We foresee a delay in the rollout", "The deploy uses Postgres 15", "Seen in production", "see"],
)
def test_orphaned_reference_needs_the_see_x_pattern(text):
    assert not is_orphaned_reference(text)


# --- near_duplicate -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "similarity,expected", [(None, False), (0.5, False), (0.9, False), (0.9001, True), (0.99, True), (1.0, True)]
)
def test_near_duplicate_is_above_090(similarity, expected):
    assert is_near_duplicate(similarity) is expected


# --- stale ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "age_days,expected", [(0, False), (13, False), (14, False), (15, True), (400, True), (-3, False)]
)
def test_stale_snapshot_is_older_than_the_setting(age_days, expected):
    assert is_stale("state_snapshot", TODAY - dt.timedelta(days=age_days), TODAY, days=14) is expected


@override_settings(STALE_SNAPSHOT_DAYS=3)
def test_stale_default_days_come_from_settings():
    assert is_stale("state_snapshot", TODAY - dt.timedelta(days=4), TODAY)
    assert not is_stale("state_snapshot", TODAY - dt.timedelta(days=3), TODAY)


@pytest.mark.parametrize("category", ["decision_record", "operational_learning", "uncategorized", None])
def test_only_state_snapshots_go_stale(category):
    assert not is_stale(category, TODAY - dt.timedelta(days=400), TODAY, days=14)


def test_snapshot_without_temporal_scope_is_not_stale():
    assert not is_stale("state_snapshot", None, TODAY, days=14)


# --- contribution_flags ---------------------------------------------------------------------------


def test_contribution_flags_combine_in_stable_order():
    assert contribution_flags(text="see the wiki page", recent_queries=["wiki page see the"]) == [
        "keyword_echo",
        "orphaned_reference",
    ]


def test_contribution_flags_clean_thought_has_none():
    text = "The deploy uses Postgres 15 with pgvector 0.8; HNSW indexes are built with m=16, ef_construction=64."
    assert contribution_flags(text=text, recent_queries=["how do we deploy"]) == []


def test_contribution_flags_back_dated_snapshot_is_stale_at_once():
    old = TODAY - dt.timedelta(days=30)
    text = "Gründung state: EPU path chosen, Kurzkonzept ready, next the AMS submission in April 2026."
    assert contribution_flags(
        text=text, recent_queries=[], category="state_snapshot", temporal_scope=old, today=TODAY
    ) == ["stale"]
    assert (
        contribution_flags(text=text, recent_queries=[], category="state_snapshot", temporal_scope=timezone.localdate())
        == []
    )


# --- recent queries selector ----------------------------------------------------------------------


@pytest.mark.django_db
def test_recent_queries_are_the_agents_own_newest_first_within_24h(space, other_space, dev, agent_factory):
    qa = agent_factory("qa")
    mine = [
        QueryLog.objects.create(space=space, agent=dev.agent, agent_ref="dev-1", session_id="s", query_text=f"q{i}")
        for i in range(3)
    ]
    QueryLog.objects.create(space=space, agent=qa.agent, agent_ref="qa", session_id="s", query_text="theirs")
    QueryLog.objects.create(space=other_space, agent=None, agent_ref="dev-1", session_id="s", query_text="elsewhere")
    old = QueryLog.objects.create(space=space, agent=dev.agent, agent_ref="dev-1", session_id="s", query_text="old")
    QueryLog.objects.filter(pk=old.pk).update(created_at=timezone.now() - dt.timedelta(hours=25))
    QueryLog.objects.filter(pk=mine[0].pk).update(created_at=timezone.now() - dt.timedelta(hours=1))

    assert _recent_queries(space=space, agent=dev.agent) == ["q2", "q1", "q0"]
    assert _recent_queries(space=space, agent_ref="dev-1") == ["q2", "q1", "q0"]
    assert _recent_queries(space=other_space, agent_ref="dev-1") == ["elsewhere"]
    assert _recent_queries(space=space) == []


@pytest.mark.django_db
def test_recent_queries_leave_out_calls_that_stored_a_thought(space, dev, thought_factory):
    stored = thought_factory("The deploy pipeline runs migrations first.")
    QueryLog.objects.create(space=space, agent=dev.agent, agent_ref="dev-1", session_id="s", query_text="a search")
    QueryLog.objects.create(
        space=space,
        agent=dev.agent,
        agent_ref="dev-1",
        session_id="s",
        query_text=stored.content,
        stored_thought=stored,
    )
    assert _recent_queries(space=space, agent=dev.agent) == ["a search"]


@pytest.mark.django_db
def test_recent_queries_keep_only_the_last_n(space, dev, monkeypatch):
    monkeypatch.setattr(flags, "RECENT_QUERIES_LIMIT", 2)
    for i in range(4):
        QueryLog.objects.create(space=space, agent=dev.agent, agent_ref="dev-1", session_id="s", query_text=f"q{i}")
    assert _recent_queries(space=space, agent=dev.agent) == ["q3", "q2"]


# --- stale job ------------------------------------------------------------------------------------


def _snapshot(space, *, scope, category="state_snapshot", flags=()):
    return thought_create(
        space=space,
        content=f"state of the rollout on {scope}",
        contributor_id="dev-1",
        contributor_name="dev-1",
        thought_category=category,
        topic="rollout",
        temporal_scope=scope,
        quality_flags=list(flags),
        embedding=[1.0] + [0.0] * 383,
    )


@pytest.mark.django_db
def test_flag_stale_marks_old_snapshots_once_and_keeps_other_flags(space, other_space):
    old = _snapshot(space, scope=TODAY - dt.timedelta(days=20), flags=["keyword_echo"])
    old_elsewhere = _snapshot(other_space, scope=TODAY - dt.timedelta(days=15))
    boundary = _snapshot(space, scope=TODAY - dt.timedelta(days=14))
    fresh = _snapshot(space, scope=TODAY)
    decision = _snapshot(space, scope=TODAY - dt.timedelta(days=90), category="decision_record")
    undated = _snapshot(space, scope=None)

    assert thoughts_flag_stale(today=TODAY, days=14) == 2
    assert thoughts_flag_stale(today=TODAY, days=14) == 0  # idempotent: no second "stale"

    def flags_of(t):
        return Thought.objects.get(pk=t.pk).quality_flags

    assert flags_of(old) == ["keyword_echo", "stale"]
    assert flags_of(old_elsewhere) == ["stale"]
    for untouched in (boundary, fresh, decision, undated):
        assert flags_of(untouched) == []


@pytest.mark.django_db
@override_settings(STALE_SNAPSHOT_DAYS=1)
def test_flag_stale_job_uses_today_and_the_setting(space):
    yesterday = _snapshot(space, scope=timezone.localdate() - dt.timedelta(days=1))
    older = _snapshot(space, scope=timezone.localdate() - dt.timedelta(days=2))
    assert jobs.flag_stale_snapshots.delay().get() == 1
    assert Thought.objects.get(pk=older.pk).quality_flags == ["stale"]
    assert Thought.objects.get(pk=yesterday.pk).quality_flags == []


@pytest.mark.django_db
def test_recent_queries_of_a_deactivated_identity_do_not_leak_between_agents(space, dev):
    other, _ = core_services.agent_create(name="dev-2", role="dev", space=space)
    QueryLog.objects.create(space=space, agent=dev.agent, agent_ref="shared-wire-id", session_id="s", query_text="a")
    assert _recent_queries(space=space, agent=other) == []
