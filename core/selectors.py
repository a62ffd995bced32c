from __future__ import annotations

from api.errors import NotFound
from core.models import Agent, Space


def agent_get(*, space: Space, name: str) -> Agent:
    try:
        return Agent.objects.get(space=space, name=name)
    except Agent.DoesNotExist:
        raise NotFound(f"No agent {name!r} in space {space.slug!r}.", code="AGENT_NOT_FOUND") from None
