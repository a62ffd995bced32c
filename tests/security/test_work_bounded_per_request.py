"""Work per request is bounded by the request, not by what other agents stored (SPEC 6: bounded work).

One agent can store cheaply what every other agent's requests then read: one import call stores 1,000
thoughts that all refine, link to or consolidate one popular thought, and a memory call names 100 ids.
A read that walks or lists all of that does work (rows, bytes, CPU of a web worker) that grows with
what the attacker stored, on every request of every agent: a denial of service by one agent against
everyone. Each test builds the attacker's data with the real API (the import endpoint where it is
the cheap way), then sizes the victim's request, and asserts a bounded answer.

(``test_lists_bounded.py`` covers the number of in-flight tasks and projects one answer lists;
``test_web_pages_query_strings_hold.py`` the thought page's lineage trees and related rows.)
"""

from __future__ import annotations

import pytest
from django.db import connection

from brain.models import Thought
from tests.security import support
from tests.security.support import import_post, memory_answer, remember
from tests.tasks_helpers import make_project, make_task

pytestmark = pytest.mark.django_db

boss = support.boss

#: What the attacker stores in one import call (IMPORT_BATCH_MAX_ITEMS, the default batch).
BATCH = 1000
#: The most items (lineage nodes, ids) one answer may reasonably hold whatever was stored: a page, like
#: the lists' largest limit (GET /api/v1/thoughts takes limit up to 200).
PAGE = 200


