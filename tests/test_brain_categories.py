"""Per-category required fields (SPEC 2.5, seeds/000 2a/2c): MISSING_CATEGORY_FIELDS names what is missing."""

from __future__ import annotations

import datetime as dt

import pytest

from api.errors import ValidationFailed
from brain.choices import ThoughtCategory
from brain.services.categories import REQUIRED_FIELDS, category_missing_fields, category_validate

COMPLETE = {
    "topic": "xpollination-gruendung",
    "temporal_scope": dt.date(2026, 2, 26),
    "source_ref": {"type": "task", "value": "brain-contribution-quality", "project": "best-practices"},
    "alternatives_considered": "Vorpraxis (Kleinstunternehmen rule makes it risky)",
    "corrected_fact": "Thomas is the certified Neuroimaginations-Coach",
    "correct_fact": "Neuroimaginations-Coaching is offered via a joint venture with Gerhard Quiring",
    "supersedes": ["7f1c6c1e-2c57-4d8f-9a57-0d7d1c1b2a11"],
}

CASES = [(category, field) for category, fields in REQUIRED_FIELDS.items() for field in fields]


def test_every_category_of_the_spec_has_a_rule():
    assert set(REQUIRED_FIELDS) == set(ThoughtCategory.values)


def test_the_table_is_the_documented_one():
    assert REQUIRED_FIELDS == {
        "state_snapshot": ("topic", "temporal_scope", "source_ref"),
        "decision_record": ("topic", "alternatives_considered", "source_ref"),
        "operational_learning": ("topic",),
        "task_outcome": ("source_ref",),
        "correction": ("topic", "supersedes", "corrected_fact", "correct_fact"),
        "transition_marker": ("source_ref",),
        "uncategorized": (),
    }


@pytest.mark.parametrize("category", list(REQUIRED_FIELDS))
def test_complete_contribution_passes(category):
    category_validate(category=category, fields=COMPLETE)


@pytest.mark.parametrize("category,field", CASES)
def test_each_missing_field_is_named(category, field):
    fields = {k: v for k, v in COMPLETE.items() if k != field}
    with pytest.raises(ValidationFailed) as caught:
        category_validate(category=category, fields=fields)
    assert caught.value.code == "MISSING_CATEGORY_FIELDS"
    assert caught.value.status_code == 400
    assert caught.value.extra == {"missing": [field]}
    assert field in caught.value.message


@pytest.mark.parametrize("blank", [None, "", "   ", [], {}, {"type": "task", "value": "  "}, {"type": "task"}])
def test_blank_values_count_as_missing(blank):
    fields = {**COMPLETE, "source_ref": blank}
    assert category_missing_fields(category="task_outcome", fields=fields) == ["source_ref"]


def test_all_missing_fields_are_listed_at_once_in_table_order():
    with pytest.raises(ValidationFailed) as caught:
        category_validate(category="correction", fields={"topic": "t", "correct_fact": "right"})
    assert caught.value.extra["missing"] == ["supersedes", "corrected_fact"]


@pytest.mark.parametrize("category", [None, "", "uncategorized"])
def test_uncategorized_requires_nothing(category):
    category_validate(category=category, fields={})


def test_first_state_snapshot_needs_no_supersedes():
    fields = {k: COMPLETE[k] for k in ("topic", "temporal_scope", "source_ref")}
    category_validate(category="state_snapshot", fields=fields)


def test_operational_learning_may_omit_source_ref():
    category_validate(category="operational_learning", fields={"topic": "agents"})


def test_unknown_category_is_a_validation_error():
    with pytest.raises(ValidationFailed) as caught:
        category_validate(category="rumour", fields=COMPLETE)
    assert caught.value.code == "VALIDATION_ERROR"
    assert "rumour" in caught.value.message
