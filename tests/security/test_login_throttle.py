"""Failed logins at /login/ and /admin/login/ are throttled (django-axes): after AXES_FAILURE_LIMIT
failures for one username from one address, that username is refused from there, the right password
too, until the cool-off; other users are not affected; a successful login before the limit resets the count."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth.models import User

from tests.security.support import login as _login

pytestmark = pytest.mark.django_db

PASSWORD = "right-horse-battery"  # noqa: S105 - a test password


@pytest.fixture
def humans():
    return (
        User.objects.create_user("ada", password=PASSWORD, is_staff=True, is_superuser=True),
        User.objects.create_user("bob", password=PASSWORD, is_staff=True, is_superuser=True),
    )


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_forty_failed_logins_are_refused_after_the_limit(client, humans, settings, path):
    limit = settings.AXES_FAILURE_LIMIT
    answers = [_login(client, path, "ada", f"guess-{n}") for n in range(40)]
    assert all(a.status_code == 200 for a in answers[: limit - 1])  # the form again, "didn't match"
    refused = answers[limit:]
    assert all(a.status_code == 429 for a in refused), [a.status_code for a in answers]
    text = refused[-1].content.decode()
    assert "Too many failed logins" in text and "Traceback" not in text
    # The right password is refused too, until the cool-off.
    right = _login(client, path, "ada", PASSWORD)
    assert right.status_code == 429 and "_auth_user_id" not in client.session
    # Another user from the same address is not affected.
    assert _login(client, path, "bob", PASSWORD).status_code == 302
    assert client.session["_auth_user_id"] == str(humans[1].pk)


def test_lockout_ends_after_the_cool_off(client, humans, settings, monkeypatch):
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "/login/", "ada", f"guess-{n}")
    assert _login(client, "/login/", "ada", PASSWORD).status_code == 429
    from axes.models import AccessAttempt

    past = AccessAttempt.objects.get(username="ada").attempt_time - datetime.timedelta(hours=48)
    AccessAttempt.objects.filter(username="ada").update(attempt_time=past)
    assert _login(client, "/login/", "ada", PASSWORD).status_code == 302


def test_a_successful_login_resets_the_failure_count(client, humans, settings):
    limit = settings.AXES_FAILURE_LIMIT
    for n in range(limit - 1):
        assert _login(client, "/login/", "ada", f"guess-{n}").status_code == 200
    assert _login(client, "/login/", "ada", PASSWORD).status_code == 302
    client.logout()
    for n in range(limit - 1):
        assert _login(client, "/login/", "ada", f"guess-{n}").status_code == 200
    assert _login(client, "/login/", "ada", PASSWORD).status_code == 302
