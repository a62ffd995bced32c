"""The task graph (parents, dependencies) and what a page of tasks shows, against agents and humans who
bend them: attack tests. Each test is an attack and the rule that holds instead (SPEC 3, SPEC 6).

Links are set when a task is created (``POST /api/v1/tasks``, ``manage.py task create``: both name only
tasks that exist already, so neither can close a cycle); after that only the admin edits them. Nothing
walks the graph transitively (the dependency gate reads a task's own links), so a deep chain costs
nothing; a wide one, and the text agents attach to tasks, reach every page that lists tasks.
"""

from __future__ import annotations

import pytest

from tasks.models import Task
from tests.security import support
from tests.tasks_helpers import make_project, make_task
from tests.web_support import ada, admin_form_data  # noqa: F401 - ada is a fixture (pytest finds it by name)

pytestmark = pytest.mark.django_db

boss = support.boss  # a fixture: a superuser, member of the space, logged in on ``client``

#: What the existing bound of a page of tasks promises (tests/security/test_work_bounded_per_request.py).
PAGE_BYTES_MAX = 1_000_000
#: A board or home page with a few dozen cards: far above what their legitimate cards need.
WEB_PAGE_BYTES_MAX = 250_000


# --- 1. a blocked reason fills the board and the home page ---------------------------------------------
def test_the_board_and_the_home_page_show_a_blocked_reason_cut_not_whole(client, ada, space, agent_factory):  # noqa: F811
    """Attack: a dev agent (any role may block any task) creates 25 tasks, gives each a 99,000-character
    ``blocked_reason`` (DNA holds up to 100,000) and blocks them. The board draws every card of the
    blocked column with its whole reason (``web/_board_columns.html``), and the home page's in-flight
    list loads each task's whole DNA to draw the same: the board is 2.5 MB, re-fetched by htmx every 5
    seconds for every human watching, the home page 1.5 MB, and neither is readable.

    Instead: a card (and a home page line) shows the start of the reason, cut to a few hundred characters
    (the task page shows the rest), so what an agent writes can't make the pages humans watch megabytes."""
    dev = agent_factory("dev")
    make_project(space, "proj")
    for i in range(25):
        body = {"project": "proj", "slug": f"t{i}", "title": "t", "role": "qa", "dna": {"blocked_reason": "b" * 99_000}}
        assert dev.post("/api/v1/tasks", body, format="json").status_code == 201
        assert dev.post(f"/api/v1/tasks/t{i}/transition", {"to": "blocked"}, format="json").status_code == 200

    board = client.get("/board/")
    columns = client.get("/board/", headers={"HX-Request": "true"})  # the 5-second refresh
    home = client.get("/")
    assert (board.status_code, columns.status_code, home.status_code) == (200, 200, 200)
    sizes = {"board": len(board.content), "board refresh": len(columns.content), "home": len(home.content)}
    assert all(size <= WEB_PAGE_BYTES_MAX for size in sizes.values()), sizes
    # The humans still see that, and why, each task is stuck.
    assert board.content.decode().count('class="blocked"') == 25
    assert "Blocked: bbbb" in board.content.decode() and "Blocked: bbbb" in home.content.decode()


# --- 2. a page of tasks is bounded in DNA only ----------------------------------------------------------
def _long_targets(space, count: int) -> list[str]:
    """``count`` tasks with 150-character slugs (the longest a slug may be), to link to."""
    project = make_project(space, "proj")
    Task.objects.bulk_create(
        [Task(space=space, project=project, slug=f"{'x' * 145}-{i:04}", title="x") for i in range(count)]
    )
    return [f"{'x' * 145}-{i:04}" for i in range(count)]


@pytest.mark.parametrize("filler", ["links", "description"])
def test_a_page_of_tasks_is_bounded_whatever_their_links_and_descriptions(space, agent_factory, filler):
    """Attack: a dev agent creates 60 tasks for the QA role and blocks each, every one carrying the most
    ``POST /api/v1/tasks`` takes of one kind: 100 ``parent_ids`` and 100 ``depends_on`` naming tasks with
    150-character slugs (about 34,000 characters of links a task), or a 20,000-character description.
    The page budget of ``GET /api/v1/tasks`` and ``GET /agents/qa/in-flight`` (``PAGE_BUDGET``)
    counts only DNA, so every QA agent's recovery call answers 2 MB (links) or 1.3 MB (descriptions) for
    these 60; 500 such tasks make ``limit=500`` pages of 17 MB and 10 MB, and both kinds together 27 MB:
    the promise "a page can't be made megabytes by what others wrote" holds for DNA alone.

    Instead: a page of tasks stays within the byte budget whatever its tasks carry (the budget counts the
    description and the links too, or a list entry shows a bounded part of them and the detail the rest);
    the rest is a cursor away."""
    dev = agent_factory("dev")
    extra = {"description": "d" * 20_000}
    if filler == "links":
        targets = _long_targets(space, 200)
        extra = {"parent_ids": targets[:100], "depends_on": targets[100:]}
    else:
        make_project(space, "proj")
    for i in range(60):
        body = {"project": "proj", "slug": f"w{i}", "title": "w", "role": "qa", "dna": {"blocked_reason": "r"}}
        created = dev.post("/api/v1/tasks", {**body, **extra}, format="json")
        assert created.status_code == 201, created.content[:300]
        assert dev.post(f"/api/v1/tasks/w{i}/transition", {"to": "blocked"}, format="json").status_code == 200

    qa = agent_factory("qa")
    recovery = qa.get("/api/v1/agents/qa/in-flight")
    listing = qa.get("/api/v1/tasks", {"role": "qa", "limit": 500})
    assert (recovery.status_code, listing.status_code) == (200, 200)
    assert recovery.json()["count"] == listing.json()["count"] == 60
    sizes = {"in-flight": len(recovery.content), "tasks": len(listing.content)}
    assert all(size <= PAGE_BYTES_MAX for size in sizes.values()), sizes


