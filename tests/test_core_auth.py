"""Agent tokens: hashed at rest, several per agent, revocable; the error envelope on auth failures."""

from __future__ import annotations

import hashlib

import pytest
from django.core.management import call_command

from core import services
from core.models import AgentToken

pytestmark = pytest.mark.django_db


def test_token_is_stored_hashed_only(space):
    agent, token = services.agent_create(name="a1", role="dev", space=space)
    stored = AgentToken.objects.get(agent=agent)
    assert stored.key_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in {stored.key_hash, stored.prefix}
    assert stored.prefix == token[:12]


def test_bearer_token_identifies_the_agent(dev):
    response = dev.get("/api/v1/agents/me")
    assert response.status_code == 200
    assert response.json() == {"agent_id": str(dev.agent.id), "name": "dev-1", "role": "dev", "space": "default"}


@pytest.mark.parametrize(
    "header",
    [None, "Bearer", "Bearer nope", "Token abc", "Basic dXNlcjpwYXNz", "Bearer a b"],
)
def test_missing_or_bad_credentials_get_401_envelope(anon, header):
    if header is not None:
        anon.credentials(HTTP_AUTHORIZATION=header)
    response = anon.get("/api/v1/agents/me")
    assert response.status_code == 401
    body = response.json()
    assert body["error"]["code"] == "UNAUTHENTICATED"
    assert body["error"]["message"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_several_tokens_and_revoking_one_keeps_the_other(dev):
    second = services.token_create(agent=dev.agent, label="ci")
    services.token_revoke(agent=dev.agent, prefix=dev.token[:12])
    assert dev.get("/api/v1/agents/me").status_code == 401
    dev.credentials(HTTP_AUTHORIZATION=f"Bearer {second}")
    assert dev.get("/api/v1/agents/me").status_code == 200


def test_deactivated_agent_is_refused(dev):
    dev.agent.active = False
    dev.agent.save()
    assert dev.get("/api/v1/agents/me").status_code == 401


def test_agent_create_command_prints_token_alone_on_last_line(space, capsys, anon):
    call_command("agent", "create", "cli-agent", "--role", "qa")
    token = capsys.readouterr().out.strip().splitlines()[-1]
    assert token.startswith("col_") and " " not in token
    anon.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert anon.get("/api/v1/agents/me").json()["role"] == "qa"
    call_command("agent", "revoke", "cli-agent")
    assert anon.get("/api/v1/agents/me").status_code == 401


def test_agent_create_refuses_duplicates_and_unknown_space(space):
    from django.core.management.base import CommandError

    call_command("agent", "create", "twice", "--role", "dev")
    with pytest.raises(CommandError, match="already exists"):
        call_command("agent", "create", "twice", "--role", "dev")
    with pytest.raises(CommandError, match="No space"):
        call_command("agent", "create", "x", "--role", "dev", "--space", "nowhere")


def test_bootstrap_creates_space_admin_and_default_agents_once(db, capsys, monkeypatch):
    monkeypatch.setenv("COLONY_ADMIN_PASSWORD", "s3cret-pass")
    call_command("colony_bootstrap")
    first = capsys.readouterr().out
    assert first.count("token, shown once") == 4
    call_command("colony_bootstrap")
    assert "token, shown once" not in capsys.readouterr().out
    from django.contrib.auth import authenticate

    assert authenticate(username="admin", password="s3cret-pass") is not None
