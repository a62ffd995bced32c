"""``GET /api/v1/thoughts``: the thoughts of a space, newest first, filtered and paginated."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db.models import Q, QuerySet

from api.paging import order_by
from brain.models import Thought, thought_defer_bulky
from core.models import Space

#: The list's order, newest first; unique as a whole, so it is also the paging cursor's key (api.paging).
THOUGHT_LIST_ORDER = (("created_at", True, datetime), ("id", True, uuid.UUID))


def thought_list(
    *,
    space: Space,
    topic: str | None = None,
    category: str | None = None,
    contributor: str | None = None,
    since: datetime | None = None,
    superseded: bool | None = None,
) -> QuerySet[Thought]:
    """Thoughts of ``space`` only, newest first. ``contributor`` is the agent's registered name
    (or, for thoughts without an agent such as imports, the stored contributor name)."""
    qs = Thought.objects.filter(space=space).select_related("agent").defer(*thought_defer_bulky(""))
    if topic:
        qs = qs.filter(topic=topic)
    if category:
        qs = qs.filter(thought_category=category)
    if contributor:
        qs = qs.filter(Q(agent__name=contributor) | Q(agent__isnull=True, contributor_name=contributor))
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if superseded is not None:
        qs = qs.filter(superseded=superseded)
    return qs.order_by(*order_by(THOUGHT_LIST_ORDER))
