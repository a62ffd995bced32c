"""In a real browser: the board, moving a card with a button (no reload), and a human confirmation."""

from __future__ import annotations

import pytest

from tasks.models import HumanConfirmation, Task, TransitionLog
from tests.tasks_helpers import make_project, make_task
from web.views.board import BOARD_REFRESH_SECONDS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_move_a_card_on_the_board_without_a_reload(logged_in_page, human, space, shot):
    page = logged_in_page
    project = make_project(space, "colony")
    make_task(project, slug="design-parser", status="approval", role="liaison")
    make_task(project, slug="write-parser", status="active", role="dev")

    page.goto("/board/")
    card = page.locator('.column[data-status="approval"] .task-card[data-slug="design-parser"]')
    assert card.is_visible()
    assert page.locator('.column[data-status="active"] .task-card[data-slug="write-parser"]').is_visible()
    shot(page, "board")

    page.evaluate("window.__noReload = true")
    card.locator("summary", has_text="Move").click()
    button = card.locator("button", has_text="Move to approved")
    button.wait_for()
    assert card.locator('li[data-to="complete"] button[disabled]').is_visible()  # refused, with its reason
    shot(page, "board-moves")
    button.click()

    moved = page.locator('.column[data-status="approved"] .task-card[data-slug="design-parser"]')
    moved.wait_for()
    assert page.locator(".message.success", has_text="design-parser moved approval → approved").is_visible()
    assert page.evaluate("window.__noReload") is True  # the board changed in place
    assert page.locator('.column[data-status="approval"] .task-card').count() == 0
    shot(page, "board-after-move")

    task = Task.objects.get(slug="design-parser")
    assert task.status == "approved"
    assert TransitionLog.objects.get(task=task).user == human


def test_board_refreshes_itself_when_an_agent_moves_a_task(logged_in_page, space):
    page = logged_in_page
    project = make_project(space, "colony")
    make_task(project, slug="quiet", status="ready", role="dev")
    page.goto("/board/")
    page.locator('.column[data-status="ready"] .task-card[data-slug="quiet"]').wait_for()
    page.evaluate("window.__noReload = true")
    Task.objects.filter(slug="quiet").update(status="active")  # as if an agent moved it meanwhile
    page.locator('.column[data-status="active"] .task-card[data-slug="quiet"]').wait_for(timeout=12_000)
    assert page.evaluate("window.__noReload") is True


def test_the_refresh_waits_while_a_humans_moves_are_open(logged_in_page, space):
    """A human reading a card's moves keeps them: the periodic refresh (which would fold them away)
    waits until the moves are closed, then catches up."""
    page = logged_in_page
    project = make_project(space, "colony")
    make_task(project, slug="reading", status="ready", role="dev")
    make_task(project, slug="quiet", status="ready", role="dev")
    page.goto("/board/")
    reading = page.locator('.column[data-status="ready"] .task-card[data-slug="reading"]')
    reading.locator("summary", has_text="Move").click()
    reading.locator(".moves-body form, .moves-body .refusal").first.wait_for()
    Task.objects.filter(slug="quiet").update(status="active")  # as if an agent moved it meanwhile
    page.wait_for_timeout(BOARD_REFRESH_SECONDS * 1000 + 1500)
    assert reading.locator("details.moves").get_attribute("open") is not None
    assert page.locator('.column[data-status="ready"] .task-card[data-slug="quiet"]').is_visible()
    reading.locator("summary", has_text="Move").click()  # closed: the next refresh shows the move
    page.locator('.column[data-status="active"] .task-card[data-slug="quiet"]').wait_for(timeout=12_000)


def test_give_a_human_confirmation_on_the_task_page(logged_in_page, human, space, shot):
    page = logged_in_page
    project = make_project(space, "colony")
    make_task(
        project,
        slug="ship-parser",
        status="review",
        role="liaison",
        dna={"abstract_ref": "docs/abstract.md", "test_pass_count": 12, "test_total_count": 12},
    )
    page.goto("/board/")
    page.locator('.task-card[data-slug="ship-parser"] a.slug').click()
    page.wait_for_url("**/tasks/ship-parser/")
    assert page.locator('li[data-to="complete"] .refusal').inner_text().count("you act as human") == 1
    shot(page, "task")

    page.locator("button", has_text="Confirm review → complete").click()
    page.wait_for_url("**/tasks/ship-parser/")
    gate = page.locator('li[data-gate="complete"] .confirmed')
    assert "Confirmed by ada" in gate.inner_text()
    shot(page, "task-confirmed")
    confirmation = HumanConfirmation.objects.get(task__slug="ship-parser")
    assert confirmation.user == human and confirmation.to_status == "complete"


def test_confirm_a_step_in_the_admin_after_reading_the_dna(page, space, live_server, client, shot):
    """The admin's bulk action shows each task's DNA; the "Yes" confirms what was shown, and a task
    whose DNA an agent changed while the page was open is not confirmed."""
    from django.conf import settings

    from tasks.services.tasks import task_update_dna
    from tests.web_support import make_human

    boss = make_human("boss", spaces=(space,), superuser=True)
    client.force_login(boss)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    project = make_project(space, "colony")
    make_task(project, slug="kept", status="approval", role="liaison", dna={"abstract": "Ship the parser"})
    make_task(project, slug="moved", status="approval", role="liaison", dna={"abstract": "Ship the lexer"})

    page.goto("/admin/tasks/task/")
    page.locator("#action-toggle").check()
    page.locator("select[name=action]").select_option("confirm_approved")
    page.locator("button[name=index]").click()
    assert page.locator("pre.task-dna", has_text="Ship the parser").is_visible()
    assert page.locator("pre.task-dna", has_text="Ship the lexer").is_visible()
    assert not HumanConfirmation.objects.exists()
    shot(page, "admin-confirm")

    task_update_dna(task=Task.objects.get(slug="moved"), patch={"abstract": "Ship the lexer and drop the tests"})
    page.locator("input[type=submit][value='Yes, confirm']").click()
    page.wait_for_url("**/admin/tasks/task/")
    assert page.locator(".messagelist", has_text="Confirmed the step to 'approved' for 1 task(s).").is_visible()
    assert page.locator(
        ".messagelist", has_text="moved: The DNA of moved changed after this page was loaded"
    ).is_visible()
    shot(page, "admin-confirmed")
    assert list(HumanConfirmation.objects.values_list("task__slug", flat=True)) == ["kept"]


def test_a_task_title_cannot_reverse_the_slug_in_the_task_pages_heading(logged_in_page, agent_factory):
    """Attack: a title ending with U+202E (right-to-left override) made the browser draw the heading's
    slug ``1-ksat`` backwards, as ``task-1``, another task's name. The API drops the override."""
    agent = agent_factory("dev")
    agent.post("/api/v1/projects", {"slug": "proj"}, format="json")
    created = agent.post(
        "/api/v1/tasks", {"project": "proj", "slug": "1-ksat", "title": "Ship it \u202e", "type": "task"}, format="json"
    )
    assert created.status_code == 201
    logged_in_page.goto("/tasks/1-ksat/")
    first, last = logged_in_page.evaluate(
        """() => {
          const t = document.querySelector('h1 small').firstChild; const r = document.createRange();
          const x = i => { r.setStart(t, i); r.setEnd(t, i + 1); return r.getBoundingClientRect().left; };
          return [x(0), x(t.length - 1)];
        }"""
    )
    assert first < last, f"the slug is drawn right to left: first character at x={first}, last at x={last}"
