"""Production-safe defaults: DEBUG is off unless asked for, a stranger's Host header gets a short 400
(never Django's technical page, which shows the settings), and ``manage.py check --deploy`` passes with
the environment docs/operations.md's production section lists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

ROOT = Path(__file__).resolve().parents[2]

#: docs/operations.md's production environment (test_operations_doc_lists_the_production_environment checks it).
PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECURE_SSL_REDIRECT": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "METRICS_ALLOW_LOCALHOST": "false",
}


def _manage(*args: str, **extra) -> subprocess.CompletedProcess:
    # The environment of a production process: the browser tests lift Django's async guard for this
    # test process (DJANGO_ALLOW_ASYNC_UNSAFE), which check --deploy rightly refuses.
    dropped = {*PRODUCTION_ENV, "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {key: value for key, value in os.environ.items() if key not in dropped} | extra
    return subprocess.run(  # noqa: S603 - fixed argv: this Python and manage.py
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_debug_is_off_unless_the_environment_turns_it_on():
    code = "from django.conf import settings; print(settings.DEBUG)"
    assert _manage("shell", "-c", code).stdout.strip().splitlines()[-1] == "False"
    assert _manage("shell", "-c", code, DEBUG="true").stdout.strip().splitlines()[-1] == "True"
    assert django_settings.DEBUG is False  # the test run itself


@pytest.mark.parametrize("debug", [False, True])
def test_unknown_host_gets_no_technical_page_on_the_api(client, settings, debug):
    settings.DEBUG = debug
    response = client.get("/api/v1/health", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["error"]["code"] == "BAD_HOST"
    assert "DATABASE" not in response.content.decode() and len(response.content) < 500


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("path", ["/", "/login/", "/admin/", "/no/such/page"])
def test_unknown_host_gets_a_short_plain_page_elsewhere(client, settings, debug, path):
    settings.DEBUG = debug
    response = client.get(path, HTTP_HOST="evil.example:8000")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert "Bad request" in text and len(text) < 300
    for secret in ("DATABASE_URL", "REDIS_URL", "Traceback", "settings"):
        assert secret not in text


@pytest.mark.django_db
def test_unknown_path_lists_no_url_patterns(client):
    api = client.get("/api/v1/no-such-endpoint")
    assert api.status_code == 404 and api.json()["error"]["code"] == "NOT_FOUND"
    page = client.get("/no/such/page/")
    assert page.status_code == 404
    text = page.content.decode()
    assert "URLconf" not in text and "api/v1/" not in text


def test_unknown_host_against_the_real_server(asgi_server):
    import httpx

    api = httpx.get(f"{asgi_server.url}/api/v1/health", headers={"Host": "evil.example"})
    assert api.status_code == 400 and api.json()["error"]["code"] == "BAD_HOST"
    page = httpx.get(f"{asgi_server.url}/", headers={"Host": "evil.example"})
    assert page.status_code == 400 and page.headers["content-type"].startswith("text/plain")
    assert "DATABASE_URL" not in page.text and len(page.text) < 300


DEPLOY_CHECK = ("check", "--deploy", "--fail-level", "WARNING")


def test_check_deploy_passes_with_the_documented_production_settings():
    ok = _manage(*DEPLOY_CHECK, **PRODUCTION_ENV)
    assert ok.returncode == 0, ok.stderr[-3000:]
    refused = _manage(*DEPLOY_CHECK)  # the local defaults: not production-ready, and the check says so
    assert refused.returncode != 0
    assert "security.W012" in refused.stderr + refused.stdout  # SESSION_COOKIE_SECURE off


def test_operations_doc_lists_the_production_environment():
    page = (ROOT / "docs" / "operations.md").read_text()
    for name, value in PRODUCTION_ENV.items():
        assert f"{name}={value}" in page, name
