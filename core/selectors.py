from __future__ import annotations

from django.db import connection

from api.errors import NotFound
from core.models import Agent, Space

#: Whether an agent exists and is active, its row share-locked: a deactivation or deletion committed first
#: is seen, and one made meanwhile waits for the caller's transaction (which then acted while the agent was
#: still active). Share locks don't wait for each other: one agent's jobs run side by side.
_AGENT_ACTIVE_SQL = "SELECT active FROM core_agent WHERE id = %s FOR SHARE"


def agent_acting(*, agent_id, lock: bool = False) -> bool:
    """Whether the agent ``agent_id`` may still act (a job queued in its name): it exists and is active.
    With ``lock``, inside the caller's transaction, see ``_AGENT_ACTIVE_SQL``."""
    if agent_id is None:
        return False
    if not lock:
        return Agent.objects.filter(pk=agent_id, active=True).exists()
    with connection.cursor() as cursor:
        cursor.execute(_AGENT_ACTIVE_SQL, [agent_id])
        row = cursor.fetchone()
    return bool(row and row[0])


def agent_get(*, space: Space, name: str) -> Agent:
    try:
        return Agent.objects.get(space=space, name=name)
    except Agent.DoesNotExist:
        raise NotFound(f"No agent {name!r} in space {space.slug!r}.", code="AGENT_NOT_FOUND") from None
