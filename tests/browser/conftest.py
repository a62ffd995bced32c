"""Browser tests: Debian's headless Chromium driven by Playwright against pytest-django's live server.

Playwright's own browser download can't be used here, so the browser is the system Chromium
(``make browser`` installs it). One browser process per test session; every test gets a fresh
context (its own cookies and storage). Each page a test visits is saved as a full-page screenshot
under ``test-artifacts/`` at the repository root.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from django.conf import settings

from tests.web_support import make_human

CHROMIUM = os.environ.get("COLONY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
TIMEOUT_MS = 15_000


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the session (Playwright gives it a fresh temporary profile)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"No Chromium at {CHROMIUM}: run `make browser` (installs Debian's chromium) or set COLONY_CHROMIUM."
        )
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread; the test's own ORM calls are still
    # synchronous and safe, so Django's async guard is lifted for the browser tests only.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    try:
        yield browser
    finally:
        browser.close()
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def csp_violations() -> list[str]:
    """What the browser reported blocking under the pages' Content-Security-Policy (``page`` fills it)."""
    return []


@pytest.fixture
def page(chromium, live_server, csp_violations):
    """A fresh browser page (own cookies) that fails the test on any JavaScript error, and on anything
    the pages' Content-Security-Policy blocked (a page of Colony's that needs what its policy forbids)."""
    context = chromium.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda message: csp_violations.append(message.text) if "Content Security Policy" in message.text else None,
    )
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
    assert not csp_violations, f"Blocked by the Content-Security-Policy: {csp_violations}"


@pytest.fixture
def human(space):
    """A human member of the default space (password ``tests.web_support.PASSWORD``)."""
    return make_human("ada", spaces=(space,))


@pytest.fixture
def logged_in_page(page, human, live_server, client):
    """``page`` with ``human``'s session cookie set, as if she had logged in."""
    client.force_login(human)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    return page


@pytest.fixture
def shot(request):
    """``shot(page, "board")`` saves a full-page screenshot as test-artifacts/<test>--board.png."""
    ARTIFACTS.mkdir(exist_ok=True)
    test = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)

    def save(page, name: str) -> Path:
        path = ARTIFACTS / f"{test}--{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
