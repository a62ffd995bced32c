"""The task API (SPEC 5): projects, tasks, DNA, transitions, the workflow table, in-flight recovery."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from api.errors import NotFound
from brain.models import Thought
from tasks import workflow
from tasks.models import Task, TransitionLog
from tasks.services import markers
from tasks.services.confirmations import task_confirm_human
from tasks.services.transitions import task_transition
from tests.tasks_helpers import contribute, make_member, make_project, make_task, query_brain

pytestmark = pytest.mark.django_db


def error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["error"]["code"] == code, body
    return body["error"]


@pytest.fixture
def project(space):
    return make_project(space, "colony")


# --- projects ------------------------------------------------------------------------------------


def test_projects_create_and_list(agent_factory, space, other_space):
    liaison = agent_factory("liaison")
    make_project(other_space, "hidden")
    created = liaison.post("/api/v1/projects", {"slug": "web", "name": "Web site"}, format="json")
    assert created.status_code == 201
    assert created.json()["approval_mode"] == "manual"
    error(liaison.post("/api/v1/projects", {"slug": "web"}, format="json"), 409, "PROJECT_EXISTS")
    error(liaison.post("/api/v1/projects", {"slug": "Not A Slug"}, format="json"), 400, "VALIDATION_ERROR")
    # How much humans gate work is not an agent's decision.
    error(
        liaison.post("/api/v1/projects", {"slug": "x", "approval_mode": "autonomous"}, format="json"), 403, "HUMAN_ONLY"
    )
    assert [p["slug"] for p in liaison.get("/api/v1/projects").json()["results"]] == ["web"]


# --- create, list, get ---------------------------------------------------------------------------


def test_create_task(agent_factory, project):
    pdsa = agent_factory("pdsa")
    body = {"project": "colony", "slug": "login-form", "title": "Login form", "dna": {"priority": "high"}}
    response = pdsa.post("/api/v1/tasks", body, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["slug"], data["status"], data["type"], data["project"], data["dna"]) == (
        "login-form",
        "backlog",
        "task",
        "colony",
        {"priority": "high"},
    )
    task = Task.objects.get(slug="login-form")
    assert task.created_by == pdsa.agent
    error(pdsa.post("/api/v1/tasks", body, format="json"), 409, "TASK_EXISTS")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"project": "colony", "slug": "a", "title": "A", "type": "bug"}, "MISSING_PARENT"),
        ({"project": "colony", "slug": "a", "title": "A", "dna": {"human_confirmed": True}}, "PROTECTED_DNA_KEY"),
        ({"project": "colony", "slug": "a", "title": "A", "status": "active"}, "VALIDATION_ERROR"),
        ({"project": "colony", "slug": "a", "title": "A", "dna": {"test_total_count": "many"}}, "INVALID_DNA"),
        ({"project": "colony", "slug": "a", "title": "A", "dna": ["not", "an", "object"]}, "VALIDATION_ERROR"),
        ({"project": "colony", "title": "A"}, "VALIDATION_ERROR"),
    ],
)
def test_create_task_refusals(agent_factory, project, body, code):
    error(agent_factory("pdsa").post("/api/v1/tasks", body, format="json"), 400, code)
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"project": "nope", "slug": "a", "title": "A"}, "PROJECT_NOT_FOUND"),
        ({"project": "colony", "slug": "a", "title": "A", "depends_on": ["ghost"]}, "UNKNOWN_TASK_REFERENCE"),
        (
            {"project": "colony", "slug": "a", "title": "A", "type": "bug", "parent_ids": ["ghost"]},
            "UNKNOWN_TASK_REFERENCE",
        ),
    ],
)
def test_create_task_naming_what_does_not_exist_is_404(agent_factory, project, body, code):
    """Like an unknown id in a path (and the memory endpoint's THOUGHT_NOT_FOUND for ids in a body)."""
    error(agent_factory("pdsa").post("/api/v1/tasks", body, format="json"), 404, code)
    assert not Task.objects.exists()


def test_unauthenticated_requests_are_refused(anon, project):
    make_task(project, slug="t")
    for response in (
        anon.get("/api/v1/tasks"),
        anon.get("/api/v1/tasks/t"),
        anon.get("/api/v1/workflow"),
        anon.post("/api/v1/tasks/t/transition", {"to": "pending"}, format="json"),
    ):
        error(response, 401, "UNAUTHENTICATED")


def test_list_filters(agent_factory, space, project):
    other_project = make_project(space, "other")
    make_task(project, slug="a", status="active", role="dev")
    make_task(project, slug="b", status="ready", role="dev")
    make_task(other_project, slug="c", status="active", role="qa", type="bug")
    client = agent_factory("dev")

    def slugs(query=""):
        body = client.get(f"/api/v1/tasks{query}").json()
        assert body["count"] == len(body["results"])
        return sorted(t["slug"] for t in body["results"])

    assert slugs() == ["a", "b", "c"]
    assert slugs("?status=active") == ["a", "c"]
    assert slugs("?role=dev") == ["a", "b"]
    assert slugs("?project=other") == ["c"]
    assert slugs("?type=bug") == ["c"]
    assert slugs("?status=active&role=dev") == ["a"]
    error(client.get("/api/v1/tasks?status=finished"), 400, "VALIDATION_ERROR")
    assert len(client.get("/api/v1/tasks?limit=2").json()["results"]) == 2


def _task_pages(client, query: dict, between=None) -> list[list[str]]:
    """Every page's slugs, following next_cursor; ``between()`` runs after the first page."""
    pages, cursor = [], None
    while True:
        page = client.get("/api/v1/tasks", {**query, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.content
        pages.append([t["slug"] for t in page.json()["results"]])
        cursor = page.json()["next_cursor"]
        if len(pages) == 1 and between is not None:
            between()
        if cursor is None:
            return pages


def test_a_task_that_leaves_the_filter_between_pages_hides_no_other_with_the_cursor(agent_factory, project):
    """status=backlog, offset paging: a task of the first page that moved on meanwhile left the filter, every
    row moved up by one, and the second page (offset=2) skipped a backlog task nobody had seen."""
    tasks = [make_task(project, slug=f"t{n}", status="backlog") for n in range(4)]  # newest change: t3
    client = agent_factory("liaison")

    def move_the_first_on():
        task_transition(task=tasks[3], to="pending", summary="scheduled", as_system=True)

    pages = _task_pages(client, {"status": "backlog", "limit": 2}, between=move_the_first_on)
    assert pages == [["t3", "t2"], ["t1", "t0"]]
    by_offset = client.get("/api/v1/tasks", {"status": "backlog", "limit": 2, "offset": 2}).json()["results"]
    assert [t["slug"] for t in by_offset] == ["t0"]  # what offset paging does: t1 skipped


def test_a_task_created_between_pages_is_not_listed_twice_with_the_cursor(agent_factory, project):
    for n in range(3):
        make_task(project, slug=f"t{n}")
    client = agent_factory("dev")
    pages = _task_pages(client, {"limit": 2}, between=lambda: make_task(project, slug="late"))
    assert pages == [["t2", "t1"], ["t0"]]
    assert _task_pages(client, {"limit": 2}) == [["late", "t2"], ["t1", "t0"]]
    cursor = client.get("/api/v1/tasks", {"limit": 2}).json()["next_cursor"]
    error(client.get("/api/v1/tasks", {"cursor": cursor, "offset": 2}), 400, "VALIDATION_ERROR")
    error(client.get("/api/v1/tasks", {"cursor": cursor[:-3]}), 400, "VALIDATION_ERROR")
    two_values = json.dumps([timezone.now().isoformat(), str(uuid.uuid4())])  # the thought list's kind of cursor
    thoughts_cursor = base64.urlsafe_b64encode(two_values.encode()).decode()
    error(client.get("/api/v1/tasks", {"cursor": thoughts_cursor}), 400, "VALIDATION_ERROR")


def test_task_list_takes_a_fixed_number_of_queries(agent_factory, project):
    client = agent_factory("dev")
    make_task(project, slug="dep")

    def queries_for_list():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/api/v1/tasks").status_code == 200
        return len(ctx.captured_queries)

    queries_for_list()  # warm-up: the first request also records the token's last use
    few = queries_for_list()
    assert few <= 6
    for n in range(15):
        task = make_task(project, slug=f"t{n}")
        task.parents.add(Task.objects.get(slug="dep"))
        task.depends_on.add(Task.objects.get(slug="dep"))
    assert queries_for_list() == few


def test_get_by_id_or_slug_with_transitions(agent_factory, project):
    task = make_task(project, slug="t1")
    task_transition(task=task, to="pending", summary="go", as_system=True)
    client = agent_factory("dev")
    by_slug = client.get("/api/v1/tasks/t1").json()
    by_id = client.get(f"/api/v1/tasks/{task.id}").json()
    assert by_slug == by_id
    assert by_slug["status"] == "pending"
    [transition] = by_slug["transitions"]
    assert (transition["from_status"], transition["to_status"], transition["actor"]) == ("backlog", "pending", "system")
    assert transition["marker"] == "TASK backlog→pending: SYSTEM t1 (colony) — go"


def test_spaces_are_isolated(agent_factory, other_space, project):
    outsider = agent_factory("liaison", in_space=other_space)
    task = make_task(project, slug="secret", status="backlog", dna={"abstract_ref": "a"})
    for response in (
        outsider.get("/api/v1/tasks/secret"),
        outsider.get(f"/api/v1/tasks/{task.id}"),
        outsider.get("/api/v1/tasks/secret/transitions"),
        outsider.patch("/api/v1/tasks/secret/dna", {"x": 1}, format="json"),
        outsider.post("/api/v1/tasks/secret/transition", {"to": "pending"}, format="json"),
    ):
        error(response, 404, "TASK_NOT_FOUND")
    assert outsider.get("/api/v1/tasks").json()["results"] == []
    error(
        outsider.post("/api/v1/tasks", {"project": "colony", "slug": "x", "title": "X"}, format="json"),
        404,
        "PROJECT_NOT_FOUND",
    )
    task.refresh_from_db()
    assert (task.status, task.dna) == ("backlog", {"abstract_ref": "a"})


# --- DNA -----------------------------------------------------------------------------------------


def test_update_dna_merges_shallowly_and_null_removes(agent_factory, project):
    make_task(project, slug="t", dna={"a": {"x": 1}, "b": 2, "c": 3})
    client = agent_factory("dev")
    response = client.patch("/api/v1/tasks/t/dna", {"a": {"y": 2}, "c": None, "d": [1]}, format="json")
    assert response.status_code == 200
    assert response.json()["dna"] == {"a": {"y": 2}, "b": 2, "d": [1]}
    assert Task.objects.get(slug="t").dna == {"a": {"y": 2}, "b": 2, "d": [1]}


def test_update_dna_refusals(agent_factory, project):
    make_task(project, slug="done", status="complete", dna={"a": 1})
    make_task(project, slug="open", dna={"a": 1})
    client = agent_factory("liaison")
    error(client.patch("/api/v1/tasks/done/dna", {"b": 2}, format="json"), 409, "TASK_CLOSED")
    error(client.patch("/api/v1/tasks/open/dna", {"human_confirmed": True}, format="json"), 400, "PROTECTED_DNA_KEY")
    error(
        client.patch("/api/v1/tasks/open/dna", {"human_confirmed_by": "thomas"}, format="json"),
        400,
        "PROTECTED_DNA_KEY",
    )
    error(client.patch("/api/v1/tasks/open/dna", [1, 2], format="json"), 400, "VALIDATION_ERROR")
    error(client.patch("/api/v1/tasks/open/dna", {}, format="json"), 400, "VALIDATION_ERROR")
    error(client.patch("/api/v1/tasks/open/dna", "x", content_type="application/json"), 400, "PARSE_ERROR")
    assert Task.objects.get(slug="done").dna == {"a": 1}
    assert Task.objects.get(slug="open").dna == {"a": 1}


def test_dna_wrapped_in_dna_is_refused_not_stored_as_one_field(agent_factory, project):
    """Task create bodies carry DNA under "dna", so agents sent PATCH .../dna the same way:
    {"dna": {"memory_query_session": ...}} was stored as one DNA field named dna, the gate still said
    memory_query_session was missing, and the agent had set it. Refused now, where DNA is patched or created;
    a null dna removes one stored before."""
    make_task(project, slug="open", status="ready", role="dev", dna={"a": 1, "dna": {"x": 1}})
    client = agent_factory("dev")
    wrapped = {"dna": {"memory_query_session": "s1"}}
    response = client.patch("/api/v1/tasks/open/dna", wrapped, format="json")
    error(response, 400, "INVALID_DNA")
    assert "not wrapped in" in response.json()["error"]["message"]
    error(
        client.post(
            "/api/v1/tasks", {"project": project.slug, "slug": "n", "title": "T", "dna": wrapped}, format="json"
        ),
        400,
        "INVALID_DNA",
    )
    assert Task.objects.get(slug="open").dna == {"a": 1, "dna": {"x": 1}} and not Task.objects.filter(slug="n").exists()
    assert client.patch("/api/v1/tasks/open/dna", {"dna": None}, format="json").status_code == 200
    assert Task.objects.get(slug="open").dna == {"a": 1}


# --- transitions ---------------------------------------------------------------------------------


def test_transition_through_the_api_uses_the_tokens_role(agent_factory, project):
    task = make_task(project, slug="t", status="ready", role="dev", dna={"pdsa_ref": "docs/d.md"})
    dev = agent_factory("dev")
    session = query_brain(dev.agent)
    assert dev.patch("/api/v1/tasks/t/dna", {"memory_query_session": session}, format="json").status_code == 200
    # An "actor" in the body is refused (an unknown field), nothing changes: identity comes from the token.
    error(
        dev.post("/api/v1/tasks/t/transition", {"to": "active", "actor": "system"}, format="json"),
        400,
        "VALIDATION_ERROR",
    )
    assert Task.objects.get(slug="t").status == "ready"
    response = dev.post("/api/v1/tasks/t/transition", {"to": "active", "summary": "claiming"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["task"]["status"], body["task"]["role"]) == ("active", "dev")
    assert body["transition"]["actor"] == "dev" and body["transition"]["agent"] == dev.agent.name
    assert body["transition"]["marker"] == "TASK ready→active: DEV t (colony) — claiming"
    assert Thought.objects.get(pk=body["transition"]["marker_id"]).agent == dev.agent
    task.refresh_from_db()
    assert task.status == "active"


def test_refused_transition_explains_every_reason(agent_factory, project):
    make_task(project, slug="t", status="ready", role="dev")
    qa = agent_factory("qa")
    err = error(qa.post("/api/v1/tasks/t/transition", {"to": "active"}, format="json"), 403, "ACTOR_NOT_ALLOWED")
    codes = [r["code"] for r in err["reasons"]]
    assert codes[0] == "ACTOR_NOT_ALLOWED" and "MISSING_DNA" in codes
    assert "memory_query_session" in err["message"] and "pdsa_ref" in err["message"]
    error(qa.post("/api/v1/tasks/t/transition", {"to": "finished"}, format="json"), 400, "UNKNOWN_STATUS")
    error(qa.post("/api/v1/tasks/t/transition", {}, format="json"), 400, "VALIDATION_ERROR")
    assert not TransitionLog.objects.exists()


def test_a_move_retried_after_its_answer_was_lost_says_it_took_effect(agent_factory, project):
    """Before: "No rule lets a task go from 'active' to 'active'", and the agent could not tell whether
    its own claim had worked."""
    make_task(project, slug="t", status="ready", role="dev", dna={"pdsa_ref": "docs/d.md"})
    dev, other = agent_factory("dev"), agent_factory("dev")
    session = query_brain(dev.agent)
    assert dev.patch("/api/v1/tasks/t/dna", {"memory_query_session": session}, format="json").status_code == 200
    assert dev.post("/api/v1/tasks/t/transition", {"to": "active"}, format="json").status_code == 200
    moved_at = Task.objects.get(slug="t").status_changed_at
    again = error(dev.post("/api/v1/tasks/t/transition", {"to": "active"}, format="json"), 409, "ALREADY_IN_STATUS")
    assert again["message"].startswith("The task is already 'active': you moved it there at ")
    assert "your move did take effect" in again["message"]
    assert moved_at.isoformat(timespec="seconds") in again["message"]
    theirs = error(other.post("/api/v1/tasks/t/transition", {"to": "active"}, format="json"), 409, "ALREADY_IN_STATUS")
    assert f"{dev.agent.name} moved it there at" in theirs["message"]
    assert TransitionLog.objects.filter(task__slug="t").count() == 1  # nothing changed
    make_task(project, slug="fresh", status="backlog")
    created = error(
        dev.post("/api/v1/tasks/fresh/transition", {"to": "backlog"}, format="json"), 409, "ALREADY_IN_STATUS"
    )
    assert "it was created so" in created["message"]


@pytest.mark.parametrize(
    ("status", "role", "dna", "agent_role", "to", "code"),
    [
        ("backlog", "", {}, "dev", "ready", "TRANSITION_NOT_ALLOWED"),  # the fuzzer's case: no rule from backlog
        ("ready", "dev", {"pdsa_ref": "docs/t.md"}, "dev", "active", "MISSING_DNA"),
        (
            "ready",
            "dev",
            {"pdsa_ref": "docs/t.md", "memory_query_session": "never"},
            "dev",
            "active",
            "MEMORY_NOT_VERIFIED",
        ),
        ("active", "dev", {}, "dev", "restore", "TRANSITION_NOT_ALLOWED"),
    ],
)
def test_a_transition_the_tasks_state_refuses_is_a_409_not_a_400(
    agent_factory, project, status, role, dna, agent_role, to, code
):
    """A well-formed request the task's current state refuses is a conflict with that state (409, as the
    schema documents), not a malformed request: schemathesis' positive mode sends such requests."""
    task = make_task(project, slug="t", status=status, role=role, dna=dna)
    err = error(agent_factory(agent_role).post("/api/v1/tasks/t/transition", {"to": to}, format="json"), 409, code)
    assert err["reasons"][0]["code"] == code
    task.refresh_from_db()
    assert (task.status, task.role) == (status, role)
    assert not TransitionLog.objects.exists()


def test_marker_failure_is_a_503_and_changes_nothing(agent_factory, project, monkeypatch):
    task = make_task(project, slug="t", status="backlog", dna={"a": 1})

    def brain_down(**kwargs):
        raise ConnectionError("brain unavailable")

    monkeypatch.setattr(markers, "thought_create", brain_down)
    err = error(
        agent_factory("liaison").post("/api/v1/tasks/t/transition", {"to": "pending"}, format="json"),
        503,
        "MARKER_FAILED",
    )
    assert "did not happen" in err["message"]
    task.refresh_from_db()
    assert (task.status, task.dna) == ("backlog", {"a": 1})
    assert not TransitionLog.objects.exists() and not Thought.objects.exists()


def test_allowed_transitions_for_the_caller(agent_factory, space, project):
    make_task(project, slug="t", status="approval", role="liaison", dna={"abstract_ref": "a"})
    liaison = agent_factory("liaison")
    body = liaison.get("/api/v1/tasks/t/transitions").json()
    assert (body["status"], body["actor"]) == ("approval", "liaison")
    by_target = {o["to"]: o for o in body["transitions"]}
    assert set(by_target) == {"approved", "complete", "rework", "blocked", "cancelled"}
    assert body["allowed"] == ["cancelled"]
    assert by_target["approved"]["reasons"][0]["code"] == "HUMAN_CONFIRMATION_REQUIRED"
    assert by_target["blocked"]["reasons"][0]["code"] == "MISSING_DNA"
    assert by_target["cancelled"]["allowed"] is True and by_target["cancelled"]["rule"] == "any->cancelled:liaison"
    task_confirm_human(task=Task.objects.get(slug="t"), to_status="approved", user=make_member(space, "thomas"))
    body = liaison.get("/api/v1/tasks/t/transitions").json()
    approved = next(o for o in body["transitions"] if o["to"] == "approved")
    assert approved["allowed"] is True and approved["human_confirmed_by"] == "thomas"
    # Another role sees the same task differently.
    dev_view = agent_factory("dev").get("/api/v1/tasks/t/transitions").json()
    assert dev_view["allowed"] == []


def test_workflow_endpoint_serves_the_table(agent_factory):
    body = agent_factory("dev").get("/api/v1/workflow").json()
    assert body["lookup_order"] == ["{from}->{to}:{role}", "{from}->{to}", "any->{to}:{actor}", "any->{to}"]
    assert set(body["types"]) == {"task", "bug"}
    assert set(body["types"]["task"]) == set(workflow.TASK_RULES)
    assert set(body["types"]["bug"]) == set(workflow.BUG_RULES)
    assert body["types"]["task"]["active->approval"] == {
        "actors": ["pdsa"],
        "require_role": "pdsa",
        "new_role": "liaison",
        "requires_dna": ["pdsa_ref", "memory_contribution_id"],
        "clears_dna": [],
        "human_confirmation": False,
        "requires_dependencies_complete": False,
        "requires_parents": False,
        "requires_passing_tests": False,
        "note": "",
    }
    assert body["approval_modes"]["autonomous"] == "all"
    assert body["approval_modes"]["manual"] == []


# --- in-flight recovery --------------------------------------------------------------------------


def test_in_flight_lists_active_and_blocked_tasks_of_a_role_with_their_last_markers(
    agent_factory, space, other_space, project
):
    dev = agent_factory("dev")
    working = make_task(project, slug="working", status="ready", role="dev", dna={"pdsa_ref": "d"})
    working.dna["memory_query_session"] = query_brain(dev.agent)
    working.save()
    task_transition(task=working, to="active", summary="claim", agent=dev.agent)
    stuck = make_task(project, slug="stuck", status="active", role="dev", dna={"blocked_reason": "no key"})
    task_transition(task=stuck, to="blocked", summary="waiting for the key", agent=dev.agent)
    make_task(project, slug="queued", status="ready", role="dev")
    make_task(project, slug="qa-work", status="active", role="qa")
    make_task(make_project(other_space, "colony"), slug="elsewhere", status="active", role="dev")
    contribute(dev.agent)

    body = dev.get("/api/v1/agents/dev/in-flight").json()
    by_slug = {t["slug"]: t for t in body["tasks"]}
    assert set(by_slug) == {"working", "stuck"}
    assert [m["marker"] for m in by_slug["working"]["last_markers"]] == [
        "TASK ready→active: DEV working (colony) — claim"
    ]
    assert by_slug["stuck"]["blocked_from_status"] == "active"
    assert by_slug["stuck"]["last_markers"][0]["summary"] == "waiting for the key"
    assert [t["slug"] for t in dev.get("/api/v1/agents/qa/in-flight").json()["tasks"]] == ["qa-work"]
    error(dev.get("/api/v1/agents/boss/in-flight"), 400, "VALIDATION_ERROR")
    # agents/me is still the identity endpoint.
    assert dev.get("/api/v1/agents/me").json()["role"] == "dev"


def test_in_flight_returns_at_most_n_markers_per_task_newest_first(agent_factory, project):
    task = make_task(project, slug="t", status="active", role="dev", dna={"blocked_reason": "x"})
    for n in range(3):
        task_transition(task=task, to="blocked", summary=f"block {n}", as_system=True)
        task.dna["blocked_reason"] = "x"
        Task.objects.filter(pk=task.pk).update(dna=task.dna)
        task_transition(task=task, to="restore", summary=f"restore {n}", as_system=True)
        task.refresh_from_db()
        task.dna["blocked_reason"] = "x"
        Task.objects.filter(pk=task.pk).update(dna=task.dna)
    body = agent_factory("dev").get("/api/v1/agents/dev/in-flight?markers=2").json()
    [only] = body["tasks"]
    assert [m["summary"] for m in only["last_markers"]] == ["restore 2", "block 2"]


# --- whole lifecycles ----------------------------------------------------------------------------


def test_a_task_goes_from_backlog_to_complete_through_the_api(agent_factory, space, project):
    pdsa, dev, qa, liaison = (agent_factory(role) for role in ("pdsa", "dev", "qa", "liaison"))
    thomas = make_member(space, "thomas")
    assert (
        pdsa.post(
            "/api/v1/tasks", {"project": "colony", "slug": "search", "title": "Search"}, format="json"
        ).status_code
        == 201
    )

    def step(client, to, dna=None, status=200):
        if dna:
            assert client.patch("/api/v1/tasks/search/dna", dna, format="json").status_code == 200
        response = client.post("/api/v1/tasks/search/transition", {"to": to, "summary": f"to {to}"}, format="json")
        assert response.status_code == status, response.content
        return response.json()

    step(liaison, "pending")
    step(liaison, "ready")
    step(pdsa, "active", {"memory_query_session": query_brain(pdsa.agent)})
    step(pdsa, "approval", {"pdsa_ref": "docs/search.md", "memory_contribution_id": contribute(pdsa.agent)})
    step(liaison, "approved", status=403)
    task_confirm_human(task=Task.objects.get(slug="search"), to_status="approved", user=thomas)
    step(liaison, "approved")
    step(liaison, "testing")
    step(qa, "ready")
    step(dev, "active", {"memory_query_session": query_brain(dev.agent)})
    step(dev, "review", {"memory_contribution_id": contribute(dev.agent)})
    step(qa, "review")
    step(pdsa, "review")
    step(
        liaison,
        "complete",
        {"abstract_ref": "docs/abstract.md", "test_pass_count": 12, "test_total_count": 12},
        status=403,
    )
    task_confirm_human(task=Task.objects.get(slug="search"), to_status="complete", user=thomas)
    final = step(liaison, "complete")
    assert (final["task"]["status"], final["task"]["role"]) == ("complete", "liaison")
    history = list(TransitionLog.objects.filter(task__slug="search").order_by("created_at", "id"))
    assert [(log.from_status, log.to_status) for log in history] == [
        ("backlog", "pending"),
        ("pending", "ready"),
        ("ready", "active"),
        ("active", "approval"),
        ("approval", "approved"),
        ("approved", "testing"),
        ("testing", "ready"),
        ("ready", "active"),
        ("active", "review"),
        ("review", "review"),
        ("review", "review"),
        ("review", "complete"),
    ]
    assert [log.role_after for log in history] == [
        "",
        "pdsa",
        "pdsa",
        "liaison",
        "qa",
        "qa",
        "dev",
        "dev",
        "qa",
        "pdsa",
        "liaison",
        "liaison",
    ]
    assert Thought.objects.filter(thought_category="transition_marker", source_ref__value="search").count() == 12


def test_a_bug_goes_to_dev_and_completes_without_a_human(agent_factory, space, project):
    dev, qa, liaison = (agent_factory(role) for role in ("dev", "qa", "liaison"))
    make_task(project, slug="search", status="complete")
    body = {"project": "colony", "slug": "search-crash", "title": "Crash", "type": "bug", "parent_ids": ["search"]}
    assert qa.post("/api/v1/tasks", body, format="json").json()["parent_ids"] == ["search"]

    def step(client, to, dna=None):
        if dna:
            assert client.patch("/api/v1/tasks/search-crash/dna", dna, format="json").status_code == 200
        response = client.post("/api/v1/tasks/search-crash/transition", {"to": to}, format="json")
        assert response.status_code == 200, response.content
        return response.json()["task"]

    step(liaison, "pending")
    assert step(liaison, "ready")["role"] == "dev"
    step(dev, "active", {"memory_query_session": query_brain(dev.agent)})
    assert step(dev, "review", {"memory_contribution_id": contribute(dev.agent)})["role"] == "qa"
    assert step(qa, "review")["role"] == "liaison"
    done = step(liaison, "complete", {"abstract_ref": "a", "test_pass_count": 1, "test_total_count": 1})
    assert done["status"] == "complete"


def test_in_flight_takes_a_fixed_number_of_queries(agent_factory, project):
    client = agent_factory("dev")

    def add_task(n):
        task = make_task(project, slug=f"t{n}", status="active", role="dev", dna={"blocked_reason": "r"})
        task_transition(task=task, to="blocked", as_system=True)

    def queries():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/api/v1/agents/dev/in-flight").status_code == 200
        return len(ctx.captured_queries)

    add_task(0)
    queries()  # warm-up: the first request also records the token's last use
    few = queries()
    for n in range(1, 10):
        add_task(n)
    assert queries() == few
    assert len(client.get("/api/v1/agents/dev/in-flight").json()["tasks"]) == 10


def test_task_get_reads_the_task_its_project_and_links_in_one_statement(space, other_space, project):
    """tasks.selectors.task_get: one prepared statement instead of a queryset with two prefetches;
    the task, its project and its links are what the ORM gives, and reading them runs no query."""
    from django.db.models import Prefetch

    from tasks.outputs import task_output
    from tasks.selectors import task_get

    parent, first, second = (make_task(project, slug=slug) for slug in ("parent", "dep-1", "dep-2"))
    task = make_task(project, slug="t1", dna={"a": [1, {"b": None}]})
    task.parents.add(parent)
    task.depends_on.add(first, second)
    Task.objects.filter(pk=second.pk).update(status="active")
    links = Task.objects.only("id", "slug", "status")
    orm = (
        Task.objects.filter(pk=task.pk)
        .select_related("project")
        .prefetch_related(Prefetch("parents", queryset=links), Prefetch("depends_on", queryset=links))
        .get()
    )
    for ref in ("t1", str(task.id)):
        with CaptureQueriesContext(connection) as ctx:
            got = task_get(space=space, id_or_slug=ref)
            output = task_output(got)
            assert [t.slug for t in got.depends_on.all()] == [t.slug for t in orm.depends_on.all()]
            assert got.project.approval_mode == orm.project.approval_mode
        assert len(ctx.captured_queries) == 1
        assert output == task_output(orm)
        assert output["depends_on"] == [{"slug": "dep-1", "status": "backlog"}, {"slug": "dep-2", "status": "active"}]
        assert output["parent_ids"] == ["parent"] and output["dna"] == {"a": [1, {"b": None}]}
        assert {f.attname: getattr(got, f.attname) for f in Task._meta.concrete_fields} == {
            f.attname: getattr(orm, f.attname) for f in Task._meta.concrete_fields
        }
    assert got.depends_on.filter(status="active").get().slug == "dep-2"  # the related queryset still filters
    with pytest.raises(NotFound):
        task_get(space=other_space, id_or_slug="t1")


def test_an_unknown_target_says_which_status_was_meant_and_moves_nothing(dev, space):
    """Agents used to other trackers send "done", "in_progress", "Active" or "canceled": the 400 listed
    every status and left the agent to guess. It still refuses (the schema's enum is the contract; a
    workflow's statuses mean what its rules say), and names the likely one."""
    from tests.tasks_helpers import make_project, make_task

    task = make_task(make_project(space, slug="colony"), slug="t9", status="ready", role="dev")
    for sent, meant in [
        ("Active", "active"),
        ("in_progress", "active"),
        ("done", "complete"),
        ("canceled", "cancelled"),
        ("in review", "review"),
        ("someday", None),
        ("reveiw", "review"),
        ("RESTORE", "restore"),
    ]:
        response = dev.post("/api/v1/tasks/t9/transition", {"to": sent}, format="json")
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["code"] == "UNKNOWN_STATUS"
        assert error["message"].startswith(f"Unknown target {sent!r}.")
        if meant:
            assert f"Did you mean {meant!r}?" in error["message"], error
        else:
            assert "Did you mean" not in error["message"], error
        assert "Use one of backlog, pending, ready, active" in error["message"]
    task.refresh_from_db()
    assert task.status == "ready" and not task.transitions.exists()


def test_an_unknown_role_names_the_role_meant(dev):
    response = dev.get("/api/v1/agents/developer/in-flight")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(
        "Unknown role 'developer'. Did you mean 'dev'? Use one of pdsa, dev, qa, liaison"
    )
    plain = dev.get("/api/v1/agents/janitor/in-flight").json()["error"]["message"]
    assert plain.startswith("Unknown role 'janitor'. Use one of ")


def test_a_task_or_project_not_found_says_what_was_meant_or_where_to_look(dev, project):
    make_task(project, slug="fix-ci", status="ready", role="dev")
    for ref in ("Fix-CI", "fix ci"):
        missing = error(dev.get(f"/api/v1/tasks/{ref}"), 404, "TASK_NOT_FOUND")
        assert missing["message"] == f"No task {ref!r} in this space. Did you mean 'fix-ci'?"
    assert error(dev.get("/api/v1/tasks/nope"), 404, "TASK_NOT_FOUND")["message"].endswith(
        "GET /api/v1/tasks lists the tasks of this space."
    )
    body = {"project": "nope", "slug": "t2", "title": "T"}
    assert (
        "POST /api/v1/projects"
        in error(dev.post("/api/v1/tasks", body, format="json"), 404, "PROJECT_NOT_FOUND")["message"]
    )
    body = {"project": project.slug, "slug": "t3", "title": "T", "role": "developer"}
    refused = dev.post("/api/v1/tasks", body, format="json").json()["error"]
    assert "Did you mean 'dev'?" in refused["fields"]["role"][0]
    assert Task.objects.count() == 1