def _rows_read(table: str) -> int:
    """Rows of ``table`` this transaction has read so far (sequential scans and index fetches)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
            "WHERE relname = %s",
            [table],
        )
        row = cursor.fetchone()
    return row[0] if row else 0


def _import(client, items: list[dict]) -> list[str]:
    response = import_post(client, items)
    assert response.status_code == 201, response.content[:1000]
    return response.json()["ids"]


# --- lineage -----------------------------------------------------------------------------------------
def test_the_lineage_of_one_thought_is_not_every_thought_built_on_it(dev, agent_factory, fake_embedder):
    """Attack: one import call stores refinements of a popular thought (``source_ids`` may name a stored
    thought, one already superseded too): 500 here, 1,000 a call, 10,000 in ten calls. ``GET
    /thoughts/{id}/lineage`` (MCP thought_lineage) then answers every one of them at depth 1, even with
    ``max_depth=1``: 1,001 nodes and ~315 KB for one import of 1,000, each row read with its content, on
    every agent's call, growing with every import.
    Instead: the chain holds at most a page of nodes and says ``truncated`` (the walk stops there)."""
    root = remember(dev, "The release train leaves every Tuesday at 14:00 UTC; freeze starts Monday.")
    _import(
        dev,
        [
            {
                "content": f"Refinement {i} of the release train note.",
                "thought_type": "refinement",
                "source_ids": [root],
            }
            for i in range(500)
        ],
    )
    reader = agent_factory("qa")
    response = reader.get(f"/api/v1/thoughts/{root}/lineage?max_depth=1")
    assert response.status_code == 200
    body = response.json()
    assert len(body["chain"]) <= PAGE + 1, (len(body["chain"]), len(response.content))
    assert body["truncated"] is True


def test_a_memory_call_does_not_walk_a_lattice_to_summarise_its_best_source(dev, agent_factory, fake_embedder):
    """Attack: an agent imports 1,000 thoughts of 10,000 characters, merges them 100 at a time into 10
    consolidations (10 memory calls) and those into one summary C (one more call), worded like a fact
    everyone asks about. Every memory call that returns C (a plain search of any agent) computes
    ``trace.lineage_summary`` by walking C's whole lineage and loading every row with its content:
    1,011 rows, ~10 MB read from PostgreSQL into the web worker, per call, growing with every import.
    Instead: the summary walks at most a page of nodes (and says ``truncated``)."""
    filler = "x" * 9_900
    originals = _import(dev, [{"content": f"Old deploy note {i}. {filler}"} for i in range(BATCH)])
    merged = [
        remember(
            dev, f"Old deploy note, merged part {k}: the old deploy notes of block {k}.", consolidates=originals[k::10]
        )
        for k in range(10)
    ]
    fact = "Deploys roll out canary first, then the rest after an hour, say the merged old deploy notes of each part."
    summary = remember(dev, fact, consolidates=merged)
    answer = memory_answer(agent_factory("qa"), prompt=fact, contribute=False)
    assert answer["result"]["sources"][0]["thought_id"] == summary
    lineage = answer["trace"]["lineage_summary"]
    assert lineage["thought_id"] == summary
    assert lineage["chain_length"] <= PAGE + 1, lineage


# --- one thought's links and corrections ------------------------------------------------------------
def test_a_thoughts_detail_does_not_list_every_thought_linked_to_it(dev, agent_factory, fake_embedder):
    """Attack: one import call stores 1,000 thoughts that each name a popular thought in
    ``related_thoughts`` (links are symmetric, and a memory call adds 100 more per call). ``GET
    /thoughts/{id}`` (MCP thought_get) lists every linked id: 1,000 ids per import, without end.
    Instead: the detail lists at most a page of related ids (the rest counted or paged)."""
    root = remember(dev, "The staging database is reset every night at 02:00 UTC from the seed dump.")
    _import(dev, [{"content": f"Linked note {i} about staging.", "related_thoughts": [root]} for i in range(BATCH)])
    response = agent_factory("qa").get(f"/api/v1/thoughts/{root}")
    assert response.status_code == 200
    related = response.json()["related_thoughts"]
    assert len(related) <= PAGE, (len(related), len(response.content))


def test_a_thoughts_detail_does_not_carry_every_correction_naming_it(dev, agent_factory, fake_embedder):
    """Attack: one import call stores 1,000 corrections that each name one popular thought in
    ``supersedes`` (a correction may supersede a thought already superseded), each with a
    ``corrected_fact`` and a ``correct_fact`` of ~5,000 characters. ``GET /thoughts/{id}`` (MCP
    thought_get) answers ``corrected_by`` with every one of them in full: 300 corrections make a 3 MB
    answer, 1,000 make 10 MB, for every agent that looks the thought up.
    Instead: ``corrected_by`` holds at most a page of corrections (the newest), the rest counted or paged."""
    root = remember(dev, "The staging database is reset every night at 02:00 UTC from the seed dump.")
    _import(
        dev,
        [
            {
                "content": f"Correction {i}: staging is reset at 03:00 UTC.",
                "thought_category": "correction",
                "topic": "staging",
                "corrected_fact": "staging is reset at 02:00 UTC " + "y" * 4_900,
                "correct_fact": f"staging is reset at 03:00 UTC ({i}) " + "z" * 4_900,
                "supersedes": [root],
            }
            for i in range(300)
        ],
    )
    response = agent_factory("qa").get(f"/api/v1/thoughts/{root}")
    assert response.status_code == 200
    corrected_by = response.json()["corrected_by"]
    assert len(corrected_by) <= 20 and len(response.content) < 1_000_000, (len(corrected_by), len(response.content))


# --- tasks -----------------------------------------------------------------------------------------
def test_the_in_flight_page_is_bounded_in_bytes_not_only_in_tasks(agent_factory, space):
    """Attack: a liaison creates tasks for the QA role, each with the largest DNA a task may hold
    (100,000 characters: a ``blocked_reason`` of 99,000), and blocks them. Every QA agent's recovery
    call ``GET /agents/qa/in-flight`` answers each task with its whole DNA: 40 tasks make a 4 MB answer
    at the default limit; 100 (the default page) 10 MB, and ``limit=500`` 50 MB, before the last
    markers' ``dna_diff`` (a restore's diff carries the removed 99,000-character reason; ``markers`` up
    to 20 per task) multiplies it. ``GET /api/v1/tasks`` answers the same.
    Instead: one page of the list stays within a fixed byte budget (a task's list entry shows its DNA
    keys or a cut DNA; the detail shows the rest), so a page can't be made megabytes by what others wrote."""
    liaison = agent_factory("liaison")
    assert liaison.post("/api/v1/projects", {"slug": "proj"}, format="json").status_code == 201
    for i in range(40):
        created = liaison.post(
            "/api/v1/tasks",
            {"project": "proj", "slug": f"t{i}", "title": "t", "role": "qa", "dna": {"blocked_reason": "b" * 99_000}},
            format="json",
        )
        assert created.status_code == 201, created.content[:300]
        blocked = liaison.post(f"/api/v1/tasks/t{i}/transition", {"to": "blocked", "summary": "s"}, format="json")
        assert blocked.status_code == 200, blocked.content[:300]
    qa = agent_factory("qa")
    response = qa.get("/api/v1/agents/qa/in-flight")
    assert response.status_code == 200
    assert response.json()["count"] == 40
    assert len(response.content) <= 1_000_000, len(response.content)
    # The rest is a cursor away: every task once, over pages each within the budget.
    seen, body = [], response.json()
    for _ in range(40):
        seen += [task["slug"] for task in body["tasks"]]
        if body["next_cursor"] is None:
            break
        page = qa.get("/api/v1/agents/qa/in-flight", {"cursor": body["next_cursor"]})
        assert page.status_code == 200 and len(page.content) <= 1_000_000
        body = page.json()
    assert sorted(seen) == sorted(f"t{i}" for i in range(40))


