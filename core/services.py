"""Writes for spaces, agents and tokens. A name or label is stored as the API stores text
(``api.text.storable``), whoever calls: the API, the pages, the management commands."""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from api.errors import Conflict, NotFound, ValidationFailed, did_you_mean
from api.text import storable
from core.choices import DEFAULT_SPACE_SLUG, ROLE_SYNONYMS, AgentRole
from core.logging import TOKEN_PREFIX, URL_TOKEN_PREFIX
from core.models import Agent, AgentToken, Space, UrlToken, WorkerHeartbeat

URL_TOKEN_MAX_DAYS = 365
#: Live (not revoked, not expired) URL tokens one human may hold: each reads the space's brain for up to
#: URL_TOKEN_MAX_DAYS; past this, revoke some first.
URL_TOKENS_LIVE_MAX = 100
SPACE_SLUG_RE = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")


def _hash(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode()).hexdigest()


def space_get_or_create_default() -> Space:
    space, _ = Space.objects.get_or_create(slug=DEFAULT_SPACE_SLUG, defaults={"name": "Default space"})
    return space


def space_get(*, slug: str) -> Space:
    try:
        return Space.objects.get(slug=slug)
    except Space.DoesNotExist:
        raise NotFound(
            f"No space {slug!r}. Create it with `manage.py space create {slug}` (see `manage.py space list`).",
            code="SPACE_NOT_FOUND",
        ) from None


def space_create(*, slug: str, name: str = "") -> Space:
    """A new space (tenant). The slug is lowercase letters, digits and hyphens; the name defaults to it."""
    slug = slug.strip()
    if not SPACE_SLUG_RE.fullmatch(slug):
        raise ValidationFailed(
            f"{slug!r} is not a space slug: use 1-64 lowercase letters, digits and hyphens, e.g. team-blue."
        )
    name = storable(name).strip() or slug
    if len(name) > 200:
        raise ValidationFailed("A space name is at most 200 characters.")
    with transaction.atomic():
        space, created = Space.objects.get_or_create(slug=slug, defaults={"name": name})
    if not created:
        raise Conflict(f"Space {slug!r} already exists (see `manage.py space list`).", code="SPACE_EXISTS")
    return space


def _within_column(model, field: str, value: str, what: str) -> None:
    """Raise ValidationFailed when ``value`` is longer than the column ``model.field`` holds."""
    limit = model._meta.get_field(field).max_length
    if len(value) > limit:
        raise ValidationFailed(f"{what} is at most {limit} characters; got {len(value)}.")


def token_create(*, agent: Agent, label: str = "") -> str:
    """Create a token for ``agent`` and return it. This is the only time it is seen in clear."""
    label = storable(label)
    _within_column(AgentToken, "label", label, "A token label")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    AgentToken.objects.create(agent=agent, key_hash=_hash(raw), prefix=raw[:12], label=label)
    return raw


def _columns(model, alias: str) -> tuple[list[str], str]:
    fields = model._meta.concrete_fields
    return [f.attname for f in fields], ", ".join(f"{alias}.{connection.ops.quote_name(f.column)}" for f in fields)


def _token_sql() -> tuple[str, tuple[list[str], list[str], list[str]]]:
    """Every request looks its token up: one hand-written join, built once per process (the ORM
    compiling the same select_related query costs ~1.5 ms of CPU a request)."""
    token, token_sql = _columns(AgentToken, "t")
    agent, agent_sql = _columns(Agent, "a")
    space, space_sql = _columns(Space, "s")
    sql = (
        f"SELECT {token_sql}, {agent_sql}, {space_sql} FROM {AgentToken._meta.db_table} t "  # noqa: S608 - names from the models
        f"JOIN {Agent._meta.db_table} a ON a.id = t.agent_id JOIN {Space._meta.db_table} s ON s.id = a.space_id "
        "WHERE t.key_hash = %s AND t.revoked_at IS NULL"
    )
    return sql, (token, agent, space)


