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


def test_a_token_sent_without_the_authorization_header_is_told_where_it_goes(anon, dev):
    """A token in X-API-Key (or no header at all): the 401 said only "Authentication credentials were
    not provided."; it now names the header and how to get a token (/mcp already did)."""
    token = dev._credentials["HTTP_AUTHORIZATION"].split()[1]
    for headers in ({}, {"HTTP_X_API_KEY": token}, {"HTTP_API_KEY": token}):
        response = anon.get("/api/v1/agents/me", **headers)
        assert response.status_code == 401
        message = response.json()["error"]["message"]
        assert "'Authorization: Bearer <token>'" in message and "manage.py agent create" in message, message
    posted = anon.post("/api/v1/memory", {"prompt": "The deploy pipeline runs migrations first."}, format="json")
    assert posted.status_code == 401 and "'Authorization: Bearer <token>'" in posted.json()["error"]["message"]


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
    from django.test import RequestFactory

    # The login throttle (django-axes) needs the request a login comes with.
    assert authenticate(RequestFactory().post("/login/"), username="admin", password="s3cret-pass") is not None


# --- the per-process token cache (core.services.TokenRows) ----------------------------------------
def _token_statements(client, path="/api/v1/agents/me") -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        assert client.get(path).status_code == 200
    return sum("core_agenttoken" in q["sql"] and q["sql"].lstrip().startswith("SELECT") for q in ctx.captured_queries)


def test_a_token_is_looked_up_once_then_kept(dev):
    services.token_rows.clear()
    assert _token_statements(dev) == 1
    assert _token_statements(dev) == 0
    assert _token_statements(dev) == 0


def test_no_cache_when_token_cache_seconds_is_zero(dev, settings):
    settings.TOKEN_CACHE_SECONDS = 0
    services.token_rows.clear()
    assert _token_statements(dev) == 1
    assert _token_statements(dev) == 1


def test_a_kept_token_revoked_elsewhere_is_refused_once_its_time_is_up(dev, settings, monkeypatch):
    """Another process revoking the token (here: the row changed without this process hearing of it) is
    seen after TOKEN_CACHE_SECONDS at most; until then this process still trusts what it read."""
    import time

    from django.utils import timezone

    settings.TOKEN_CACHE_SECONDS = 10
    services.token_rows.clear()
    assert dev.get("/api/v1/agents/me").status_code == 200
    AgentToken.objects.filter(agent=dev.agent).update(revoked_at=timezone.now())  # no signal: "elsewhere"
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + 9)
    assert dev.get("/api/v1/agents/me").status_code == 200
    monkeypatch.setattr(time, "monotonic", lambda: now + 11)
    assert dev.get("/api/v1/agents/me").status_code == 401


def test_changes_made_in_this_process_apply_at_once(dev, settings):
    """Revoking (an update, no signal: token_revoke clears itself) and saving an agent or a space clear
    this process's kept tokens, whatever TOKEN_CACHE_SECONDS says."""
    settings.TOKEN_CACHE_SECONDS = 3600
    second = services.token_create(agent=dev.agent, label="second")
    assert dev.get("/api/v1/agents/me").status_code == 200
    dev.agent.role = "qa"
    dev.agent.save()
    assert dev.get("/api/v1/agents/me").json()["role"] == "qa"
    dev.agent.space.name = "Renamed"
    dev.agent.space.save()
    assert dev.get("/api/v1/agents/me").status_code == 200
    services.token_revoke(agent=dev.agent, prefix=dev.token[:12])
    assert dev.get("/api/v1/agents/me").status_code == 401
    dev.credentials(HTTP_AUTHORIZATION=f"Bearer {second}")
    assert dev.get("/api/v1/agents/me").status_code == 200
    AgentToken.objects.get(prefix=second[:12]).delete()
    assert dev.get("/api/v1/agents/me").status_code == 401


def test_an_unknown_token_is_not_kept(anon, dev, settings):
    """A miss is not remembered: a token another process creates a moment later works at once."""
    settings.TOKEN_CACHE_SECONDS = 3600
    services.token_rows.clear()
    anon.credentials(HTTP_AUTHORIZATION="Bearer col_not-yet")
    assert anon.get("/api/v1/agents/me").status_code == 401
    AgentToken.objects.create(
        agent=dev.agent, key_hash=hashlib.sha256(b"col_not-yet").hexdigest(), prefix="col_not-yet"[:12]
    )
    assert anon.get("/api/v1/agents/me").status_code == 200


def test_kept_tokens_record_their_use_once_a_minute(dev, settings, monkeypatch):
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    settings.TOKEN_CACHE_SECONDS = 3600
    services.token_rows.clear()
    start = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: start)
    assert dev.get("/api/v1/agents/me").status_code == 200
    token = AgentToken.objects.get(agent=dev.agent)
    assert token.last_used_at == start

    def writes() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert dev.get("/api/v1/agents/me").status_code == 200
        return sum(q["sql"].startswith("UPDATE") and "last_used_at" in q["sql"] for q in ctx.captured_queries)

    monkeypatch.setattr(timezone, "now", lambda: start + timedelta(seconds=61))
    assert writes() == 1
    assert writes() == 0  # the kept row knows it was just recorded
    monkeypatch.setattr(timezone, "now", lambda: start + timedelta(seconds=130))
    assert writes() == 1
    token.refresh_from_db()
    assert token.last_used_at == start + timedelta(seconds=130)


def test_kept_tokens_are_bounded(settings):
    settings.TOKEN_CACHE_SECONDS = 3600
    rows = services.TokenRows()
    for i in range(rows.MAX_ROWS + 5):
        rows.put(f"k{i}", (i,), generation=rows.generation)
    assert len(rows._rows) == rows.MAX_ROWS
    assert rows.get("k0") == (None, None)  # the oldest went first
    assert rows.get(f"k{rows.MAX_ROWS + 4}") == ((rows.MAX_ROWS + 4,), None)


def test_a_row_read_before_a_clear_is_not_kept(settings):
    """A lookup that raced a revocation in this process (read the row, then the revocation cleared the
    rows) must not put the revoked token's row back."""
    settings.TOKEN_CACHE_SECONDS = 3600
    rows = services.TokenRows()
    read_at = rows.generation
    rows.clear()  # e.g. token_revoke in another thread, between the lookup's read and its put
    rows.put("k", (1,), generation=read_at)
    assert rows.get("k") == (None, None)
    rows.put("k", (1,), generation=rows.generation)
    assert rows.get("k") == ((1,), None)
