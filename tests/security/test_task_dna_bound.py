"""The whole task DNA stays within DNA_MAX_CHARS: patches that are each small can't grow it past the bound."""

import json

import pytest

from tasks.models import Task
from tasks.services.tasks import DNA_MAX_CHARS
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db


def test_repeated_dna_patches_cannot_grow_the_dna_past_its_bound(dev, space):
    task = make_task(make_project(space), status="ready", role="dev")
    chunk = "x" * 40_000  # each patch alone is well under DNA_MAX_CHARS and the body limit
    statuses = []
    for i in range(4):
        response = dev.patch(f"/api/v1/tasks/{task.slug}/dna", {f"notes_{i}": chunk}, format="json")
        statuses.append(response.status_code)
        if response.status_code == 400:
            error = response.json()["error"]
            assert error["code"] == "INVALID_DNA" and str(DNA_MAX_CHARS) in error["message"]
    assert statuses == [200, 200, 400, 400]
    stored = Task.objects.get(pk=task.pk).dna
    assert len(json.dumps(stored)) <= DNA_MAX_CHARS and set(stored) >= {"notes_0", "notes_1"}
    assert "notes_2" not in stored  # the refused patch changed nothing
    # Removing a key (null) is always possible, and then there is room again.
    assert dev.patch(f"/api/v1/tasks/{task.slug}/dna", {"notes_0": None}, format="json").status_code == 200
    assert dev.patch(f"/api/v1/tasks/{task.slug}/dna", {"notes_2": chunk}, format="json").status_code == 200
