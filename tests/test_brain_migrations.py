"""Data migrations of the brain app, run forward on rows written with the models of the migration before."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = ("brain", "0010_import_receipts")
AFTER = ("brain", "0011_suggestion_status_superseded")


@pytest.fixture
def executor():
    executor = MigrationExecutor(connection)
    yield executor
    executor = MigrationExecutor(connection)  # back to the latest state for the other tests
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_0011_closes_the_suggestions_left_pending_on_superseded_thoughts(executor, space):
    # Before this stop a suggestion stayed pending when its thought was corrected, refined or retracted;
    # an upgraded brain would have kept listing those in every memory answer.
    executor.migrate([BEFORE])
    apps = executor.loader.project_state([BEFORE]).apps
    thought, suggestion = apps.get_model("brain", "Thought"), apps.get_model("brain", "CorrectionSuggestion")

    def stored(content, **fields):
        return thought.objects.create(
            space_id=space.pk, content=content, contributor_id="t", contributor_name="t", **fields
        )

    correction = stored("CORRECTION: it is 5432", thought_category="correction")
    corrected = stored("port 5433", superseded=True, superseded_by=correction)
    refinement = stored("backups at 02:00, offsite weekly")
    refined = stored("backups at 02:00", superseded=True, refined_by=refinement)
    live = stored("rate limit 100")
    withdrawn = stored("rate limit 500", superseded=True, quality_flags=["retracted"])
    rows = {
        name: suggestion.objects.create(
            space_id=space.pk, thought=target, statement=name, origin="quality_judge", **extra
        )
        for name, target, extra in (
            ("on corrected", corrected, {}),
            ("on refined", refined, {}),
            ("on live", live, {}),
            ("raised by a retracted statement", live, {"contradicting_thought": withdrawn}),
            ("dismissed", corrected, {"status": "dismissed"}),
        )
    }

    executor.loader.build_graph()
    executor.migrate([AFTER])

    after = {s.statement: s for s in suggestion.objects.all()}
    assert (after["on corrected"].status, after["on corrected"].resolved_by) == ("superseded", "colony")
    assert after["on corrected"].correction_id == correction.pk
    assert (after["on refined"].status, after["on refined"].correction_id) == ("superseded", None)
    assert after["on live"].status == "pending" and after["dismissed"].status == "dismissed"
    assert after["raised by a retracted statement"].status == "superseded"
    assert after["on refined"].resolved_at is not None and rows["on live"].resolved_at is None


@pytest.mark.django_db(transaction=True)
def test_0012_lower_cases_the_topics_stored_before(executor, space):
    # Topics are matched as stored lower-cased from now on; one stored as "Deploys" before would no
    # longer be found by any filter.
    executor.migrate([AFTER])
    apps = executor.loader.project_state([AFTER]).apps
    thought = apps.get_model("brain", "Thought")
    for topic in ("Deploys ", "ÄRGER-Log", "backups", ""):
        thought.objects.create(
            space_id=space.pk, content=f"about {topic}", contributor_id="t", contributor_name="t", topic=topic
        )

    executor.loader.build_graph()
    executor.migrate([("brain", "0012_topics_lower_cased")])

    assert sorted(thought.objects.values_list("topic", flat=True)) == ["", "backups", "deploys", "ärger-log"]


@pytest.mark.django_db(transaction=True)
def test_0019_closes_the_suggestions_left_pending_on_superseded_statements(executor, space):
    # A pending suggestion whose statement is already superseded is closed: accepting it would store a
    # statement that no longer stands as the correct fact.
    before, after = (
        ("brain", "0018_content_key_confusables"),
        ("brain", "0019_close_suggestions_of_superseded_statements"),
    )
    executor.migrate([before])
    apps = executor.loader.project_state([before]).apps
    thought, suggestion = apps.get_model("brain", "Thought"), apps.get_model("brain", "CorrectionSuggestion")

    def stored(content, **fields):
        return thought.objects.create(
            space_id=space.pk, content=content, contributor_id="t", contributor_name="t", **fields
        )

    fact = stored("Staging deploys run migrations first.")
    corrected_statement = stored("Staging deploys never run migrations.", superseded=True)
    live_statement = stored("Staging deploys run migrations after the restart.")
    for name, statement in (("by a corrected statement", corrected_statement), ("by a live one", live_statement)):
        suggestion.objects.create(
            space_id=space.pk,
            thought=fact,
            statement=name,
            origin="contradiction_detector",
            contradicting_thought=statement,
        )

    executor.loader.build_graph()
    executor.migrate([after])

    status = {s.statement: (s.status, s.resolved_by) for s in suggestion.objects.all()}
    assert status == {"by a corrected statement": ("superseded", "colony"), "by a live one": ("pending", "")}