def _block_and_restore(liaison, slug: str, cycles: int) -> None:
    """``cycles`` times: a 99,000-character ``blocked_reason``, a block, a restore (which removes it)."""
    for _ in range(cycles):
        patched = liaison.patch(f"/api/v1/tasks/{slug}/dna", {"blocked_reason": "b" * 99_000}, format="json")
        assert patched.status_code == 200, patched.content[:300]
        for to in ("blocked", "restore"):
            moved = liaison.post(f"/api/v1/tasks/{slug}/transition", {"to": to, "summary": "s"}, format="json")
            assert moved.status_code == 200, moved.content[:300]


def test_the_markers_of_a_page_of_tasks_are_bounded_in_bytes_too(agent_factory, space, client, boss):
    """Attack: a liaison writes a 99,000-character ``blocked_reason`` into active QA tasks, blocks and
    restores each, ten times. Each restore's transition records the removed reason in its ``dna_diff``,
    and every QA agent's recovery call ``GET /agents/qa/in-flight?markers=20`` answers each task with
    its last 20 markers, whole: five tasks make a 5 MB answer, though their DNA now is empty (the page's
    DNA budget counts only the DNA). A task's detail carries 500,000 characters of its last ten.
    Instead: a marker shows a large ``dna_diff`` as the keys it changed (``dna_diff_truncated``), so a
    page of tasks and a task's detail stay within a budget whatever was written and removed before."""
    liaison = agent_factory("liaison")
    project = make_project(space, "proj")
    for i in range(5):
        make_task(project, slug=f"t{i}", status="active", role="qa")
        _block_and_restore(liaison, f"t{i}", 10)
    qa = agent_factory("qa")
    response = qa.get("/api/v1/agents/qa/in-flight", {"markers": 20})
    assert response.status_code == 200
    assert response.json()["count"] == 5
    assert len(response.content) <= 1_000_000, len(response.content)
    restores = [m for task in response.json()["tasks"] for m in task["last_markers"] if m["rule"].endswith("restore")]
    assert len(restores) == 50
    # What the agent needs to recover is still there: which keys the restore removed.
    assert all(m["dna_diff_truncated"] and "blocked_reason" in m["dna_diff"]["removed"] for m in restores)
    detail = qa.get("/api/v1/tasks/t0")
    assert detail.status_code == 200
    assert len(detail.content) <= 150_000, len(detail.content)
    # A small diff is shown whole.
    liaison.patch("/api/v1/tasks/t0/dna", {"blocked_reason": "waiting for the fixture"}, format="json")
    for to in ("blocked", "restore"):
        assert liaison.post("/api/v1/tasks/t0/transition", {"to": to}, format="json").status_code == 200
    newest = qa.get("/api/v1/tasks/t0").json()["transitions"][0]
    assert newest["rule"].endswith("restore") and not newest["dna_diff_truncated"]
    assert newest["dna_diff"]["removed"] == {"blocked_reason": "waiting for the fixture"}
    # A diff of many keys lists the first 20 of each part and counts the rest.
    many = {f"blocked_note_{i:02}": "n" * 100 for i in range(25)}
    liaison.patch("/api/v1/tasks/t1/dna", {**many, "blocked_reason": "r"}, format="json")
    for to in ("blocked", "restore"):
        assert liaison.post("/api/v1/tasks/t1/transition", {"to": to}, format="json").status_code == 200
    newest = qa.get("/api/v1/tasks/t1").json()["transitions"][0]
    assert newest["dna_diff_truncated"]
    assert newest["dna_diff"] == {
        "added": [],
        "removed": sorted([*many, "blocked_reason"])[:20],
        "changed": [],
        "keys_left_out": 6,
    }
    # The task's page lists the same keys of each move.
    page = client.get("/tasks/t1/").content.decode()
    assert "− blocked_note_19" in page and "− blocked_note_20" not in page and "and 6 more keys" in page


