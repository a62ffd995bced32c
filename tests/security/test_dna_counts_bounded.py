"""A task's DNA test counts, the review gate's evidence, are bounded as every other number is."""

from __future__ import annotations

import pytest

from tasks.models import Task
from tests.tasks_helpers import make_project, make_task


@pytest.mark.django_db
def test_dna_test_counts_past_any_test_suite_are_refused(dev, space):
    """Attack: an agent writes the review gate's counts as numbers no test suite has: 2**64, an integer of
    401 digits, or 1e308 (a whole float, stored as its 309-digit integer). Without the rule each is
    stored: the board and every reader of the DNA show it, a reader whose integers are 64-bit or
    JavaScript's doubles reads another number than Colony compares (2**53 + 1 and 2**53 are equal there,
    so a gate Colony refuses reads as passed), and the gate ``test_pass_count == test_total_count > 0``
    runs on nonsense. Rule: a count is a whole number from 0 to 1,000,000 (the DNA schema's ``maximum``);
    past it, 400 INVALID_DNA naming the field, DNA unchanged; the bound itself is stored."""
    make_task(make_project(space, "colony"), slug="t1", status="review", role="qa", dna={"keep": 1})
    for name in ("test_pass_count", "test_total_count"):
        for value in (str(2**64), "1" + "0" * 400, "1e308", "1000001"):
            response = dev.patch("/api/v1/tasks/t1/dna", f'{{"{name}": {value}}}', content_type="application/json")
            assert response.status_code == 400, f"{name}={value[:20]}: {response.content[:300]}"
            error = response.json()["error"]
            assert error["code"] == "INVALID_DNA" and name in error["message"], error
            assert Task.objects.get(slug="t1").dna == {"keep": 1}
    bound = dev.patch(
        "/api/v1/tasks/t1/dna",
        '{"test_pass_count": 1000000, "test_total_count": 1000000}',
        content_type="application/json",
    )
    assert bound.status_code == 200, bound.content[:300]
    assert Task.objects.get(slug="t1").dna == {"keep": 1, "test_pass_count": 1_000_000, "test_total_count": 1_000_000}
