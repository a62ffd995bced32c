from __future__ import annotations

from collections.abc import Callable

from api.errors import NotFound
from core.models import Agent, Space

#: Where agents read other agents' words besides the brain's sources: each finder takes a space and
#: lowercase strings and returns, for each string some text of that space contains, where (a few words).
#: Apps append their finder in ``ready()`` (``tasks``: titles, descriptions and DNA).
TEXT_FINDERS: list[Callable[[Space, list[str]], dict[str, str]]] = []


def texts_naming(*, space: Space, needles: list[str]) -> dict[str, str]:
    """For each of ``needles`` (lowercase) that a text of ``space`` a finder knows contains, where."""
    found: dict[str, str] = {}
    for finder in TEXT_FINDERS:
        rest = [needle for needle in needles if needle not in found]
        if not rest:
            break
        found.update(finder(space, rest))
    return found


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
