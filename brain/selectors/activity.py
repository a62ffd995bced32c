"""Reads about how the brain is used: highways, sessions, first calls (SPEC 2.6).

Pending correction suggestions are read in ``brain.services.suggestions``, their one home."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db.models import BigIntegerField, F, Func, IntegerField
from django.db.models.functions import Cast

from brain.choices import QualityFlag
from brain.models import QueryLog, Thought
from brain.ranking import Candidate
from core.models import Agent, Space

#: A highway: a thought at least this often accessed ...
HIGHWAY_MIN_ACCESS = 3
#: ... by at least this many distinct agents (identities: ``Thought.accessed_by`` holds ids).
#: traffic = access_count × agents.
HIGHWAY_MIN_AGENTS = 2
#: "Nearby": a highway among the thoughts the query's own search fetched (its dense and lexical
#: candidates, before the page is cut) that is at least this similar to the query. No query of its
#: own: the search already read these rows, and no index on access_count is needed, which keeps
#: every reinforcement UPDATE a HOT update (no new HNSW entry per access; migration 0009).
HIGHWAY_MIN_SIMILARITY = 0.3
HIGHWAYS_RETURNED = 5


def _agents_count():
    return Func(F("accessed_by"), function="cardinality", output_field=IntegerField())


def _highways(space: Space):
    return (
        Thought.objects.filter(space=space, access_count__gte=HIGHWAY_MIN_ACCESS, superseded=False)
        .exclude(quality_flags__contains=[QualityFlag.CONTRADICTS_CORRECTION.value])
        .annotate(agents=_agents_count())
        .filter(agents__gte=HIGHWAY_MIN_AGENTS)
        # In bigint: access_count goes up to COUNTER_MAX (1e9), so the product overflows an integer.
        .annotate(traffic=Cast("access_count", BigIntegerField()) * F("agents"))
        .only("id", "content", "access_count", "accessed_by")
    )


def _highway(thought: Thought) -> dict:
    return {
        "thought_id": str(thought.id),
        "content_preview": thought.content[:80],
        "access_count": thought.access_count,
        "agents": thought.agents,
        "traffic": thought.traffic,
    }


def highways_among(
    candidates: Iterable[Candidate], *, accessed_ids: set[str], agent_id: str, limit: int = HIGHWAYS_RETURNED
) -> list[dict]:
    """Heavily travelled live thoughts (SPEC 2.6) among a search's candidates: the most agents first,
    then the most traffic (one agent's many accesses don't outrank several agents' use).

    A superseded thought is never one: the traffic a fact earned before it was corrected, replaced or
    retracted would send agents back to it. Nor is a live repeat of a corrected fact (flagged
    ``contradicts_correction``): its traffic would advertise the wrong fact as the team's most used.
    Agents are counted by identity (``accessed_by`` holds their ids: a renamed agent is one agent). The
    agent asking (``agent_id``, as text) and the thought's author are not counted towards
    HIGHWAY_MIN_AGENTS: a highway shown to it is one at least that many agents other than the reader and
    the author used (an author's own traffic, or teammates' session starts it steered its text to, is no
    vote for itself). Each carries its ``contributor``, as sources do.

    The candidates were read before this call's own reinforcement: those in ``accessed_ids`` (the
    results it returned, and so reinforced) count one more access, by ``agent_id``.
    """
    highways = []
    for candidate in candidates:
        thought = candidate.thought
        if candidate.similarity is None or candidate.similarity < HIGHWAY_MIN_SIMILARITY or thought.superseded:
            continue
        if QualityFlag.CONTRADICTS_CORRECTION in (thought.quality_flags or []):
            continue
        access_count, agents = thought.access_count, set(thought.accessed_by or [])
        if candidate.id in accessed_ids:
            access_count += 1
            agents.add(agent_id)
        # The agent being answered doesn't vouch for its own answer: other agents must have used it
        # (one agent's traffic plus the reader's first look would otherwise make a highway).
        voters = agents - {agent_id, str(thought.agent_id)}
        if access_count < HIGHWAY_MIN_ACCESS or len(voters) < HIGHWAY_MIN_AGENTS:
            continue
        highways.append(
            {
                "thought_id": candidate.id,
                "content_preview": thought.content[:80],
                "contributor": thought.contributor,
                "access_count": access_count,
                "agents": len(agents),
                "traffic": access_count * len(agents),
                "similarity": round(candidate.similarity, 4),
            }
        )
    highways.sort(key=lambda h: (-h["agents"], -h["traffic"], -h["similarity"]))
    return highways[:limit]


# --- who accessed a thought: ``Thought.accessed_by`` holds agents' ids, shown and exported by name ---


def _agent_ids(entries: Iterable[str]) -> list[uuid.UUID]:
    ids = []
    for entry in entries:
        try:
            ids.append(uuid.UUID(entry))
        except (TypeError, ValueError):
            continue  # a name no agent had when it was mapped (history), shown as it is
    return ids


def agent_names_by_id(*, space_id: int, entries: Iterable[str] | None = None) -> dict[str, str]:
    """{agent id as text: its name now} of the agents of the space (only those in ``entries``, when
    given): what :func:`accessed_by_named` shows ``accessed_by`` entries as. One query."""
    agents = Agent.objects.filter(space_id=space_id)
    if entries is not None:
        agents = agents.filter(pk__in=_agent_ids(entries))
    return {str(pk): name for pk, name in agents.values_list("pk", "name")}


def accessed_by_named(entries: Iterable[str], names: dict[str, str]) -> list[str]:
    """``accessed_by`` as names: each agent's name now (``names``, from :func:`agent_names_by_id`); an
    entry that is no agent of the space (a name from history, a deleted agent's id) as it is."""
    return [names.get(entry, entry) for entry in entries]


def accessed_by_ids(entries: Iterable[str], ids: dict[str, str]) -> list[str]:
    """What an import stores as ``accessed_by`` from the names a file gives: each name of an agent of the
    space its id (``ids``: {name: id as text}), any other entry as it is, each once, in order."""
    return list(dict.fromkeys(ids.get(entry, entry) for entry in entries))


def thought_highways(*, space: Space, limit: int = 20) -> list[dict]:
    """The space's highways regardless of any query (CLI, pages)."""
    return [_highway(thought) for thought in _highways(space).order_by("-traffic", "-created_at")[:limit]]


# --- the brain as evidence for the task workflow's memory gates (tasks.services.gates) ---


def agent_session_query_times(*, space_id: int, agent: Agent, session_id: str) -> tuple[bool, datetime | None]:
    """Did ``agent`` query the brain in session ``session_id`` of the space at all, and when was the
    latest of those queries? Returned as (queried, latest) for the caller to compare with a moment."""
    latest = (
        QueryLog.objects.filter(space_id=space_id, agent=agent, session_id=session_id)
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    return latest is not None, latest


def thought_contribution_get(*, space_id: int, thought_id: uuid.UUID) -> Thought | None:
    """The few facts the memory gate checks about a claimed contribution (author, time, category, flags,
    whether an import stored it)."""
    return (
        Thought.objects.filter(pk=thought_id, space_id=space_id)
        .only("id", "agent_id", "created_at", "thought_category", "quality_flags", "context_metadata")
        .first()
    )
