"""In a real browser with no internet: /api/docs/ (Swagger UI) and /api/redoc/ list every operation.

Every request to anything but 127.0.0.1 is aborted by a route handler (and recorded), so a page that
still loaded Swagger UI or ReDoc from a CDN would stay blank and fail here.
"""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def local_url(live_server):
    """The live server's address as 127.0.0.1 (it binds there; pytest-django calls it localhost)."""
    return live_server.url.replace("://localhost:", "://127.0.0.1:")


@pytest.fixture
def offline_page(page):
    """``page`` on which every request leaving 127.0.0.1 is aborted; (resource type, url) of each is kept."""
    blocked: list[str] = []

    def only_local(route):
        url = route.request.url
        if urlparse(url).hostname == "127.0.0.1" or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            blocked.append((route.request.resource_type, url))
            route.abort()

    page.context.route("**/*", only_local)
    return page, blocked


def schema_operations(client) -> list[tuple[str, str]]:
    schema = client.get("/api/schema/?format=json").json()
    return [(method.upper(), path) for path, item in schema["paths"].items() for method in item]


def test_swagger_ui_lists_every_operation_offline(offline_page, local_url, client, shot):
    page, blocked = offline_page
    operations = schema_operations(client)
    page.goto(f"{local_url}/api/docs/")
    page.wait_for_selector(".opblock")
    shown = page.locator(".opblock .opblock-summary-path").all_inner_texts()
    methods = page.locator(".opblock .opblock-summary-method").all_inner_texts()
    shot(page, "swagger")
    assert sorted(zip(methods, (p.replace("\u200b", "") for p in shown), strict=True)) == sorted(operations)
    assert page.locator(".info .title", has_text="Colony API").is_visible()
    assert blocked == []


def test_redoc_lists_every_operation_offline(offline_page, local_url, client, shot, csp_violations):
    page, blocked = offline_page
    operations = schema_operations(client)
    page.goto(f"{local_url}/api/redoc/")
    page.wait_for_selector("[data-section-id^='operation/']")
    sections = page.locator("[data-section-id^='operation/']").count()
    shot(page, "redoc")
    assert sections == len(operations)
    assert page.get_by_text("/api/v1/memory").first.count() == 1
    # ReDoc's bundle asks for its "powered by" logo from its CDN (an <img> that hides itself when it
    # fails): the page's Content-Security-Policy stops it before it leaves; nothing else was blocked.
    assert blocked == []
    assert len(csp_violations) == 1 and "https://cdn.redoc.ly/" in csp_violations[0], csp_violations
    csp_violations.clear()
