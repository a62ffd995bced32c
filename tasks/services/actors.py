"""Who performs a transition (an agent acting as its role, a human member of the space, the system)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from api.errors import Forbidden
from brain.services.thoughts import human_contributor
from core.models import Agent
from tasks.choices import HUMAN, SYSTEM


@dataclass(frozen=True)
class Actor:
    """Who performs a transition: an agent (acting as its role), the system, or a human user."""

    kind: str  # an agent role, "system" or "human"
    agent: Agent | None = None
    user: AbstractBaseUser | None = None

    @property
    def name(self) -> str:
        if self.agent is not None:
            return self.agent.name
        if self.user is not None:
            return self.user.get_username()
        return SYSTEM

    @property
    def contributor(self) -> tuple[str, str]:
        """(contributor_id, contributor_name) of the marker thought."""
        if self.agent is not None:
            return f"agent-{self.agent.name}", self.agent.name
        if self.user is not None:
            return human_contributor(self.user)
        return SYSTEM, "System"


def actor_resolve(
    *, space_id: int, agent: Agent | None = None, actor_user: AbstractBaseUser | None = None, as_system: bool = False
) -> Actor:
    """The actor of a call. Agents act as their token's role only; humans must belong to the space."""
    if sum([agent is not None, actor_user is not None, as_system]) != 1:
        raise ValueError("Give exactly one of agent=, actor_user=, as_system=True.")
    if agent is not None:
        if agent.space_id != space_id:
            raise Forbidden("This agent belongs to another space.", code="WRONG_SPACE")
        return Actor(kind=agent.role, agent=agent)
    if actor_user is not None:
        if not human_may_act(user=actor_user, space_id=space_id):
            raise Forbidden(
                f"User {actor_user.get_username()!r} is not a member of this task's space; only its members "
                "act as humans on its tasks.",
                code="HUMAN_NOT_MEMBER",
            )
        return Actor(kind=HUMAN, user=actor_user)
    return Actor(kind=SYSTEM)


def human_may_act(*, user: AbstractBaseUser, space_id: int) -> bool:
    """Active, logged-in users who are members of the space (superusers count as members everywhere)."""
    if not (user.is_authenticated and user.is_active):
        return False
    return bool(user.is_superuser) or user.colony_spaces.filter(pk=space_id).exists()