# --- the quality loop ------------------------------------------------------------------------------
def test_a_turns_feedback_does_not_scan_every_task_of_the_space(agent_factory, space, fake_embedder):
    """Attack: an agent creates tasks with 99,000 characters of DNA each (200 of them: 20 MB of text;
    ``POST /api/v1/tasks`` takes one a call, any role). Every turn any agent reports with explicit
    feedback (``used_ids``, as the Stop hook sends for ``colony:used``) checks whether a text names the
    ids by running a regular expression over the title, description and whole DNA of every task of the
    space, and over every transition marker (``quality.services.turns._copied_check`` ->
    ``tasks.selectors.tasks_naming``): 200 task rows and 20 MB scanned per turn here, linear in what was
    stored, on the request path of every agent's turns.
    Instead: the check reads a bounded number of rows (the texts naming an id found by an index or a
    table kept on write, not by scanning them all)."""
    qa = agent_factory("qa")
    fact = "The staging database is reset every night at 02:00 UTC from the seed dump."
    thought = remember(agent_factory("dev"), fact)
    answer = memory_answer(qa, prompt=fact, contribute=False, session_id="qa-session")
    assert thought in [source["thought_id"] for source in answer["result"]["sources"]]
    project = make_project(space, "proj")
    for i in range(200):  # what 200 POST /api/v1/tasks calls store, written directly (faster)
        make_task(project, slug=f"planted-{i}", dna={"notes": "b" * 99_000})
    before = _rows_read("tasks_task")
    response = qa.post(
        "/api/v1/turns",
        {
            "session_id": "qa-session",
            "turn_id": "1",
            "user_prompt": "p",
            "assistant_response": "r",
            "used_ids": [thought],
        },
        format="json",
    )
    assert response.status_code == 202, response.content
    assert _rows_read("tasks_task") - before <= 20, _rows_read("tasks_task") - before


# --- what holds ------------------------------------------------------------------------------------
def test_claimed_agent_ids_do_not_grow_a_thoughts_accessed_by(dev, space, fake_embedder):
    """Attack: one agent's memory calls each claim another ``agent_id`` (any string of up to 100
    characters, free on the wire), hoping each claim is appended to the returned thought's
    ``accessed_by`` (read on every search as the highway's agent count) without bound.
    Holds: accessed_by names the token's registered agent, once, whatever the body claims."""
    fact = "The staging database is reset every night at 02:00 UTC from the seed dump."
    thought = remember(dev, fact)
    for i in range(30):
        memory_answer(dev, prompt=fact, contribute=False, agent_id=f"claimed-agent-{i}", agent_name=f"Claimed {i}")
    accessed = Thought.objects.get(pk=thought)
    assert accessed.access_count >= 30
    assert accessed.accessed_by == [str(dev.agent.pk)]
