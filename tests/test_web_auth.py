"""Humans log in, every page needs a login, and a human sees and acts only in their spaces."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.models import Space
from tests.web_support import PASSWORD, make_human
from web.spaces import SESSION_KEY

PAGES = ["web:home", "web:health"]


@pytest.mark.django_db
@pytest.mark.parametrize("name", PAGES)
def test_every_page_redirects_anonymous_visitors_to_login(client, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={url}"


@pytest.mark.django_db
def test_login_with_the_right_password_opens_home(client, space):
    make_human("ada", spaces=(space,))
    response = client.post("/login/", {"username": "ada", "password": PASSWORD}, follow=True)
    assert response.redirect_chain[-1] == ("/", 302)
    assert response.status_code == 200
    assert response.wsgi_request.user.username == "ada"
    assert b"Where things are" in response.content


@pytest.mark.django_db
def test_login_with_a_wrong_password_says_so_and_stays_anonymous(client, space):
    make_human("ada", spaces=(space,))
    response = client.post("/login/", {"username": "ada", "password": "nope"})
    assert response.status_code == 200
    assert b"didn't match" in response.content
    assert not response.wsgi_request.user.is_authenticated


@pytest.mark.django_db
def test_login_returns_to_the_page_asked_for(client, space):
    make_human("ada", spaces=(space,))
    response = client.post(
        "/login/?next=/home/health/", {"username": "ada", "password": PASSWORD, "next": "/home/health/"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/home/health/"


@pytest.mark.django_db
def test_logout_is_a_post_and_ends_the_session(client, space):
    client.force_login(make_human("ada", spaces=(space,)))
    assert client.get("/logout/").status_code == 405  # a link or an image can't log you out
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_switcher_lists_only_the_spaces_the_human_belongs_to(client, space, other_space):
    hidden = Space.objects.create(slug="hidden", name="Hidden space")
    user = make_human("ada", spaces=(space, other_space))
    client.force_login(user)
    body = client.get("/").content.decode()
    assert 'value="default"' in body and 'value="other"' in body
    assert "Hidden space" not in body and 'value="hidden"' not in body
    assert hidden.pk  # exists, just not hers


@pytest.mark.django_db
def test_switching_to_a_space_of_ones_own_changes_the_working_space(client, space, other_space):
    client.force_login(make_human("ada", spaces=(space, other_space)))
    response = client.post("/space/", {"space": "other", "next": "/"}, follow=True)
    assert response.redirect_chain == [("/", 302)]
    assert client.session[SESSION_KEY] == other_space.pk
    assert "Now working in space “Other space”" in response.content.decode()
    assert "<small>space Other space</small>" in response.content.decode()


@pytest.mark.django_db
def test_switching_to_another_tenants_space_is_refused_and_changes_nothing(client, space, other_space):
    client.force_login(make_human("ada", spaces=(space,)))
    response = client.post("/space/", {"space": "other", "next": "/"}, follow=True)
    assert SESSION_KEY not in client.session
    body = response.content.decode()
    assert "You are not a member of a space called “other”" in body
    assert "<small>space Default space</small>" in body


@pytest.mark.django_db
def test_a_stale_space_in_the_session_falls_back_to_one_of_the_humans_spaces(client, space, other_space):
    user = make_human("ada", spaces=(other_space,))
    client.force_login(user)
    session = client.session
    session[SESSION_KEY] = space.pk  # she was removed from it since
    session.save()
    assert "<small>space Other space</small>" in client.get("/").content.decode()


@pytest.mark.django_db
def test_switcher_refuses_an_offsite_next(client, space, other_space):
    client.force_login(make_human("ada", spaces=(space, other_space)))
    response = client.post("/space/", {"space": "other", "next": "https://evil.example/"})
    assert response["Location"] == "/"


@pytest.mark.django_db
def test_superuser_sees_every_space(client, space, other_space):
    client.force_login(make_human("root", superuser=True))
    body = client.get("/").content.decode()
    assert 'value="default"' in body and 'value="other"' in body


@pytest.mark.django_db
def test_a_human_in_no_space_is_told_so(client, space):
    client.force_login(make_human("newbie"))
    response = client.get("/")
    assert response.status_code == 403
    assert b"You are not in any space yet" in response.content


@pytest.mark.django_db
def test_an_htmx_refresh_after_the_session_ended_sends_the_whole_page_to_login(client):
    response = client.get(
        "/board/", headers={"HX-Request": "true", "HX-Current-URL": "http://testserver/board/?role=dev"}
    )
    assert response.status_code == 401
    assert response["HX-Redirect"] == "/login/?next=/board/"
