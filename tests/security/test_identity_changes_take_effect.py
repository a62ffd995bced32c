"""Identity and permission changes take effect at once (SPEC 6: the token fixes the agent's identity; a
request can't act as another agent; revoked means revoked): a deactivated agent, a revoked token, a
renamed agent, a human who lost a space, a changed password; checked at every door that answers for
them (REST, MCP over HTTP, URL tokens, the web pages, the quality loop's floor)."""

from __future__ import annotations

import threading

import httpx
import pytest
from django.db import connection
from django.db.models.signals import post_save
from django.test import Client

from brain.models import Thought
from core import services
from core.models import Agent
from quality import formulas
from tasks.models import HumanConfirmation, Task, dna_digest
from tests.quality_support import make_query_log, make_thought, new_session
from tests.security.test_feedback_burial import scored_turn
from tests.tasks_helpers import make_project, make_task
from tests.web_support import PASSWORD, admin_form_data, make_human

FACT = "Staging deploys run the database migrations before the web workers restart."


# --- a renamed agent is still one agent -------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.usefixtures("enqueued")
@pytest.mark.parametrize(
    "field,turns", [("contradicted_ids", 6), ("used_ids", 8)], ids=["contradiction-floor", "use-ceiling"]
)
def test_a_renamed_agent_still_counts_as_one_agent_for_the_floor_and_the_ceiling(dev, space, field, turns):
    """Attack: an agent (steered by a prompt injection) reports another agent's thought contradicted
    (or used) turn after turn; its effective confidence is held at SINGLE_AGENT_FLOOR (CEILING) because
    one agent's reports alone can't move it further (SPEC 6). An operator then renames the agent in
    the admin (a clearer name; same agent, same token, same id), and its very next report counts as a
    second distinct agent: the thought drops below the floor (rises above the ceiling) on one agent's
    word. quality.services.scoring.thought_outcomes_apply counts "distinct agents" by
    ConfidenceChange.agent_name / TurnLog.agent_name, names copied at the time of each turn.
    Instead: distinct agents are distinct identities (the agent's id): a rename changes nothing."""
    target = make_thought(space, FACT)
    session = new_session()
    for n in range(turns):
        make_query_log(space, session, [target], agent=dev.agent)  # shown again each turn: one step each
        scored_turn(dev, session, f"t{n}", **{field: [str(target.id)]})
    target.refresh_from_db()
    held = formulas.SINGLE_AGENT_FLOOR if field == "contradicted_ids" else formulas.SINGLE_AGENT_CEILING
    assert target.effective_confidence == held  # one agent: held

    dev.agent.name = "dev-1-renamed"  # what an operator's save in the agent admin does
    dev.agent.save()
    assert dev.get("/api/v1/agents/me").json()["name"] == "dev-1-renamed"  # same token, same agent
    make_query_log(space, session, [target], agent=dev.agent)
    scored_turn(dev, session, "after-rename", **{field: [str(target.id)]})

    target.refresh_from_db()
    assert target.effective_confidence == held, (
        f"one agent, renamed once, moved the thought past the one-agent bound: {target.effective_confidence}"
    )


