"""Attacks on the size of what one answer holds (SPEC 6: bounded work; bad input gets a 4xx with the
error envelope): one agent that creates tasks or projects without limit can't make another role's
recovery list, the project list, the board's project filter or a session-start hook answer all of
them at once, and a misspelt query parameter on any GET of the API is a 400, never ignored.

Each test names the attack and the rule that holds instead.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver

from core.models import Space
from tasks.models import Project, Task, TransitionLog
from tasks.services.transitions import task_transition
from tests.tasks_helpers import make_project, make_task, query_brain
from tests.web_support import ada  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

PLANTED = 520


def _plant_in_flight(dev, space, *, role: str = "qa", n: int = PLANTED) -> None:
    """What a dev may do through the API, once (create a task for another role, give it a
    blocked_reason, block it), then ``n`` more such tasks, with the dev's move, written directly (the
    same state, faster)."""
    assert dev.post("/api/v1/projects", {"slug": "proj"}, format="json").status_code == 201
    created = dev.post(
        "/api/v1/tasks", {"project": "proj", "slug": "planted", "title": "t", "role": role}, format="json"
    )
    assert created.status_code == 201, created.content
    assert dev.patch("/api/v1/tasks/planted/dna", {"blocked_reason": "x"}, format="json").status_code == 200
    moved = dev.post("/api/v1/tasks/planted/transition", {"to": "blocked"}, format="json")
    assert moved.status_code == 200, moved.content
    assert Task.objects.get(slug="planted").role == role
    project = make_project(space, "proj")
    planted = Task.objects.bulk_create(
        [
            Task(space=space, project=project, slug=f"planted-{i}", title="t", status="blocked", role=role, dna={})
            for i in range(n)
        ]
    )
    first = TransitionLog.objects.get(task__slug="planted")
    TransitionLog.objects.bulk_create(
        [
            TransitionLog(
                task=task,
                rule_key=first.rule_key,
                from_status="backlog",
                to_status="blocked",
                actor="dev",
                agent=dev.agent,
                role_before=role,
                role_after=role,
                marker_id=first.marker_id,
            )
            for task in planted
        ]
    )


def _claim(space, agent, slug: str) -> Task:
    """``agent`` claims a ready task of its role through the engine (its marker names it)."""
    task = make_task(
        make_project(space, "work"), slug=slug, status="ready", role=agent.role, dna={"pdsa_ref": "docs/p.md"}
    )
    task.dna["memory_query_session"] = query_brain(agent)
    task.save(update_fields=["dna"])
    task_transition(task=task, agent=agent, to="active", summary="claiming it")
    return task


def _refused(response, field: str) -> str:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and field in error["fields"], error
    return error["fields"][field][0]


# --- in-flight recovery ----------------------------------------------------------------------------


def test_a_dev_can_not_fill_another_roles_in_flight_list_without_bound(agent_factory, space, fake_embedder):
    """Attack: a dev creates tasks with ``role: "qa"``, sets ``blocked_reason`` and moves each to
    ``blocked`` (any->blocked is open to dev; only liaison restores or cancels). Each one lands in QA's
    recovery list: ``GET /api/v1/agents/qa/in-flight`` had no limit and no paging and answered all 521
    with their markers, burying the task QA itself had claimed among them.

    Rule (SPEC 6, bounded work): the list is a page (default 100, at most 500, like GET /tasks) with
    ``count`` and ``next_cursor``; the caller's own tasks (it moved them last) come first, then the
    role's active ones, then blocked, newest change first; the cursor walks every task exactly once."""
    dev = agent_factory("dev", name="dev-x")
    qa = agent_factory("qa", name="qa-x")
    _plant_in_flight(dev, space)
    _claim(space, qa.agent, "qa-own")

    listed = qa.get("/api/v1/agents/qa/in-flight", {"markers": 1}).json()
    assert len(listed["tasks"]) <= 500, f"{len(listed['tasks'])} tasks in one in-flight answer"
    assert len(listed["tasks"]) == 100 and listed["count"] == PLANTED + 2 and listed["next_cursor"]
    assert listed["tasks"][0]["slug"] == "qa-own", "the agent's own claimed task is not first"
    assert listed["tasks"][0]["last_markers"][0]["agent"] == "qa-x"

    seen, cursor = [], None
    while True:
        page = qa.get("/api/v1/agents/qa/in-flight", {"limit": 500, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.content
        body = page.json()
        assert len(body["tasks"]) <= 500
        seen += [task["slug"] for task in body["tasks"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == PLANTED + 2


def test_the_in_flight_list_refuses_a_limit_past_its_max_and_a_misspelt_parameter(agent_factory, space):
    """Attack: an agent asks the in-flight list for ``limit=100000`` (or ``lmit=3``, meaning a small
    page) to get everything at once anyway. Rule: past 500 is a 400 in the envelope naming ``limit``
    and its bound; an unknown parameter is a 400 naming the one meant; a cursor the list did not give
    is a 400 saying what to send."""
    qa = agent_factory("qa", name="qa-x")
    assert "500" in _refused(qa.get("/api/v1/agents/qa/in-flight", {"limit": 100_000}), "limit")
    assert "Did you mean 'limit'?" in _refused(qa.get("/api/v1/agents/qa/in-flight", {"lmit": 3}), "lmit")
    assert "next_cursor" in _refused(qa.get("/api/v1/agents/qa/in-flight", {"cursor": "bm90IGEgY3Vyc29y"}), "cursor")


class _ClientColony:
    """contrib/colony_hooks.py's Colony, answered in-process by the test client of one agent."""

    def __init__(self, client):
        self.client = client

    def call(self, method: str, path: str, *, query: dict | None = None, body: dict | None = None) -> dict:
        url = f"/api/v1/{path}" + (f"?{urlencode(query)}" if query else "")
        response = getattr(self.client, method.lower())(url, body, format="json")
        assert response.status_code < 400, response.content
        return response.json()


@pytest.fixture
def hooks():
    sys.path.insert(0, str(Path(settings.BASE_DIR) / "contrib"))
    try:
        import colony_hooks

        yield colony_hooks
    finally:
        sys.path.remove(str(Path(settings.BASE_DIR) / "contrib"))


def test_the_session_start_hook_injects_a_few_in_flight_tasks_and_says_how_to_list_the_rest(
    agent_factory, space, fake_embedder, hooks
):
    """Attack: the same 521 planted tasks; the session-start hook of every QA agent injected all of
    them, with their markers, under "recover these first" (tens of KB of another role's text in each
    new session's context). Rule: the hook injects at most HOOK_TASKS (10), the agent's own first, and
    says how many more there are and how to list them; PreCompact snapshots the agent's own tasks and
    names only a few of the others."""
    dev = agent_factory("dev", name="dev-x")
    qa = agent_factory("qa", name="qa-x")
    _plant_in_flight(dev, space)
    _claim(space, qa.agent, "qa-own")

    context = hooks.session_start(_ClientColony(qa), {"session_id": "s-1"})
    task_lines = [line for line in context.splitlines() if line.startswith("  - ") and "[" in line]
    assert len(task_lines) == hooks.HOOK_TASKS == 10, context
    assert task_lines[0].startswith('  - qa-own [active] "Task qa-own"'), context
    more = f"... and {PLANTED + 2 - 10} more in-flight tasks of role qa not shown"
    assert more in context and "GET /api/v1/agents/qa/in-flight" in context and "in_flight" in context, context
    assert len(context) < 4000, len(context)

    line = hooks.pre_compact(_ClientColony(qa), {"session_id": "s-1"})
    assert line.startswith("Colony: state snapshot stored for qa-own="), line
    assert len(line) < 1000 and "more" in line, line


def test_the_mcp_in_flight_tool_takes_the_same_limit_and_cursor():
    """Attack: an agent on MCP calls in_flight and gets every planted task (the tool had no limit).
    Rule: the tool takes the REST call's limit (1-500) and cursor."""
    from colony_mcp.server import mcp

    tools = {tool.name: tool for tool in asyncio.run(mcp.list_tools())}
    properties = tools["in_flight"].input_schema["properties"]
    limit = properties["limit"]["anyOf"][0]
    assert (limit["minimum"], limit["maximum"]) == (1, 500), properties["limit"]
    assert "cursor" in properties


# --- projects ---------------------------------------------------------------------------------------


def test_the_project_list_is_bounded(agent_factory):
    """Attack: an agent creates projects without limit (any role may, in manual mode);
    ``GET /api/v1/projects`` answered every one in one response and took no ``limit`` (an unknown
    query parameter was even ignored, not a 400 as docs/api.md says).
    Rule: a bounded page (default 100, at most 500, like GET /tasks) with ``count`` and
    ``next_cursor``, slug order; ``lmit`` is a 400 naming ``limit``."""
    dev = agent_factory("dev", name="dev-p")
    space = Space.objects.get(pk=dev.agent.space_id)
    Project.objects.bulk_create([Project(space=space, slug=f"p{i:03d}", name=f"p{i}") for i in range(PLANTED)])
    listed = dev.get("/api/v1/projects")
    assert listed.status_code in (200, 400)
    if listed.status_code == 200:
        assert len(listed.json()["results"]) <= 500, f"{len(listed.json()['results'])} projects in one answer"
    body = listed.json()
    assert body["count"] == PLANTED and len(body["results"]) == 100 and body["next_cursor"]
    assert [p["slug"] for p in body["results"][:2]] == ["p000", "p001"]
    rest = dev.get("/api/v1/projects", {"limit": 500, "cursor": body["next_cursor"]}).json()
    assert [p["slug"] for p in rest["results"]] == [f"p{i:03d}" for i in range(100, PLANTED)]
    assert rest["next_cursor"] is None
    assert "500" in _refused(dev.get("/api/v1/projects", {"limit": 501}), "limit")
    assert "Did you mean 'limit'?" in _refused(dev.get("/api/v1/projects", {"lmit": 1}), "lmit")


def test_the_boards_project_filter_is_bounded(client, ada, space):  # noqa: F811 - the fixture
    """Attack: the same 520 projects; the board's project filter drew one option per project on every
    board load and every periodic refresh. Rule: it offers at most BOARD_PROJECTS (the projects with
    the latest task changes), says how many it leaves out and how to filter by one of those, and a
    project left out still filters when named in the URL."""
    from web.views.board import BOARD_PROJECTS

    Project.objects.bulk_create([Project(space=space, slug=f"p{i:03d}", name=f"p{i}") for i in range(PLANTED)])
    busy = Project.objects.get(space=space, slug="p007")
    make_task(busy, slug="busy-task", status="active", role="dev")
    body = client.get("/board/").content.decode()
    options = re.findall(r'<option value="p\d+"', body)
    assert 0 < len(options) <= BOARD_PROJECTS == 50, len(options)
    assert '<option value="p007"' in body, "the project with the latest task change is not offered"
    assert f"{PLANTED - BOARD_PROJECTS} more projects" in body and "?project=" in body

    quiet = Project.objects.get(space=space, slug="p499")
    make_task(quiet, slug="quiet-task", status="active", role="dev")
    Task.objects.filter(slug="quiet-task").update(updated_at="2000-01-01T00:00:00Z")
    Project.objects.bulk_create([Project(space=space, slug=f"q{i:03d}", name=f"q{i}") for i in range(60)])
    for i in range(60):
        make_task(Project.objects.get(space=space, slug=f"q{i:03d}"), status="active", role="dev")
    assert '<option value="p499"' not in client.get("/board/").content.decode(), "p499 should be left out"
    filtered = client.get("/board/?project=p499").content.decode()
    assert "Filter ignored" not in filtered and "quiet-task" in filtered and "busy-task" not in filtered
    assert '<option value="p499" selected>' in filtered


# --- unknown query parameters ----------------------------------------------------------------------


def _api_get_routes(patterns=None, prefix: str = ""):
    """(route, view class) of every pattern under /api/v1/ whose view answers GET."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _api_get_routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
            view = getattr(pattern.callback, "view_class", None)
            if view is not None and hasattr(view, "get"):
                yield route, view


def test_an_unknown_query_parameter_is_refused_on_every_get(dev, space, thought_factory):
    """Attack (or a slip): ``?lmit=1`` on GET /projects, /workflow, /agents/me, /thoughts/{id} (and
    other GETs without query parameters) was silently ignored: the caller believed its filter or bound
    applied. Rule (docs/api.md, Errors): on every GET under /api/v1/, a query parameter the operation
    does not define is a 400 VALIDATION_ERROR in the envelope naming it."""
    project = make_project(space, "proj")
    make_task(project, slug="t1", status="active", role="dev")
    thought = thought_factory("The deploy pipeline runs migrations before the web restarts.")
    values = {"id_or_slug": "t1", "thought_id": str(thought.id), "role": "dev"}
    routes = list(_api_get_routes())
    assert len(routes) >= 12, routes
    ignored = []
    for route, view in routes:
        names = re.findall(r"<(?:\w+:)?(\w+)>", route)
        assert set(names) <= set(values), f"a new path parameter in {route}: give this test a value for it"
        path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m.group(1)], route)
        response = dev.get(path, {"lmit": "1"})
        error = response.json().get("error") if response.status_code == 400 else None
        if not (error and error["code"] == "VALIDATION_ERROR" and "lmit" in error.get("fields", {})):
            ignored.append(f"{path} ({view.__name__}): {response.status_code}")
    assert not ignored, "unknown query parameter not refused:\n" + "\n".join(ignored)


@pytest.mark.parametrize("url", ["/api/v1/thoughts", "/api/v1/tasks"])
def test_an_offset_is_bounded_and_the_refusal_says_to_page_by_cursor(dev, url):
    """Attack: ``?offset=999999999`` on a list: PostgreSQL reads every row before an offset, so each such
    call reads the whole list (a million thoughts: the whole index, on every call). Instead: an offset
    past OFFSET_MAX is a 400 that says to page with ``cursor`` (which starts right after a row, whatever
    the list's length); one within it answers."""
    response = dev.get(url, {"offset": 10_001})
    assert response.status_code == 400, response.content
    assert "cursor" in response.json()["error"]["message"]
    assert dev.get(url, {"offset": 10_000}).status_code == 200
