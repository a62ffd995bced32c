"""Attacks through the management CLI and on revoking an agent's read-only URL tokens (SPEC 5, 6).

The REST API, the MCP tools and the web pages hold every string to a documented bound (a transition's
summary 1000 characters, a task title 300, a correction's facts and text PROMPT_MAX_CHARS) in their
serializers; the management commands call the services directly, so the services hold the same bounds.
Revoking "all tokens of an agent" includes the read-only URL tokens that answer as that agent.

Each test states the attack and the rule that holds instead.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from brain.inputs import PROMPT_MAX_CHARS
from brain.models import Thought
from tasks.models import Task, TransitionLog
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db

STATEMENT = "The staging cluster is rebuilt every Sunday night from the infrastructure repository main branch."

#: What POST /api/v1/tasks/{id}/transition (and MCP task_transition, and the board's form) take as summary.
SUMMARY_MAX_CHARS = 1000
#: What POST /api/v1/tasks takes as a title (tasks.apis: max_length=300; the column is varchar(300)).
TITLE_MAX_CHARS = 300


# --- 1. agent revoke NAME leaves the agent's URL tokens live -------------------------------------------


def test_revoking_all_tokens_of_an_agent_also_stops_its_url_tokens(dev, url_token, fake_embedder):
    """Attack: an agent's tokens leak (or the agent is retired), and the operator runs
    ``manage.py agent revoke dev-1`` ("revoke one token (--token PREFIX) or all tokens of an agent"), which
    prints "Revoked N token(s)". ``core.services.token_revoke`` only revokes AgentToken rows: every read-only
    URL token of dev-1 (``colr_...``, which answers as dev-1 and reads the whole space's brain) keeps working
    until it expires, up to 365 days later, and nothing in the output says so.
    Rule (SPEC 6: the token fixes the agent's identity; seed 003 B: a URL token is revocable): revoking all
    tokens of an agent revokes its URL tokens too (or the command says they are still live and how to revoke
    them); the link then answers 401."""
    client = APIClient()
    assert client.get("/api/v1/memory", {"prompt": STATEMENT, "token": url_token}).status_code == 200
    call_command("agent", "revoke", dev.agent.name)
    assert dev.get("/api/v1/agents/me").status_code == 401  # the bearer token is gone
    response = client.get("/api/v1/memory", {"prompt": STATEMENT, "token": url_token})
    assert response.status_code == 401, (
        f"a URL token of {dev.agent.name} still answers ({response.status_code}) after 'agent revoke "
        f"{dev.agent.name}' revoked all its tokens"
    )


# --- 2. task transition --summary has no bound ----------------------------------------------------------


def test_cli_transition_summary_is_held_to_the_apis_bound(space, agent_factory, fake_embedder):
    """Attack: ``manage.py task transition t1 ready --agent pdsa-1 --summary <200,000 characters>`` (an agent
    with a shell runs the README's own command, with text it was steered to paste). The REST view, the MCP tool
    and the board cap the summary at 1000 characters in their serializers; ``tasks.services.transitions
    .task_transition`` takes any length, so the CLI stores a 200,000-character TransitionLog.summary and a
    200,000-character transition marker: a thought past PROMPT_MAX_CHARS that the in-flight API and every
    agent's SessionStart hook then hand out as the task's last marker.
    Rule (SPEC 6: every write path holds whatever the caller sends): a summary over the bound is a
    CommandError and nothing moves, or it is cut to the bound; the marker stays within PROMPT_MAX_CHARS."""
    agent_factory("pdsa", name="pdsa-1")
    make_task(make_project(space, "colony"), slug="t1", status="pending", role="pdsa")
    try:
        call_command("task", "transition", "t1", "ready", "--agent", "pdsa-1", "--summary", "s" * 200_000)
    except CommandError:
        assert Task.objects.get(slug="t1").status == "pending"
        assert not TransitionLog.objects.exists()
        return
    log = TransitionLog.objects.get()
    assert len(log.summary) <= SUMMARY_MAX_CHARS, len(log.summary)
    assert len(log.marker.content) <= PROMPT_MAX_CHARS, len(log.marker.content)


# --- 3. task create --title past its column is a traceback ------------------------------------------------


def test_cli_task_title_past_its_column_is_a_command_error(space):
    """Attack: ``manage.py task create --project colony --slug s1 --title <5,000 characters>``. The API's
    serializer refuses a title over 300 characters; ``tasks.services.tasks.task_create`` does not check it,
    so the insert reaches PostgreSQL and the operator gets a DataError traceback ("value too long for type
    character varying(300)"), the CLI's 500 (the round-2 rule for ``agent create`` names and labels).
    Rule (SPEC 6: bad input is refused with a clear error, never a crash): a CommandError naming the title
    and its limit, and no task created."""
    make_project(space, "colony")
    with pytest.raises(CommandError, match="(?i)title"):
        call_command("task", "create", "--project", "colony", "--slug", "s1", "--title", "T" * 5000)
    assert not Task.objects.exists()


# --- 4. brain correct stores facts and text past the API's bounds ---------------------------------------


@pytest.mark.parametrize(
    ("args", "field", "bound"),
    [
        (["r" * (PROMPT_MAX_CHARS * 2)], "correct_fact", PROMPT_MAX_CHARS),
        (["right", "--corrected-fact", "w" * (PROMPT_MAX_CHARS * 3)], "corrected_fact", PROMPT_MAX_CHARS),
        (["right", "--content", "c" * (PROMPT_MAX_CHARS * 3)], "content", PROMPT_MAX_CHARS),
    ],
    ids=["correct_fact", "corrected_fact", "content"],
)
def test_cli_correction_is_held_to_the_apis_bounds(dev, thought_factory, fake_embedder, args, field, bound):
    """Attack: ``manage.py brain correct <id> <20,000 characters> --agent dev-1`` (or ``--corrected-fact`` /
    ``--content`` of 30,000). ``POST /api/v1/thoughts/{id}/correct`` and MCP ``memory_correct`` hold
    correct_fact, corrected_fact and the text to PROMPT_MAX_CHARS (10,000; the memory endpoint's correction
    holds the facts to FACT_MAX_CHARS, 5,000); the CLI calls
    ``brain.services.corrections.thought_correct_by_id`` without the serializer, and the service stores any
    length: a correction two or three times the bound, its facts quoted whole in the WARNING guidance every
    later contribution that repeats the wrong fact receives (``correction_guidance``).
    Rule (SPEC 6: every write path holds whatever the caller sends): a CommandError naming the field, nothing
    stored (or the field held to its bound)."""
    target = thought_factory(STATEMENT)
    try:
        call_command("brain", "correct", str(target.id), *args, "--agent", dev.agent.name)
    except CommandError:
        assert not Thought.objects.filter(thought_category="correction").exists()
        return
    correction = Thought.objects.get(thought_category="correction")
    assert len(getattr(correction, field)) <= bound, (field, len(getattr(correction, field)))
