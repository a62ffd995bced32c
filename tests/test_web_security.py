"""Forms are CSRF-protected: a post without the token is refused with a page that says so."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from core.models import Space
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
    from tasks.models import TransitionLog, dna_digest
    from tests.tasks_helpers import make_project, make_task

    task = make_task(make_project(space, "colony"), slug="design", status="approval", role="liaison")
    csrf_client.force_login(make_human("ada", spaces=(space,)))
    response = csrf_client.post(
        f"/tasks/{task.slug}/transition/", {"dna_digest": dna_digest(task.dna), "to": "approved"}
    )
    assert response.status_code == 403
    task.refresh_from_db()
    assert task.status == "approval" and not TransitionLog.objects.exists()
    # the htmx board sends the page's token in a header (hx-headers on <body>)
    token = _token(csrf_client, "/board/")
    response = csrf_client.post(
        f"/tasks/{task.slug}/transition/",
        {"dna_digest": dna_digest(task.dna), "to": "approved"},
        headers={"X-CSRFToken": token, "HX-Request": "true"},
    )
    assert response.status_code == 200
    task.refresh_from_db()
    assert task.status == "approved"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/tasks/fix%00ci/"),
        ("get", "/tasks/fix%00ci/moves/"),
        ("post", "/tasks/fix%00ci/transition/"),
        ("post", "/tasks/fix%00ci/dna/"),
        ("get", "/board/?project=a%00"),
        ("get", "/admin/brain/thought/?q=a%00b"),
    ],
)
def test_a_nul_in_a_pages_address_is_the_sites_400_page(client, space, method, url):
    """A task ref with a NUL reached PostgreSQL (a 500): the input guard covered /api/ only."""
    from tasks.models import Task
    from tests.tasks_helpers import make_project, make_task

    task = make_task(make_project(space, "colony"), slug="fix", status="active", role="dev")
    client.force_login(make_human("root", spaces=(space,), superuser=True))
    response = getattr(client, method)(url, {"to": "review", "dna": '{"a": 1}'} if method == "post" else None)
    assert response.status_code == 400
    assert "<h1>Bad request</h1>" in response.content.decode()
    assert Task.objects.get(pk=task.pk).status == "active" and task.dna == Task.objects.get(pk=task.pk).dna


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/", "/board/", "/brain/", "/login/", "/admin/login/", "/api/docs/", "/api/v1/health"])
def test_every_response_carries_a_script_policy_with_a_fresh_nonce(client, space, url):
    """The pages' Content-Security-Policy: scripts from Colony itself or stamped with this response's
    nonce (a response with no inline script has none); no inline handler, no eval, no plugin, no framing,
    no other <base>, forms post to Colony."""
    client.force_login(make_human("ada", spaces=(space,)))
    policies = [client.get(url).headers["Content-Security-Policy"] for _ in range(2)]
    directives = {part.split()[0]: part.split()[1:] for part in policies[0].split("; ")}
    assert directives["script-src"][0] == "'self'" and len(directives["script-src"]) <= 2
    nonces = [value for value in directives["script-src"][1:] if value.startswith("'nonce-")]
    assert nonces == directives["script-src"][1:]
    assert all(nonce not in policies[1] for nonce in nonces)  # one per response
    assert directives["object-src"] == ["'none'"] and directives["base-uri"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"] and directives["form-action"] == ["'self'"]


@pytest.mark.django_db
def test_the_pages_inline_scripts_carry_the_responses_nonce(client, space):
    client.force_login(make_human("ada", spaces=(space, Space.objects.create(slug="b", name="B"))))
    response = client.get("/board/")
    nonce = re.search(r"'nonce-([^']+)'", response.headers["Content-Security-Policy"]).group(1)
    scripts = re.findall(r"<script([^>]*)>", response.content.decode())
    inline = [attributes for attributes in scripts if "src=" not in attributes]
    assert len(inline) == 2  # base.html's and the board's
    assert all(f'nonce="{nonce}"' in attributes for attributes in inline)
    assert re.findall(r"<[^>]*\son[a-z]+=", response.content.decode()) == []  # no inline handler either
