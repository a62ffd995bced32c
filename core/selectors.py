from __future__ import annotations

from api.errors import NotFound
from core.models import Agent, Space


def regex_any(needles: list[str]) -> str:
    """A PostgreSQL regular expression matching any of ``needles`` literally (every character but a letter
    or a digit escaped: in PostgreSQL's advanced regular expressions a backslash before such a character
    makes it literal)."""
    return "|".join("".join(c if c.isalnum() else "\\" + c for c in needle) for needle in needles)


def agent_get(*, space: Space, name: str) -> Agent:
    try:
        return Agent.objects.get(space=space, name=name)
    except Agent.DoesNotExist:
        raise NotFound(f"No agent {name!r} in space {space.slug!r}.", code="AGENT_NOT_FOUND") from None
