from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from core.choices import AgentRole


class Space(models.Model):
    """A tenant: every thought, task and agent belongs to exactly one space."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="colony_spaces")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Agent(models.Model):
    """An AI agent of a space. Its tokens fix its identity and role on every request."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    space = models.ForeignKey(Space, on_delete=models.PROTECT, related_name="agents")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=20, choices=AgentRole.choices)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["space", "name"]
        constraints = [models.UniqueConstraint(fields=["space", "name"], name="agent_unique_name_per_space")]

    def __str__(self) -> str:
        return f"{self.name} ({self.role}@{self.space_id})"

    # DRF treats the authenticated principal as request.user.
    @property
    def is_authenticated(self) -> bool:
        return True


class AgentToken(models.Model):
    """An API token. Only its SHA-256 is stored; the token itself is shown once at creation."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="First characters of the token, to tell tokens apart.")
    label = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.agent.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class WorkerHeartbeat(models.Model):
    """Written by every Celery worker every few seconds (``config.celery.HeartbeatStep``).

    Health reads it instead of pinging workers, so a health check never blocks on the broker.
    """

    hostname = models.CharField(max_length=255, unique=True)
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        return f"{self.hostname} ({self.last_seen:%Y-%m-%d %H:%M:%S})"


class UrlToken(models.Model):
    """A read-only URL token (seed 003 layer B): ``GET /api/v1/memory?prompt=...&token=...`` only.

    For clients that can only fetch URLs (a human's chat client). It answers retrieve-only memory
    calls as ``agent`` (whose name the query log shows) in ``agent.space``, and nothing else: no
    storing, correcting, transitions or tasks. Only its SHA-256 is stored; it expires and is revocable.
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="url_tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="First characters of the token, to tell tokens apart.")
    label = models.CharField(max_length=100, blank=True)
    created_by = models.CharField(max_length=150, blank=True, help_text="Who created it (user or 'cli').")
    # The human who made it on the tokens page: it answers only while they may still act in its space.
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… (URL, {self.agent.name})"