# --- a deactivation saved in the admin, while one of the agent's calls runs --------------------------
@pytest.mark.django_db(transaction=True)
def test_an_agent_deactivated_in_the_admin_is_refused_at_once_in_that_process(space, agent_factory, settings):
    """Attack: an operator deactivates a misbehaving agent in the admin; the agent keeps calling. One of
    its calls lands while the admin's save is still in its transaction: the Agent post_save signal has
    already cleared this process's kept tokens (core.apps -> TokenRows.clear), the call reads the row
    as last committed (active), and keeps it. The deactivation commits, and the agent goes on working
    in this very process for TOKEN_CACHE_SECONDS more (docs/api.md and docs/configuration.md: "at once
    in the process that revokes it"; only the *other* processes get the grace).
    Instead: once the admin's save is committed, the next call in this process is a 401."""
    settings.TOKEN_CACHE_SECONDS = 10  # the default
    dev = agent_factory("dev")
    root = make_human("root", spaces=(space,), superuser=True)
    staff = Client()
    staff.force_login(root)
    url = f"/admin/core/agent/{dev.agent.pk}/change/"
    data = admin_form_data(staff.get(url))
    data.pop("active")  # the box unticked
    for key in [k for k in data if k.endswith(("-TOTAL_FORMS", "-INITIAL_FORMS"))]:
        data[key] = 0  # leave the token inline alone
    services.token_rows.clear()

    saved, go = threading.Event(), threading.Event()
    main = threading.current_thread()

    def hold_the_admins_transaction(sender, instance, **_):
        # Connected after core.apps' TokenRows.clear: runs right after it, still inside the admin's atomic.
        if threading.current_thread() is not main and instance.pk == dev.agent.pk and not instance.active:
            saved.set()
            go.wait(10)

    post_save.connect(hold_the_admins_transaction, sender=Agent, weak=False, dispatch_uid="test-hold-admin")
    result: dict = {}

    def admin_save():
        try:
            result["status"] = staff.post(url, data).status_code
        finally:
            connection.close()

    worker = threading.Thread(target=admin_save)
    try:
        worker.start()
        assert saved.wait(10), "the admin never saved the agent"
        during = dev.get("/api/v1/agents/me").status_code  # a call while the admin's save is in flight
        go.set()
        worker.join(10)
    finally:
        go.set()
        post_save.disconnect(sender=Agent, dispatch_uid="test-hold-admin")
    assert result.get("status") == 302, result
    assert Agent.objects.get(pk=dev.agent.pk).active is False
    assert during == 200  # not committed yet: fine
    after = dev.get("/api/v1/agents/me")
    assert after.status_code == 401, (
        f"deactivated and committed in this process, still answered {after.status_code} as {after.json()}"
    )


# --- a URL token outlives the human who made it ----------------------------------------------------------
def _remove_from_space(space, human):
    space.members.remove(human)


def _deactivate(space, human):
    human.is_active = False
    human.save(update_fields=["is_active"])


@pytest.mark.django_db
@pytest.mark.parametrize("revoke", [_remove_from_space, _deactivate], ids=["removed-from-space", "deactivated"])
def test_a_url_token_stops_reading_the_space_once_its_maker_may_not(client, space, dev, thought_factory, revoke):
    """Attack: a member makes a read-only URL token on /tokens/ (up to 365 days) and keeps the link.
    They are removed from the space (or deactivated): the web pages now refuse them, but the link they
    made still reads the whole brain of the space (GET /api/v1/memory?token=...), for months, until
    someone notices it on /tokens/ (its row names them only as a string, ``UrlToken.created_by``).
    Instead: a URL token a human made answers only while that human may still read the space
    (core.services.url_token_lookup / core.auth._authenticate_url_token), 401 after."""
    thought_factory(FACT)
    human = make_human("mallory", spaces=(space,))
    client.force_login(human)
    made = client.post("/tokens/", {"agent": dev.agent.name, "days": 365, "label": "my chat"})
    assert made.status_code == 200
    link = made.context["new_url"]
    raw = link.split("token=", 1)[1]
    reader = Client()
    assert reader.get("/api/v1/memory", {"prompt": "staging migrations", "token": raw}).status_code == 200

    revoke(space, human)
    assert client.get("/brain/").status_code in (302, 403)  # the pages refuse the human at once

    response = reader.get("/api/v1/memory", {"prompt": "staging migrations", "token": raw})
    assert response.status_code == 401, (
        f"the link of a human who may no longer read the space answered {response.status_code}: "
        f"{response.content[:200]!r}"
    )


