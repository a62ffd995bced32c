"""Agent authentication: ``Authorization: Bearer <token>``, tokens stored as SHA-256 hashes."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from core import services
from core.models import Agent


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if len(parts) != 2 or parts[0].lower() != self.keyword.lower():
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <token>'.")
        token = services.token_lookup(raw_token=parts[1])
        if token is None:
            raise exceptions.AuthenticationFailed(
                "Unknown or revoked token. Ask an operator for a new one: manage.py agent create NAME --role ROLE."
            )
        if not token.agent.active:
            raise exceptions.AuthenticationFailed("This agent is deactivated.")
        # Recorded at most once a minute per token, to keep a write off most requests.
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            type(token).objects.filter(pk=token.pk).update(last_used_at=now)
        return token.agent, token

    def authenticate_header(self, request):
        return 'Bearer realm="colony"'


class IsAgent(permissions.BasePermission):
    message = "Authentication required: send 'Authorization: Bearer <token>'."

    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, Agent)
