"""brain.services.thoughts.thought_create writes its own prepared INSERT (not ``save()``): a stored
thought must read back exactly as the ORM would have stored it, whatever fields it carries."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from brain.models import Thought
from brain.services.thoughts import thought_create
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db


def _stored(thought: Thought) -> dict:
    fresh = Thought.objects.get(pk=thought.pk)
    return {f.attname: getattr(fresh, f.attname) for f in Thought._meta.concrete_fields if not f.generated}


def _given(thought: Thought) -> dict:
    return {f.attname: getattr(thought, f.attname) for f in Thought._meta.concrete_fields if not f.generated}


def _same(given: dict, stored: dict) -> None:
    for name, value in given.items():
        read = stored[name]
        if name in {"embedding", "corrected_fact_embedding"} and value is not None:
            assert [round(float(x), 5) for x in read] == [round(float(x), 5) for x in value], name
        else:
            assert read == value, name


def test_a_thought_with_every_kind_of_field_reads_back_the_same(space, dev):
    source = thought_create(space=space, content="The source.", contributor_id="a", contributor_name="A")
    thought = thought_create(
        space=space,
        content='Quotes "and" \\backslashes\\, unicode é, a newline\nand 100% of the text.',
        contributor_id="dev-1",
        contributor_name="Dev One",
        agent=dev.agent,
        thought_category="correction",
        thought_type="refinement",
        embedding=fake_vector("every field"),
        context_metadata={"nested": {"list": [1, 2.5, None, "x"]}, "flag": True},
        source_ids=[source.pk],
        tags=["a tag", 'with "quotes"', "comma,inside"],
        topic="launch",
        temporal_scope=date(2026, 2, 1),
        source_ref={"type": "task", "value": "launch-plan", "project": "colony"},
        alternatives_considered="Option B.",
        corrected_fact="The old fact.",
        correct_fact="The new fact.",
        supersedes=[source.pk, uuid.uuid4()],
        quality_flags=["stale", "near_duplicate"],
        corrected_fact_embedding=fake_vector("the old fact"),
        pheromone_weight=1.25,
        created_at=datetime(2025, 12, 31, 23, 59, 58, 123456, tzinfo=UTC),
        accessed_by=["qa-1"],
        co_retrieved_with={str(source.pk): 3},
        usage_score=0.5,
        effective_confidence=0.75,
    )
    assert thought._state.adding is False and thought._state.db == "default"
    _same(_given(thought), _stored(thought))
    assert Thought.objects.filter(pk=thought.pk, search_vector__isnull=False).exists()  # the database made it
    assert Thought.objects.filter(pk=thought.pk, search_vector="backslashes").exists()


def test_defaults_and_no_vector_read_back_the_same(space):
    thought = thought_create(space=space, content="Bare.", contributor_id="a", contributor_name="A")
    stored = _stored(thought)
    _same(_given(thought), stored)
    assert stored["embedding"] is None and stored["embedding_model"] == ""
    assert stored["tags"] == [] and stored["context_metadata"] == {} and stored["source_ref"] is None


def test_the_insert_is_prepared_and_bound_by_the_server(space):
    """The vector is a parameter, not 384 numbers pasted into the statement's text (what save() sent)."""
    with CaptureQueriesContext(connection) as ctx:
        thought_create(
            space=space, content="Bound.", contributor_id="a", contributor_name="A", embedding=fake_vector("bound")
        )
    inserts = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("INSERT INTO brain_thought")]
    assert len(inserts) == 1
    assert "%s" in inserts[0] and len(inserts[0]) < 2000, inserts[0][:300]
