"""The evidence the workflow's memory gates accept, and the paths that produce it: attack tests.

SPEC 3.2: "The memory gates are verified, not trusted: ``memory_query_session`` must name a session in
which this agent queried the brain after the task last entered its current state, and
``memory_contribution_id`` must name a thought this agent contributed during the active phase." Each
test below is an agent (or a file handed to the operator) trying to satisfy a gate without the query or
the contribution the gate stands for.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from brain.models import Thought
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db

IMPORT_URL = "/api/v1/thoughts/import"


def _active_dev_task(space, slug: str):
    """A task the dev has claimed: active, role dev, its phase clock started now."""
    return make_task(make_project(space, "gates"), slug=slug, status="active", role="dev", dna={"pdsa_ref": "d.md"})


def _hand_off(client, task, thought_id: str):
    patched = client.patch(f"/api/v1/tasks/{task.slug}/dna", {"memory_contribution_id": thought_id}, format="json")
    assert patched.status_code == 200, patched.content[:2000]
    return client.post(f"/api/v1/tasks/{task.slug}/transition", {"to": "review", "summary": "done"}, format="json")


def _import(client, items) -> list[str]:
    response = client.post(IMPORT_URL, data=json.dumps(items), content_type="application/json")
    assert response.status_code == 201, response.content[:2000]
    return response.json()["ids"]


# --- memory_contribution_id: an import is a restore, not a contribution ------------------------------


@pytest.mark.parametrize(
    "item",
    [
        pytest.param({"content": "ok"}, id="one-word-note"),
        pytest.param({"content": "ok", "superseded": True}, id="born-superseded-note"),
    ],
)
def test_an_agents_import_during_the_phase_is_no_contribution_for_the_gate(dev, space, fake_embedder, item):
    """Attack: the dev claimed a task and learned nothing. Instead of contributing, it imports one item
    over ``POST /api/v1/thoughts/import`` ("ok", or "ok" stored already superseded, so the junk never
    even ranks among live knowledge), names the id the import answers as ``memory_contribution_id``
    and hands off (active->review). The gate only checks author, time, marker and retracted flag, and
    the imported row is the caller's and dated now, so it passes.

    Should: 409 MEMORY_NOT_VERIFIED. An import restores knowledge the agent already had ("Imports restore
    knowledge, they are not contributions": no threshold, no one-row-per-fact, state and flags taken as
    given), so it is no thought "this agent contributed during the active phase" (SPEC 3.2); only a
    memory call (REST or MCP) or a correction stores a contribution the gate may accept."""
    task = _active_dev_task(space, "import-gate")
    [note] = _import(dev, [item])

    handed = _hand_off(dev, task, note)

    assert handed.status_code == 409, handed.json()
    assert handed.json()["error"]["code"] == "MEMORY_NOT_VERIFIED"


def test_an_import_cannot_launder_another_agents_thought_into_the_callers_contribution(
    dev, agent_factory, space, fake_embedder
):
    """Attack: another agent contributed a fact. Through the memory endpoint, the dev repeating it
    stores nothing (one row per fact: ``already_known`` answers the other agent's thought, which the
    gate refuses as "not contributed by" the dev). Through the import the same text becomes a new row
    authored by the dev and dated now, which passes the gate.

    Should: the gate refuses it (409 MEMORY_NOT_VERIFIED): copying another agent's thought is not a
    contribution of the phase (SPEC 3.2), and the import must not be a side door around the
    already_known rule that the memory endpoint applies (SPEC 2.2, "one row per fact")."""
    other = agent_factory("qa", name="qa-author")
    text = "The parser cache must be locked before the warm-up thread reads it, or it returns stale rows."
    said = other.post("/api/v1/memory", {"prompt": text}, format="json")
    assert said.status_code == 200 and said.json()["trace"]["thought_id"], said.content[:2000]
    # The memory endpoint's answer to the same repeat: nothing of the dev's own to name.
    repeat = dev.post("/api/v1/memory", {"prompt": text}, format="json").json()["trace"]
    assert repeat["already_known"] and repeat["thought_id"] == said.json()["trace"]["thought_id"]

    task = _active_dev_task(space, "launder-gate")
    [copy] = _import(dev, [{"content": text}])
    assert Thought.objects.get(pk=copy).agent_id == dev.agent.id  # the laundered row

    handed = _hand_off(dev, task, copy)

    assert handed.status_code == 409, handed.json()
    assert handed.json()["error"]["code"] == "MEMORY_NOT_VERIFIED"


def test_a_memory_contribution_of_the_phase_still_opens_the_gate(dev, space, fake_embedder):
    """Boundary next to the two tests above: a contribution through the memory endpoint during the
    active phase is the evidence the gate is for, and the hand-off goes through (SPEC 3.2)."""
    task = _active_dev_task(space, "memory-gate")
    said = dev.post(
        "/api/v1/memory",
        {"prompt": "The import-gate parser needs a lock around its cache: two workers filled it at once."},
        format="json",
    )
    assert said.status_code == 200, said.content[:2000]

    handed = _hand_off(dev, task, said.json()["trace"]["thought_id"])

    assert handed.status_code == 200, handed.json()


# --- memory_query_session: a restored query log from the future ---------------------------------------


def test_a_future_dated_restored_query_log_is_no_query_of_a_later_phase(dev, space, tmp_path, fake_embedder):
    """Attack: an export file handed to the operator (``manage.py brain import``) carries one query-log
    row for the dev in session "forever", dated 2099. Restoring it is a routine operation; from then on
    the dev claims any task with ``memory_query_session: "forever"`` without ever querying the brain:
    the gate sees a query "after the task entered its state" for every phase to come.

    Should: the restore keeps no query (nor thought) dated after the moment it is stored, as the
    agent's import already refuses future dates (CLOCK_SKEW), so the claim is refused with 409
    MEMORY_NOT_VERIFIED. SPEC 3.2 (a query after the task last entered its current state); SPEC 6
    (the operator restores dates *from an export*: a date that has not happened yet is no export's)."""
    path = tmp_path / "export.jsonl"
    rows = [
        {"kind": "header", "format": "colony-export", "version": 1, "space": space.slug, "counts": {}},
        {
            "kind": "query_log",
            "agent": dev.agent.name,
            "agent_ref": dev.agent.name,
            "session_id": "forever",
            "query_text": "anything",
            "results": [],
            "created_at": "2099-01-01T00:00:00+00:00",
        },
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with contextlib.suppress(CommandError):  # refusing the future-dated row is one good answer
        call_command("brain", "import", str(path), "--no-progress")

    task = make_task(
        make_project(space, "gates"), slug="future-gate", status="ready", role="dev", dna={"pdsa_ref": "d.md"}
    )
    assert (
        dev.patch(f"/api/v1/tasks/{task.slug}/dna", {"memory_query_session": "forever"}, format="json").status_code
        == 200
    )
    claimed = dev.post(f"/api/v1/tasks/{task.slug}/transition", {"to": "active", "summary": "claim"}, format="json")

    assert claimed.status_code == 409, claimed.json()
    assert claimed.json()["error"]["code"] == "MEMORY_NOT_VERIFIED"


def test_a_future_dated_restored_thought_is_refused(dev, space, tmp_path, fake_embedder):
    """The same file with a thought of the dev dated 2099: it would be a contribution of every phase to
    come (``memory_contribution_id``). The restore refuses it and stores nothing of the batch."""
    path = tmp_path / "export.jsonl"
    rows = [
        {"kind": "header", "format": "colony-export", "version": 1, "space": space.slug, "counts": {}},
        {
            "kind": "thought",
            "content": "Staging deploys run the migrations before the workers restart.",
            "agent": dev.agent.name,
            "contributor_id": dev.agent.name,
            "created_at": "2099-01-01T00:00:00+00:00",
        },
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(CommandError, match="in the future"):
        call_command("brain", "import", str(path), "--no-progress")
    assert not Thought.objects.filter(space=space, content__startswith="Staging deploys").exists()
