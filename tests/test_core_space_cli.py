"""manage.py space create / list, and agent create naming the command when the space is missing."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from core.models import Agent, Space

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_space_create_then_agent_in_it_authenticates(space, client):
    out = run("space", "create", "team-blue", "--name", "Team Blue")
    assert "Created space team-blue (Team Blue)" in out
    assert "agent create NAME --role ROLE --space team-blue" in out
    assert Space.objects.get(slug="team-blue").name == "Team Blue"

    token = run("agent", "create", "blue-dev", "--role", "dev", "--space", "team-blue").strip().splitlines()[-1]
    response = client.get("/api/v1/agents/me", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.json()["space"] == "team-blue"


def test_space_name_defaults_to_slug_and_list_shows_counts(space):
    run("space", "create", "ops")
    run("agent", "create", "o1", "--role", "qa", "--space", "ops")
    lines = run("space", "list").splitlines()
    assert [line.split()[0] for line in lines] == ["default", "ops"]
    ops = next(line for line in lines if line.startswith("ops"))
    assert ops.split()[1:] == ["1", "agents", "ops"]


@pytest.mark.parametrize("slug", ["Team", "has space", "trail-", "x" * 65, "", "a_b", "naïve"])
def test_space_create_refuses_bad_slugs_and_stores_nothing(space, slug):
    with pytest.raises(CommandError, match="not a space slug"):
        run("space", "create", slug)
    assert list(Space.objects.values_list("slug", flat=True)) == ["default"]


def test_space_create_refuses_a_duplicate(space):
    with pytest.raises(CommandError, match="already exists"):
        run("space", "create", "default", "--name", "Again")
    assert Space.objects.get(slug="default").name == "Default space"


def test_agent_create_in_a_missing_space_names_the_command(space):
    with pytest.raises(CommandError) as error:
        run("agent", "create", "x", "--role", "dev", "--space", "nowhere")
    assert "manage.py space create nowhere" in str(error.value)
    assert not Agent.objects.filter(name="x").exists()
    assert not Space.objects.filter(slug="nowhere").exists()
