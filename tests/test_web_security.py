"""Forms are CSRF-protected: a post without the token is refused with a page that says so."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.web_support import PASSWORD, make_human
from web.spaces import SESSION_KEY


@pytest.fixture
def csrf_client() -> Client:
    return Client(enforce_csrf_checks=True)


def _token(client: Client, url: str) -> str:
    body = client.get(url).content.decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body).group(1)


@pytest.mark.django_db
def test_a_post_without_csrf_token_is_refused_and_changes_nothing(csrf_client, space, other_space):
    csrf_client.force_login(make_human("ada", spaces=(space, other_space)))
    response = csrf_client.post("/space/", {"space": "other"})
    assert response.status_code == 403
    assert b"security token (CSRF)" in response.content
    assert SESSION_KEY not in csrf_client.session


@pytest.mark.django_db
def test_the_same_post_with_the_pages_token_goes_through(csrf_client, space, other_space):
    csrf_client.force_login(make_human("ada", spaces=(space, other_space)))
    token = _token(csrf_client, "/")
    response = csrf_client.post("/space/", {"space": "other", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert csrf_client.session[SESSION_KEY] == other_space.pk


@pytest.mark.django_db
def test_login_form_is_csrf_protected(csrf_client, space):
    make_human("ada", spaces=(space,))
    assert csrf_client.post("/login/", {"username": "ada", "password": PASSWORD}).status_code == 403
    token = _token(csrf_client, "/login/")
    response = csrf_client.post("/login/", {"username": "ada", "password": PASSWORD, "csrfmiddlewaretoken": token})
    assert response.status_code == 302


@pytest.mark.django_db
def test_a_transition_post_without_csrf_token_is_refused_and_the_task_does_not_move(csrf_client, space):
    from tasks.models import TransitionLog
    from tests.tasks_helpers import make_project, make_task

    task = make_task(make_project(space, "colony"), slug="design", status="approval", role="liaison")
    csrf_client.force_login(make_human("ada", spaces=(space,)))
    response = csrf_client.post(f"/tasks/{task.slug}/transition/", {"to": "approved"})
    assert response.status_code == 403
    task.refresh_from_db()
    assert task.status == "approval" and not TransitionLog.objects.exists()
    # the htmx board sends the page's token in a header (hx-headers on <body>)
    token = _token(csrf_client, "/board/")
    response = csrf_client.post(
        f"/tasks/{task.slug}/transition/", {"to": "approved"}, headers={"X-CSRFToken": token, "HX-Request": "true"}
    )
    assert response.status_code == 200
    task.refresh_from_db()
    assert task.status == "approved"
