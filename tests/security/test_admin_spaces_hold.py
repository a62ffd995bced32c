"""The admin keeps spaces apart for a staff user as the web UI does (SPEC 6: "Spaces isolate tenants";
docs/operations.md): a staff user who is not a superuser sees and edits only the rows of the spaces it
is a member of, and a form's choices (an agent, a thought, a space) are of those spaces only. A
superuser sees every space.

The attacker is a colleague given a staff account and model permissions to look after one team's space
(``other_space`` is another team's): without the rule, any staff user with a view permission reads
every space's thoughts, query logs, tasks and tokens, and a form takes another space's rows.
"""

from __future__ import annotations

import pytest

from brain.models import QueryLog, Thought
from quality.models import TurnLog
from tasks.models import Task
from tests.security import support
from tests.security.test_admin_limited_staff_holds import staff_with
from tests.tasks_helpers import make_agent, make_project, make_task
from tests.web_support import admin_form_data

pytestmark = pytest.mark.django_db

boss = support.boss

OURS = "Our team deploys on Tuesdays after the standup."
THEIRS = "The other team's payroll export runs on the 25th with the bank's SFTP key."


@pytest.fixture
def two_teams(space, other_space, thought_factory):
    """A thought, an agent, a task, a query log and a turn in each space."""
    rows = {}
    for name, team, text in (("ours", space, OURS), ("theirs", other_space, THEIRS)):
        agent = make_agent(team, "dev", name=f"{name}-dev")
        thought = Thought.objects.create(space=team, content=text, contributor_id=agent.name, agent=agent)
        task = make_task(make_project(team, f"{name}-proj"), slug=f"{name}-task")
        log = QueryLog.objects.create(
            space=team, agent=agent, agent_ref=agent.name, session_id=f"{name}-s", query_text=text
        )
        turn = TurnLog.objects.create(space=team, agent=agent, session_id=f"{name}-s", turn_id="1", user_prompt=text)
        rows[name] = {"agent": agent, "thought": thought, "task": task, "log": log, "turn": turn}
    return rows


ALL_VIEWS = ("view_thought", "change_thought", "view_agent", "view_task", "change_task", "view_querylog",
             "view_turnlog", "view_space", "view_project", "add_project")  # fmt: skip


@pytest.mark.parametrize(
    "url",
    [
        "/admin/brain/thought/",
        "/admin/brain/querylog/",
        "/admin/quality/turnlog/",
        "/admin/tasks/task/",
        "/admin/core/agent/",
        "/admin/core/space/",
    ],  # fmt: skip
)
def test_a_staff_users_lists_hold_only_its_spaces_rows(client, space, two_teams, url):
    """Attack: a staff user who may view thoughts opens the thought list (and the query logs, the turns,
    the tasks, the agents, the spaces). Instead: only its own space's rows are listed."""
    staff_with(client, *ALL_VIEWS, member_of=space)
    page = client.get(url).content.decode()
    assert client.get(url).status_code == 200
    assert "theirs" not in page and "payroll" not in page and "Other space" not in page, url


@pytest.mark.parametrize("kind", ["thought", "task", "log", "turn"])
def test_a_staff_user_cant_open_another_spaces_row_by_its_address(client, space, two_teams, kind):
    """Attack: the staff user types the change page's address of the other team's row. Instead: the admin
    answers as for a row that does not exist (a redirect to the admin's index), showing nothing of it."""
    staff_with(client, *ALL_VIEWS, member_of=space)
    row = two_teams["theirs"][kind]
    url = f"/admin/{row._meta.app_label}/{row._meta.model_name}/{row.pk}/change/"
    response = client.get(url)
    assert response.status_code == 302, (url, response.status_code)
    assert "payroll" not in response.content.decode()
    ours = two_teams["ours"][kind]
    assert client.get(f"/admin/{ours._meta.app_label}/{ours._meta.model_name}/{ours.pk}/change/").status_code == 200


def test_a_staff_users_forms_offer_and_take_only_its_spaces_rows(client, space, other_space, two_teams):
    """Attack: the staff user adds a project and picks the other team's space (its id, posted by hand), and
    edits its own thought to name the other team's agent as its author. Instead: the forms list only its
    own spaces' rows and refuse another's."""
    staff_with(client, *ALL_VIEWS, member_of=space)
    form = client.get("/admin/tasks/project/add/").content.decode()
    assert f'value="{space.pk}"' in form and f'value="{other_space.pk}"' not in form
    client.post("/admin/tasks/project/add/", {"space": other_space.pk, "slug": "planted", "name": "planted",
                                              "approval_mode": "manual"})  # fmt: skip
    assert not other_space.projects.filter(slug="planted").exists()
    thought = two_teams["ours"]["thought"]
    url = f"/admin/brain/thought/{thought.pk}/change/"
    data = admin_form_data(client.get(url))
    data["agent"] = str(two_teams["theirs"]["agent"].pk)
    response = client.post(url, data)
    assert response.status_code == 200  # the form again, with its error
    thought.refresh_from_db()
    assert thought.agent_id == two_teams["ours"]["agent"].pk


def test_a_superuser_sees_every_space(client, boss, two_teams):
    """Holds: a superuser administers the whole installation."""
    assert "payroll" in client.get("/admin/brain/thought/").content.decode()
    assert Task.objects.count() == 2
