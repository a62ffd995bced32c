"""The brain's admin: pages render with lineage; editing content re-embeds the thought."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.contrib import admin
from django.contrib.auth.models import User

from brain.admin import ThoughtAdmin
from brain.models import Thought
from tests.conftest import fake_vector

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = User.objects.create_superuser("root", "root@example.com", "pw-for-tests")
    client.force_login(user)
    return client


def test_pages_render_with_lineage(staff, thought_factory):
    original = thought_factory("Version one of the runbook.")
    refinement = thought_factory("Version two of the runbook.", thought_type="refinement", source_ids=[original.id])
    assert staff.get("/admin/brain/thought/").status_code == 200
    page = staff.get(f"/admin/brain/thought/{original.id}/change/").content.decode()
    assert str(refinement.id)[:8] in page and "Version two of the runbook." in page
    assert staff.get("/admin/brain/querylog/").status_code == 200
    assert staff.get("/admin/brain/correctionsuggestion/").status_code == 200


@pytest.mark.parametrize("changed, reembedded", [(["content"], True), (["topic"], False)])
def test_editing_content_reembeds(
    rf, fake_embedder, thought_factory, django_capture_on_commit_callbacks, changed, reembedded
):
    thought = thought_factory("Old wording.")
    thought.content = "New wording of the same thought."
    model_admin = ThoughtAdmin(Thought, admin.site)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        model_admin.save_model(rf.post("/"), thought, SimpleNamespace(changed_data=changed), change=True)
    assert len(callbacks) == (1 if reembedded else 0)
    thought.refresh_from_db()
    assert thought.content == "New wording of the same thought."
    expected = fake_vector("New wording of the same thought." if reembedded else "Old wording.")
    assert list(thought.embedding) == pytest.approx(expected, abs=1e-6)


def test_a_nul_in_an_admin_json_field_is_a_form_error_not_a_500(rf, thought_factory, space):
    """JSON text with "\\u0000" holds a NUL once parsed; saving it failed in PostgreSQL's jsonb (a 500)."""
    from tasks.models import Task
    from tests.tasks_helpers import make_project, make_task

    request = rf.get("/admin/")
    request.user = User.objects.create_superuser("root", "root@example.com", "pw-for-tests")
    thought = thought_factory("A thought with metadata.")
    task = make_task(make_project(space, "colony"), slug="fix", status="active", role="dev", dna={"a": 1})
    for instance, field in ((thought, "context_metadata"), (task, "dna")):
        form_class = admin.site._registry[type(instance)].get_form(request, instance)
        form = form_class(data={field: '{"note": "a\\u0000b"}'}, instance=instance)
        assert not form.is_valid()
        assert form.errors[field] == ["note: NUL characters (\\u0000) are not allowed."]
        deep = form_class(data={field: '{"a": ' + "[" * 5000 + "]" * 5000 + "}"}, instance=instance)
        assert not deep.is_valid()  # json.loads' RecursionError was a 500
        assert deep.errors[field] == ["Enter valid JSON: nested more than 100 levels of arrays and objects deep."]
        for number in ("1e400", "NaN"):  # json.loads reads infinity and NaN; jsonb refused them (a 500)
            huge = form_class(data={field: '{"n": ' + number + "}"}, instance=instance)
            assert not huge.is_valid()
            assert huge.errors[field][0].startswith("n: Not a finite number"), huge.errors
    assert Task.objects.get(pk=task.pk).dna == {"a": 1}


def test_the_change_page_names_the_agents_that_read_a_thought(staff, thought_factory, agent_factory):
    """accessed_by holds agent ids (a renamed agent is one agent); the admin shows their names now."""
    reader = agent_factory("qa", name="qa-reader")
    thought = thought_factory("A thought someone read.")
    Thought.objects.filter(pk=thought.pk).update(accessed_by=[str(reader.agent.pk), "old-name"])
    reader.agent.name = "qa-renamed"
    reader.agent.save(update_fields=["name"])
    body = staff.get(f"/admin/brain/thought/{thought.pk}/change/").content.decode()
    assert "qa-renamed, old-name" in body and str(reader.agent.pk) not in body
    assert 'name="accessed_by"' not in body  # reinforcement's record, not a form field