def token_lookup(*, raw_token: str) -> AgentToken | None:
    """The active token (with its agent and the agent's space loaded), or None.

    A process keeps the row it read for a found token ``settings.TOKEN_CACHE_SECONDS`` (see
    :class:`TokenRows`); the instances are built anew for every call, so no request sees another's."""
    global _TOKEN_SQL
    if _TOKEN_SQL is None:
        _TOKEN_SQL = _token_sql()
    sql, (token_names, agent_names, space_names) = _TOKEN_SQL
    key = _hash(raw_token)
    row, touched = token_rows.get(key)
    if row is None:
        generation = token_rows.generation
        with connection.cursor() as cursor:
            cursor.execute(sql, [key])
            row = cursor.fetchone()
        if row is None:
            return None  # not kept: a token made a moment ago by another process works at once
        token_rows.put(key, row, generation=generation)
    first, second = len(token_names), len(token_names) + len(agent_names)
    token = AgentToken.from_db(connection.alias, token_names, row[:first])
    agent = Agent.from_db(connection.alias, agent_names, row[first:second])
    agent.space = Space.from_db(connection.alias, space_names, row[second:])
    token.agent = agent
    if touched is not None and (token.last_used_at is None or touched > token.last_used_at):
        token.last_used_at = touched
    return token


def token_touch(*, token: AgentToken, now) -> None:
    """Record that ``token`` was used ``now`` (the caller writes at most once a minute)."""
    AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
    token_rows.touched(token.key_hash, now)


class TokenRows:
    """What this process read for each token it authenticated lately: every call with a token looked
    one up (a join of token, agent and space: ~0.6 ms of waiting and ~0.4 ms of CPU of a memory call,
    docs/performance.md), while an agent sends many calls with the same token.

    A row is trusted for ``settings.TOKEN_CACHE_SECONDS`` (0: never kept). Whatever changes a token,
    an agent or a space clears this process's rows at once (``core.apps`` connects :meth:`clear` to
    their saves and deletes; :func:`token_revoke` clears too, as its ``update`` sends no signal); the
    server's other processes see a revoked token or a deactivated agent at most that many seconds
    later. Unknown tokens are never kept. At most ``MAX_ROWS`` rows, the oldest dropped first.

    A row read before a :meth:`clear` is not kept after it (``generation``): a lookup that raced a
    revocation in this process can't put back what the revocation cleared."""

    MAX_ROWS = 1024

    def __init__(self) -> None:
        self._rows: dict[str, tuple[float, tuple, object]] = {}
        self._lock = threading.Lock()
        self.generation = 0  # how many times the rows were cleared

    def get(self, key: str) -> tuple[tuple | None, object]:
        """(row, when this process last recorded the token's use), or (None, None)."""
        entry = self._rows.get(key)
        if entry is None or entry[0] <= time.monotonic():
            return None, None
        return entry[1], entry[2]

    def put(self, key: str, row: tuple, *, generation: int) -> None:
        """Keep ``row``, read when :attr:`generation` was ``generation``, unless cleared since."""
        seconds = settings.TOKEN_CACHE_SECONDS
        if seconds <= 0:
            return
        with self._lock:
            if generation != self.generation:
                return
            self._rows.pop(key, None)
            while len(self._rows) >= self.MAX_ROWS:
                del self._rows[next(iter(self._rows))]
            self._rows[key] = (time.monotonic() + seconds, row, None)

    def touched(self, key: str, when) -> None:
        with self._lock:
            entry = self._rows.get(key)
            if entry is not None:
                self._rows[key] = (entry[0], entry[1], when)

    def clear(self, **_signal) -> None:
        """Forget every row now, and again when the surrounding transaction commits: a lookup racing the
        change reads the row as it was until then, and must not keep it for TOKEN_CACHE_SECONDS after."""
        self._forget()
        transaction.on_commit(self._forget)

    def _forget(self) -> None:
        with self._lock:
            self._rows.clear()
            self.generation += 1


token_rows = TokenRows()


_TOKEN_SQL = None


