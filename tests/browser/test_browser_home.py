"""In a real browser: a human logs in, sees the home page with htmx loaded, and logs out."""

from __future__ import annotations

import pytest

from tests.web_support import PASSWORD, make_marker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_login_home_and_logout(page, human, space, live_server, shot):
    make_marker(space, "TASK ready→active: DEV <script>window.owned=1</script> (colony) — started")
    page.goto("/")
    assert page.url.endswith("/login/?next=/")
    shot(page, "login")

    page.fill("#id_username", human.username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")

    # Static files are served by the live server and htmx runs: it fetched the health panel.
    assert page.evaluate("typeof window.htmx") == "object"
    page.wait_for_selector("table.health")
    assert page.locator("table.health th", has_text="Database (PostgreSQL)").is_visible()
    # Stored text is shown as text, never run.
    assert page.locator("ol.markers").inner_text().count("<script>window.owned=1</script>") == 1
    assert page.evaluate("window.owned") is None
    shot(page, "home")

    page.click("text=Log out")
    page.wait_for_url(f"{live_server.url}/login/")
    page.goto("/")
    assert "/login/" in page.url