# --- what holds: every door re-reads who is asking ---------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("change", ["removed-from-space", "superuser-flag-removed", "deactivated"])
def test_a_human_who_lost_the_space_does_nothing_in_it_through_an_open_session(client, space, dev, change):
    """Attack: a human with a logged-in session loses the right to act in the space (removed from its
    members, superuser flag removed while not a member, or deactivated) and keeps using the open tab:
    a board move, a confirmation of a gate, a new URL token, the space switch back.
    Holds: every page reads the membership again (web.spaces.space_for_request, human_may_act); nothing
    is moved, confirmed or created."""
    superuser = change == "superuser-flag-removed"
    human = make_human("eve", spaces=() if superuser else (space,), superuser=superuser)
    client.force_login(human)
    task = make_task(make_project(space), slug="ship-it", status="approval", role="liaison")
    digest = dna_digest(task.dna)
    assert client.get("/board/").status_code == 200

    if change == "removed-from-space":
        space.members.remove(human)
    elif change == "superuser-flag-removed":
        human.is_superuser = human.is_staff = False
        human.save()
    else:
        human.is_active = False
        human.save()

    client.post("/space/", {"space": space.slug})
    client.post("/tasks/ship-it/confirm/", {"to_status": "approved", "dna_digest": digest})
    client.post("/tasks/ship-it/transition/", {"to": "approved", "dna_digest": digest})
    client.post("/tokens/", {"agent": dev.agent.name, "days": 30})
    assert client.get("/board/").status_code in (302, 403)
    assert not HumanConfirmation.objects.exists()
    assert Task.objects.get(pk=task.pk).status == "approval"
    assert not dev.agent.url_tokens.exists()


@pytest.mark.django_db
def test_a_password_change_ends_the_humans_other_sessions(space):
    """Attack: a human's password leaked and someone logged in with it; the human changes the password
    (the admin's "change password" page) and the other browser keeps its session.
    Holds: Django's session hash (AuthenticationMiddleware) logs the other session out; the one that
    changed the password stays in."""
    human = make_human("ada", spaces=(space,))
    human.is_staff = True
    human.save()
    mine, theirs = Client(), Client()
    for browser in (mine, theirs):
        assert browser.post("/login/", {"username": "ada", "password": PASSWORD}).status_code == 302
        assert browser.get("/board/").status_code == 200
    new = "another horse battery staple 42"
    changed = mine.post(
        "/admin/password_change/", {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    )
    assert changed.status_code == 302, changed.content[:300]
    assert mine.get("/board/").status_code == 200
    assert theirs.get("/board/").status_code == 302


@pytest.mark.django_db(transaction=True)
def test_a_deactivated_agent_is_refused_at_every_door_at_once(asgi_server, agent_factory, fake_embedder):
    """Attack: an agent connected over MCP (initialized, one tool call answered) is deactivated in the
    admin; it keeps its MCP client open and also tries REST and its read-only URL token.
    Holds: /mcp is stateless and looks the token up on every POST (colony_mcp.asgi._lookup_agent checks
    ``active``), REST does too (core.auth), url_token_lookup checks the agent: all 401, nothing stored."""
    dev = agent_factory("dev")
    _, raw_url_token = services.url_token_create(agent=dev.agent, days=7)
    headers = {"Authorization": f"Bearer {dev.token}", "Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    task_list = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "task_list", "arguments": {}}}
    with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=30) as mcp:
        assert mcp.post("/mcp", json=initialize).status_code == 200
        assert mcp.post("/mcp", json=task_list).status_code == 200
        dev.agent.active = False
        dev.agent.save()  # the admin's save
        contribute = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memory_contribute", "arguments": {"content": FACT}},
        }
        assert mcp.post("/mcp", json=task_list).status_code == 401
        assert mcp.post("/mcp", json=contribute).status_code == 401
    assert dev.post("/api/v1/memory", {"prompt": FACT}, format="json").status_code == 401
    assert Client().get("/api/v1/memory", {"prompt": "x", "token": raw_url_token}).status_code == 401
    assert not Thought.objects.filter(agent=dev.agent).exists()
