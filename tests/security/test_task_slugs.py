"""A task reference names exactly one task: slugs can't look like task ids (UUIDs)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks.models import Task
from tests.tasks_helpers import make_project, make_task
from tests.web_support import admin_form_data


@pytest.fixture
def liaison_client(agent_factory):
    return agent_factory("liaison")


@pytest.fixture
def victim(space):
    project = make_project(space)
    return make_task(project, slug="victim", status="backlog")


def _create_over_api(agent, slug: str) -> str:
    response = agent.post("/api/v1/tasks", {"project": "proj", "slug": slug, "title": "Impostor"}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    return error["message"]


def _create_over_cli(agent, slug: str) -> str:
    argv = ["task", "create", "--system", "--project", "proj", "--slug", slug, "--title", "Impostor"]
    with pytest.raises(CommandError) as refused:
        call_command(*argv, stdout=StringIO())
    return str(refused.value)


@pytest.mark.parametrize("create", [_create_over_api, _create_over_cli], ids=["api", "cli"])
@pytest.mark.parametrize("shape", [str, lambda u: u.hex], ids=["canonical", "hex"])
def test_cannot_create_a_task_whose_slug_is_another_tasks_id(liaison_client, victim, create, shape):
    slug = shape(victim.id)
    assert "slug" in create(liaison_client, slug)
    assert list(Task.objects.values_list("slug", flat=True)) == ["victim"]
    assert liaison_client.get(f"/api/v1/tasks/{slug}").json()["id"] == str(victim.id)


def test_a_slug_that_only_contains_a_uuid_is_still_a_slug(liaison_client, victim):
    response = liaison_client.post(
        "/api/v1/tasks", {"project": "proj", "slug": f"fix-{victim.id}", "title": "Fine"}, format="json"
    )
    assert response.status_code == 201, response.content


def test_a_uuid_reference_resolves_by_id_only(liaison_client, space, victim):
    """A row that already holds a UUID-shaped slug (stored before the rule) is never what an id names."""
    impostor = make_task(victim.project, slug=str(victim.id), status="backlog")
    for _ in range(5):
        body = liaison_client.get(f"/api/v1/tasks/{victim.id}").json()
        assert body["id"] == str(victim.id) and body["slug"] == "victim"
    assert liaison_client.get(f"/api/v1/tasks/{impostor.id}").json()["id"] == str(impostor.id)


def test_a_uuid_parent_reference_resolves_by_id_only(liaison_client, victim):
    make_task(victim.project, slug=str(victim.id), status="backlog")
    response = liaison_client.post(
        "/api/v1/tasks",
        {"project": "proj", "slug": "bug-1", "title": "A bug", "type": "bug", "parent_ids": [str(victim.id)]},
        format="json",
    )
    assert response.status_code == 201, response.content
    bug = Task.objects.get(slug="bug-1")
    assert [p.id for p in bug.parents.all()] == [victim.id]


def test_admin_cannot_rename_a_task_to_another_tasks_id(admin_client, victim):
    other = make_task(victim.project, slug="other", status="backlog")
    url = f"/admin/tasks/task/{other.id}/change/"
    data = {**admin_form_data(admin_client.get(url)), "slug": str(victim.id)}
    response = admin_client.post(url, data)
    assert response.status_code == 200  # the form again, with its error
    assert "slug" in response.context["adminform"].form.errors
    other.refresh_from_db()
    assert other.slug == "other"


def test_admin_renames_a_task_to_a_slug(admin_client, victim):
    """The same form post with an ordinary slug is saved: the refusal above is the slug's, not the form's."""
    other = make_task(victim.project, slug="other", status="backlog")
    url = f"/admin/tasks/task/{other.id}/change/"
    response = admin_client.post(url, {**admin_form_data(admin_client.get(url)), "slug": "renamed"})
    assert response.status_code == 302, response.context["adminform"].form.errors
    other.refresh_from_db()
    assert other.slug == "renamed"