# --- 3. the admin closes a cycle ------------------------------------------------------------------------
def _admin_links(client, task: Task, name: str, linked: list[Task]):
    """Save ``task``'s admin change form as loaded, with ``name`` (parents or depends_on) set to ``linked``."""
    url = f"/admin/tasks/task/{task.pk}/change/"
    data = admin_form_data(client.get(url))
    data[name] = [str(t.pk) for t in linked]
    return client.post(url, data)


@pytest.mark.parametrize(
    ("name", "cycle"),
    [("depends_on", 1), ("depends_on", 2), ("depends_on", 3), ("parents", 1)],
    ids=["depends-on-itself", "two-task-cycle", "three-task-cycle", "its-own-parent"],
)
def test_the_admin_refuses_a_link_that_closes_a_cycle(client, boss, space, agent_factory, name, cycle):
    """Attack: a human in the admin (or a script posting its form) adds ``a`` to its own dependencies, or
    makes ``a`` depend on ``b`` where ``b`` (created through the API) already depends on ``a``, directly
    or through ``c``. The form saves it (302): ``a`` can never leave pending (pending->ready needs every
    dependency complete, and ``a`` waits for itself: "Depends on tasks that are not complete: a
    (pending)"), nor can any task of the cycle, and no agent can untangle it (links are not editable
    through the API). A bug that is its own parent passes the bugs' ``parent_ids`` gate.

    Instead: the admin refuses a link that makes a task its own parent or dependency, directly or through
    others (a form error, 200), and nothing is linked; the liaison can still move ``a`` to ready once its
    real dependencies are done."""
    liaison = agent_factory("liaison")
    project = make_project(space, "proj")
    a = make_task(project, slug="a", status="pending")
    chain = [a]
    for slug in ("b", "c")[: cycle - 1]:
        body = {"project": "proj", "slug": slug, "title": slug, "depends_on": [chain[-1].slug]}
        if name == "parents":
            body = {"project": "proj", "slug": slug, "title": slug, "parent_ids": [chain[-1].slug]}
        assert liaison.post("/api/v1/tasks", body, format="json").status_code == 201
        chain.append(Task.objects.get(slug=slug))

    response = _admin_links(client, a, name, [chain[-1]])

    assert response.status_code == 200, response.status_code  # the form again, with its error
    assert not getattr(a, name).exists(), list(getattr(a, name).values_list("slug", flat=True))
    if name == "depends_on":
        moved = liaison.post("/api/v1/tasks/a/transition", {"to": "ready"}, format="json")
        assert moved.status_code == 200, moved.content[:300]


def test_holds_a_dependency_of_another_space_is_refused_at_every_door(client, boss, space, other_space, agent_factory):
    """Holds: a task can't depend on (or be a bug of) another space's task. The API answers 404
    ``UNKNOWN_TASK_REFERENCE`` in the envelope for the other space's task named by id or by slug, and the
    admin's form refuses it (a superuser sees both spaces' tasks): SPEC 6, no transition crosses a space,
    and the dependency gate reads the linked tasks' status."""
    dev = agent_factory("dev")
    make_project(space, "proj")
    foreign = make_task(make_project(other_space, "proj"), slug="theirs", status="complete")
    for ref in (str(foreign.id), foreign.slug):
        for body in (
            {"project": "proj", "slug": "mine", "title": "m", "depends_on": [ref]},
            {"project": "proj", "slug": "mine", "title": "m", "type": "bug", "parent_ids": [ref]},
        ):
            refused = dev.post("/api/v1/tasks", body, format="json")
            assert refused.status_code == 404, refused.content[:300]
            assert refused.json()["error"]["code"] == "UNKNOWN_TASK_REFERENCE"
    assert not Task.objects.filter(slug="mine").exists()

    a = make_task(make_project(space, "proj"), slug="a", status="pending")
    response = _admin_links(client, a, "depends_on", [foreign])
    assert response.status_code == 200 and not a.depends_on.exists()