@transaction.atomic
def agent_create(*, name: str, role: str, space: Space, label: str = "") -> tuple[Agent, str]:
    """Create an agent with its first token; returns (agent, token)."""
    name, label = storable(name), storable(label)
    if not name.strip():
        raise ValidationFailed("An agent needs a name of visible characters, e.g. dev-1.")
    if role not in AgentRole.values:
        hint = did_you_mean(role, AgentRole.values, synonyms=ROLE_SYNONYMS)
        raise ValidationFailed(f"Unknown role {role!r}.{hint} Use one of {', '.join(AgentRole.values)}.")
    _within_column(Agent, "name", name, "An agent name")
    _within_column(AgentToken, "label", label, "A token label")
    if Agent.objects.filter(space=space, name=name).exists():
        raise ValidationFailed(
            f"Agent {name!r} already exists in space {space.slug!r}; use `agent token {name}` for another token."
        )
    agent = Agent.objects.create(name=name, role=role, space=space)
    return agent, token_create(agent=agent, label=label)


def token_revoke(*, agent: Agent, prefix: str | None = None) -> int:
    """Revoke one API token of ``agent`` (by its prefix) or all of its tokens, its read-only URL tokens
    included (each answers as the agent); returns how many."""
    now = timezone.now()
    tokens = AgentToken.objects.filter(agent=agent, revoked_at__isnull=True)
    if prefix:
        tokens = tokens.filter(prefix__startswith=prefix[:12])
    with transaction.atomic():
        revoked = tokens.update(revoked_at=now)
        if not prefix:
            revoked += UrlToken.objects.filter(agent=agent, revoked_at__isnull=True).update(revoked_at=now)
    token_rows.clear()
    return revoked


def worker_heartbeat(*, hostname: str, pid: int, started_at) -> None:
    """Record that the worker ``hostname`` is alive now (one upsert)."""
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        hostname=hostname, defaults={"pid": pid, "started_at": started_at, "last_seen": now}
    )


def url_token_create(
    *, agent: Agent, days: int, label: str = "", created_by: str = "", user=None
) -> tuple[UrlToken, str]:
    """A read-only URL token for ``agent`` valid ``days`` days; returns (row, token). Shown once. ``user``:
    the human making it (the tokens page), whom it answers for only while they may act in the space."""
    if not 1 <= days <= URL_TOKEN_MAX_DAYS:
        raise ValidationFailed(f"A URL token lives 1 to {URL_TOKEN_MAX_DAYS} days; got {days}.")
    label = storable(label)
    _within_column(UrlToken, "label", label, "A URL token label")
    if user is not None:
        live = UrlToken.objects.filter(created_by_user=user, revoked_at__isnull=True, expires_at__gt=timezone.now())
        if live.count() >= URL_TOKENS_LIVE_MAX:
            raise ValidationFailed(
                f"You hold {URL_TOKENS_LIVE_MAX} live URL tokens, the most one person may: revoke the ones no "
                "longer handed out (on the tokens page) before making another."
            )
    raw = URL_TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = UrlToken.objects.create(
        agent=agent,
        key_hash=_hash(raw),
        prefix=raw[:12],
        label=label,
        created_by=created_by,
        created_by_user=user,
        expires_at=timezone.now() + timedelta(days=days),
    )
    return token, raw


def url_token_lookup(*, raw_token: str) -> UrlToken | None:
    """The live URL token (not revoked, not expired, agent active, and, made by a human on the tokens page,
    that human still active and a member of its space or a superuser) for ``raw_token``, or None."""
    token = (
        UrlToken.objects.select_related("agent", "agent__space", "created_by_user")
        .filter(key_hash=_hash(raw_token), revoked_at__isnull=True, expires_at__gt=timezone.now())
        .first()
    )
    if token is None or not token.agent.active:
        return None
    maker = token.created_by_user
    if maker is not None and not (
        maker.is_active and (maker.is_superuser or maker.colony_spaces.filter(pk=token.agent.space_id).exists())
    ):
        return None  # its maker lost the space: a link they handed out reads it no longer
    return token


def url_token_revoke(*, agent: Agent, prefix: str) -> int:
    """Revoke the URL tokens of ``agent`` whose prefix matches; returns how many."""
    return UrlToken.objects.filter(agent=agent, prefix__startswith=prefix[:12], revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
