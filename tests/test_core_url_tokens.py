"""Read-only URL tokens (seed 003 layer B): GET /api/v1/memory only, retrieve-only, hashed, revocable,
expiring, refused everywhere else, masked in access logs."""

from __future__ import annotations

import hashlib
import io
import logging
from datetime import timedelta

import httpx
import pytest
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from brain.models import QueryLog, Thought
from core import services
from core.logging import mask_tokens
from core.models import UrlToken
from tests import web_support

ada = web_support.ada

pytestmark = pytest.mark.django_db

STATEMENT = "The staging cluster is rebuilt every Sunday night from the infrastructure repository main branch."


def test_command_prints_token_last_and_stores_only_its_hash(dev):
    out = io.StringIO()
    call_command("agent", "url-token", dev.agent.name, "--days", "3", stdout=out)
    raw = out.getvalue().strip().splitlines()[-1]
    assert raw.startswith("colr_")
    token = UrlToken.objects.get()
    assert token.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in {token.key_hash, token.prefix, token.label} and token.prefix == raw[:12]
    assert timedelta(days=2, hours=23) < token.expires_at - timezone.now() <= timedelta(days=3)


def test_get_memory_with_url_token_is_retrieve_only(dev, url_token, fake_embedder):
    dev.post("/api/v1/memory", {"prompt": STATEMENT}, format="json")
    before = Thought.objects.count()
    response = APIClient().get("/api/v1/memory", {"prompt": STATEMENT + " Confirmed again today.", "token": url_token})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["trace"]["thought_id"] is None and "contribute:false" in body["trace"]["operations"]
    assert body["result"]["sources"][0]["content_preview"].startswith("The staging cluster")
    assert Thought.objects.count() == before  # over 50 characters, declarative: still not stored
    assert QueryLog.objects.filter(agent=dev.agent).count() == 1  # the URL token logged nothing
    # Even an explicit contribute=true or store=true can't make it store; refines is refused.
    forced = APIClient().get(
        "/api/v1/memory", {"prompt": STATEMENT + " Forced.", "token": url_token, "contribute": "true"}
    )
    assert forced.status_code == 200 and forced.json()["trace"]["thought_id"] is None
    for extra in ({"store": "true"}, {"refines": body["result"]["sources"][0]["thought_id"]}):
        refused = APIClient().get("/api/v1/memory", {"prompt": STATEMENT + " Forced.", "token": url_token, **extra})
        assert refused.status_code == 400, refused.json()
    assert Thought.objects.count() == before


@pytest.mark.parametrize(
    "method,path",
    [
        ("post", "/api/v1/memory"),
        ("get", "/api/v1/tasks"),
        ("get", "/api/v1/thoughts"),
        ("post", "/api/v1/thoughts/00000000-0000-0000-0000-000000000000/correct"),
        ("post", "/api/v1/tasks/some-task/transition"),
        ("get", "/api/v1/agents/dev/in-flight"),
        ("get", "/api/v1/health"),
        ("get", "/brain/"),
        ("get", "/admin/"),
    ],
)
def test_url_token_is_refused_on_every_other_operation(url_token, method, path, fake_embedder):
    client = APIClient()
    if method == "post":
        response = client.post(f"{path}?token={url_token}", {"prompt": STATEMENT}, format="json")
    else:
        response = client.get(f"{path}?token={url_token}&prompt=x")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "URL_TOKEN_NOT_ALLOWED"
    assert Thought.objects.count() == 0


