"""The state of one memory call, filled in step by step (see :mod:`brain.services.memory.steps`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from brain.choices import ThoughtCategory, ThoughtType
from brain.models import QueryLog, Thought
from brain.ranking import Candidate
from brain.selectors import search
from core.models import Agent, Space


@dataclass
class MemoryCall:
    """Everything one memory call knows, filled in step by step."""

    agent: Agent
    space: Space
    request: dict[str, Any]
    # A read-only URL token's call (SPEC 6): it retrieves and writes nothing (no query-log row, so no
    # reinforcement and no memory-gate evidence) and reads no pending corrections.
    read_only: bool = False
    session_id: str = ""
    new_session: bool = False
    lineage_ids: list[uuid.UUID] = field(default_factory=list)
    threshold_met: bool = False
    contribute: bool = False
    bypass: str | None = None  # why the threshold did not apply: refines | consolidates | correction
    vector: list[float] | None = None
    flags: list[str] = field(default_factory=list)  # advisory quality flags of the contribution
    nearest: tuple[Thought, float] | None = None  # the most similar existing thought, before storing
    contradicted_by: Thought | None = None  # the correction whose wrong fact the contribution repeats
    superseded_count: int | None = None  # set when the contribution is a correction
    thought: Thought | None = None
    # The live thought that already says what the prompt says (same text once normalised): the call
    # stored nothing and reinforces it instead (step_contribute, step_reinforce).
    known_id: uuid.UUID | None = None
    search: search.SearchResult | None = None
    query_log: QueryLog | None = None
    first_query: bool = False  # the agent's first memory call in this space (onboarding)
    suggestions_pending: bool = True  # step_reinforce's statement says whether any concerns this call
    disambiguation: dict | None = None
    highways: list[dict] = field(default_factory=list)
    pending_corrections: list[dict] = field(default_factory=list)
    lineage_summary: dict | None = None
    guidance: list[str] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    # Work the answer does not depend on (reinforcing what was returned, implicit feedback, sending
    # the contradiction check), run after the response is sent when the caller can (see
    # brain.services.memory.memory_run).
    after_response: list[Callable[[], Any]] = field(default_factory=list)

    @property
    def prompt(self) -> str:
        return self.request["prompt"].strip()

    @property
    def sources(self) -> list[Candidate]:
        return self.search.candidates if self.search else []

    @property
    def thought_type(self) -> str:
        if self.request.get("refines") is not None:
            return ThoughtType.REFINEMENT
        if self.request.get("consolidates") is not None:
            return ThoughtType.CONSOLIDATION
        return ThoughtType.ORIGINAL

    @property
    def agent_ref(self) -> str:
        return self.request.get("agent_id") or self.agent.name

    @property
    def contributor(self) -> dict[str, str]:
        """Who others see as the contributor: always the token's agent, by its registered name. The
        body's ``agent_id``/``agent_name`` are only kept as metadata (an agent can't pose as another)."""
        return {"contributor_id": self.agent.name, "contributor_name": self.agent.name}

    @property
    def category(self) -> str:
        return self.request.get("thought_category") or ThoughtCategory.UNCATEGORIZED

    @property
    def is_correction(self) -> bool:
        return self.category == ThoughtCategory.CORRECTION
