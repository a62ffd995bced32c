"""In a real browser: the pages' Content-Security-Policy stops markup that got past escaping from running.

Every text an agent writes (thoughts, task titles, markers) reaches a human's page. Templates escape it;
the policy is the second wall: only Colony's own script files and the inline scripts it stamped with
the response's nonce run. ``page`` (tests/browser/conftest.py) fails any browser test whose pages
report a policy violation, so every page the browser tests visit is also checked for working under it.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLIPPED = [
    # markup that escaping would have stopped, put straight into the page as a bug in a template would
    '<img src="data:," onerror="window.owned = (window.owned || 0) + 1">',
    '<a id=slipped href="javascript:window.owned = (window.owned || 0) + 1">x</a>',
    "<script>window.owned = (window.owned || 0) + 1</script>",
]


def test_markup_that_slipped_past_escaping_does_not_run(logged_in_page, csp_violations):
    """Attack: a template that forgot to escape one field (``|safe`` on a thought, a marker, a title)
    lets an agent's text ``<img onerror=...>`` run script in a human's session, with the human's
    session and CSRF token.

    Rule: every page carries a Content-Security-Policy whose script-src has no 'unsafe-inline': inline
    handlers, ``javascript:`` links and scripts without the response's nonce never run."""
    page = logged_in_page
    response = page.goto("/")
    policy = response.headers.get("content-security-policy", "")
    assert "script-src" in policy and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    page.wait_for_selector("table.health")  # htmx (Colony's own script file) still works under the policy
    for markup in SLIPPED:
        page.evaluate("html => document.querySelector('main').insertAdjacentHTML('beforeend', html)", markup)
    page.click("#slipped")
    page.wait_for_timeout(300)
    assert page.evaluate("window.owned") is None
    assert csp_violations, "the browser reported no blocked script: the policy was not applied"
    csp_violations.clear()  # ``page`` fails a test on violations; these ones were the point of this one


def test_the_admins_scripts_work_under_the_policy(page, space, live_server, client):
    """The admin's own scripts (the two-box picker of a task's dependencies, the action bar) run under
    the policy: ``page`` fails the test on anything the policy blocked."""
    from django.conf import settings

    from tests.tasks_helpers import make_project, make_task
    from tests.web_support import make_human

    client.force_login(make_human("boss", spaces=(space,), superuser=True))
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    task = make_task(make_project(space, "colony"), slug="parser", status="pending", role="dev")
    page.goto(f"/admin/tasks/task/{task.pk}/change/")
    page.locator("#id_depends_on_from").wait_for()  # built by SelectFilter2.js
    page.goto("/admin/tasks/task/")
    page.locator("#action-toggle").check()
    assert page.locator(".action-counter").inner_text().startswith("1 of 1")