def test_url_token_as_bearer_header_is_unknown(url_token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {url_token}")
    assert client.get("/api/v1/tasks").status_code == 401
    assert client.get("/api/v1/memory", {"prompt": "anything"}).status_code == 401


def test_header_and_token_together_is_a_400(dev, url_token):
    assert dev.get("/api/v1/memory", {"prompt": "x", "token": url_token}).status_code == 400


def test_revoked_and_expired_tokens_are_refused(dev, url_token, fake_embedder):
    assert APIClient().get("/api/v1/memory", {"prompt": "deploys", "token": url_token}).status_code == 200
    out = io.StringIO()
    call_command("agent", "revoke", dev.agent.name, "--token", url_token[:12], stdout=out)
    assert "Revoked 1 URL token" in out.getvalue()
    refused = APIClient().get("/api/v1/memory", {"prompt": "deploys", "token": url_token})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "UNAUTHENTICATED"
    _, fresh = services.url_token_create(agent=dev.agent, days=1)
    UrlToken.objects.filter(prefix=fresh[:12]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert APIClient().get("/api/v1/memory", {"prompt": "deploys", "token": fresh}).status_code == 401


def test_token_lifetime_is_bounded(dev):
    from api.errors import ValidationFailed

    with pytest.raises(ValidationFailed):
        services.url_token_create(agent=dev.agent, days=0)
    with pytest.raises(ValidationFailed):
        services.url_token_create(agent=dev.agent, days=366)


def test_mask_tokens():
    assert mask_tokens('"GET /api/v1/memory?prompt=x&token=colr_SECRETSECRET HTTP/1.1" 200') == (
        '"GET /api/v1/memory?prompt=x&token=colr_SEC… HTTP/1.1" 200'
    )
    assert mask_tokens("/api/v1/memory?token=colr_abcdefghij&prompt=y") == "/api/v1/memory?token=colr_abc…&prompt=y"
    assert mask_tokens("csrftoken=abcdefghijkl") == "csrftoken=abcdefghijkl"


@pytest.mark.django_db(transaction=True)
def test_access_log_of_the_live_server_masks_the_token(asgi_server, dev, caplog, fake_embedder):
    _, raw = services.url_token_create(agent=dev.agent, days=1)
    with caplog.at_level(logging.INFO):
        response = httpx.get(f"{asgi_server.url}/api/v1/memory", params={"prompt": "deploys", "token": raw})
        refused = httpx.post(f"{asgi_server.url}/api/v1/memory?token={raw}", json={"prompt": "x"})
    assert response.status_code == 200 and refused.status_code == 403
    access = [r for r in caplog.records if r.name == "uvicorn.access"]
    assert len(access) == 2
    assert all(raw[:8] + "…" in r.getMessage() for r in access)
    assert raw not in caplog.text
    assert raw[8:20] not in caplog.text


def test_human_creates_and_revokes_in_the_web_ui(client, ada, dev, fake_embedder):
    page = client.post("/tokens/", {"agent": dev.agent.name, "days": "14", "label": "Thomas chat"})
    assert page.status_code == 200
    text = page.content.decode()
    start = text.index("token=colr_") + len("token=")
    raw = text[start : text.index("<", start)]
    token = UrlToken.objects.get()
    assert token.created_by == "ada" and token.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert APIClient().get("/api/v1/memory", {"prompt": "deploys", "token": raw}).status_code == 200
    assert raw not in client.get("/tokens/").content.decode()  # shown once
    client.post(f"/tokens/{token.id}/revoke/")
    assert APIClient().get("/api/v1/memory", {"prompt": "deploys", "token": raw}).status_code == 401


@pytest.mark.parametrize(
    "form",
    [
        {"agent": "dev-1\x00", "days": "14", "label": "chat"},
        {"agent": "<dev>", "days": "14", "label": "Thomas\x00 chat"},
        {"agent": "<dev>", "days": "99999999999999999999", "label": "chat"},
    ],
)
def test_the_web_form_refuses_odd_input_with_a_message(client, ada, dev, form):
    """The page read the form by hand: a NUL in the agent or the label reached PostgreSQL (a 500)."""
    form = {**form, "agent": form["agent"].replace("<dev>", dev.agent.name)}
    page = client.post("/tokens/", form, follow=True)
    assert page.status_code == 200
    assert "No URL token created" in page.content.decode()
    assert not UrlToken.objects.exists()


def test_head_on_a_memory_link_does_none_of_the_gets_work(dev, url_token, thought_factory, fake_embedder):
    """HEAD is safe (RFC 9110). Django ran the GET for it: a link checker, a chat app's link preview or an
    uptime monitor sending HEAD to a memory link stored the prompt, logged a query and reinforced the
    thoughts it returned. Now it checks what GET checks and answers GET's status, with nothing done."""
    known = thought_factory("The staging cluster is rebuilt every Sunday night from the main branch.")
    prompt = STATEMENT + " When is the staging cluster rebuilt from the repository?"
    for client, params in ((dev, {"prompt": prompt}), (APIClient(), {"prompt": prompt, "token": url_token})):
        response = client.head("/api/v1/memory", params)
        assert response.status_code == 200 and response.content == b""
    known.refresh_from_db()
    assert (QueryLog.objects.count(), Thought.objects.count()) == (0, 1)
    assert known.access_count == 0
    refused = dev.head("/api/v1/memory", {"prompt": "x", "limit": "many"})  # GET's checks: a 400
    assert refused.status_code == 400
    assert APIClient().head("/api/v1/memory", {"prompt": "x", "token": "colr_unknown"}).status_code == 401
    # The GET itself still does its work.
    assert dev.get("/api/v1/memory", {"prompt": prompt}).status_code == 200
    assert QueryLog.objects.count() == 1
