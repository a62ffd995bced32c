"""manage.py task create|list|get|transition|update-dna: the same services as the API."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tasks.models import Task, TransitionLog
from tests.tasks_helpers import make_agent, make_project, query_brain

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command("task", *args, stdout=out)
    return out.getvalue()


def test_cli_round_trip(space):
    make_project(space, "colony")
    dev = make_agent(space, "pdsa", name="pdsa-cli")
    created = json.loads(
        run(
            "create",
            "--project",
            "colony",
            "--slug",
            "cli-task",
            "--title",
            "From the shell",
            "--dna",
            '{"pdsa_ref": "docs/d.md"}',
            "--agent",
            "pdsa-cli",
        )
    )
    assert (created["slug"], created["status"], created["dna"]) == ("cli-task", "backlog", {"pdsa_ref": "docs/d.md"})
    assert Task.objects.get(slug="cli-task").created_by == dev

    for to in ("pending", "ready"):
        moved = json.loads(run("transition", "cli-task", to, "--system", "--summary", f"to {to}"))
        assert moved["task"]["status"] == to
    session = query_brain(dev)
    run("update-dna", "cli-task", json.dumps({"memory_query_session": session, "note": "x"}))
    moved = json.loads(run("transition", "cli-task", "active", "--agent", "pdsa-cli", "--summary", "claim"))
    assert (moved["task"]["status"], moved["task"]["role"]) == ("active", "pdsa")
    assert moved["transition"]["marker"] == "TASK ready→active: PDSA cli-task (colony) — claim"

    listing = run("list", "--status", "active")
    assert "cli-task" in listing and "active" in listing
    assert "cli-task" not in run("list", "--status", "ready")
    shown = json.loads(run("get", "cli-task"))
    assert [t["to_status"] for t in shown["transitions"]] == ["active", "ready", "pending"]
    assert TransitionLog.objects.count() == 3


def test_cli_refusals_are_command_errors_and_change_nothing(space):
    make_project(space, "colony")
    make_agent(space, "qa", name="qa-cli")
    run("create", "--project", "colony", "--slug", "t", "--title", "T", "--status", "pending")
    with pytest.raises(CommandError, match="ACTOR_NOT_ALLOWED"):
        run("transition", "t", "ready", "--agent", "qa-cli")
    with pytest.raises(CommandError, match="PROTECTED_DNA_KEY"):
        run("update-dna", "t", '{"human_confirmed": true}')
    with pytest.raises(CommandError, match="Not valid JSON"):
        run("update-dna", "t", "{oops")
    with pytest.raises(CommandError, match="TASK_NOT_FOUND"):
        run("get", "missing")
    with pytest.raises(CommandError, match="MISSING_PARENT"):
        run("create", "--project", "colony", "--slug", "b", "--title", "B", "--type", "bug")
    with pytest.raises(CommandError):
        run("transition", "t", "ready")  # who acts must be said
    task = Task.objects.get(slug="t")
    assert (task.status, task.dna) == ("pending", {})
