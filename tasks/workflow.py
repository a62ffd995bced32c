"""The task workflow as data: one declarative table per task type (SPEC 3.2, seeds/002, seeds/003).

Nothing here touches the database. ``tasks.services.transitions`` evaluates these rules against a
locked task row; ``GET /api/v1/workflow`` serves them as they are written here.

Rule keys are ``from->to``, optionally qualified: ``from->to:<role>`` applies when the task's
*current role* is ``<role>``; ``any->to:<actor>`` applies to one actor (a role, ``system`` or
``human``). Lookup order for a task in state F asked to go to T by actor A, task role R:

    F->T:R,  F->T,  any->T:A,  any->T

The first key that exists decides, even if it then refuses: a role-specific rule is never bypassed
by the generic rule below it. No key at all means the transition is prohibited.

``any->T`` rules never apply from ``ANY_EXCLUDES_FROM`` (the terminal states) nor from T itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from api.text import one_line
from tasks.choices import ACTORS, HUMAN, RESTORE, SYSTEM, ApprovalMode, TaskStatus, TaskType

MQS = "memory_query_session"
MCI = "memory_contribution_id"
MEMORY_FIELDS = (MQS, MCI)

# DNA written by reviewers; sending a task back to rework wipes their verdicts so the next review
# starts clean.
REVIEW_VERDICT_FIELDS = ("review_verdict", "qa_review", "pdsa_review", "liaison_review")

# The blocked_* DNA fields: ``blocked_reason`` is written by the agent before blocking; restore
# clears every DNA key with this prefix.
BLOCKED_PREFIX = "blocked_"

# ``new_role`` value meaning "the role of the agent who performs the transition" (generic claims of
# a task whose role has no role-specific claim rule, e.g. an orchestrator task).
ACTOR_ROLE = "<actor>"
# ``new_role`` value meaning "the role named in DNA ``rework_target_role``" (complete->rework).
DNA_REWORK_TARGET = "<dna.rework_target_role>"

ANY = "any"
ANY_EXCLUDES_FROM = frozenset({TaskStatus.COMPLETE, TaskStatus.CANCELLED})

LOOKUP_ORDER = ("{from}->{to}:{role}", "{from}->{to}", "any->{to}:{actor}", "any->{to}")

AGENT_ROLES = ("pdsa", "dev", "qa", "liaison")


@dataclass(frozen=True)
class Rule:
    """One transition rule. Every property is checked by ``task_transition``; nothing else changes status."""

    actors: tuple[str, ...]
    require_role: str | None = None  # the task's current role must be this
    new_role: str | None = None  # role after the transition (None = unchanged)
    requires_dna: tuple[str, ...] = ()  # DNA keys that must hold a reference (see ``dna_reference_present``)
    clears_dna: tuple[str, ...] = ()  # DNA keys removed by the transition
    human_confirmation: bool = False  # a logged-in human must confirm (see approval modes)
    requires_dependencies_complete: bool = False  # every ``depends_on`` task is complete
    requires_parents: bool = False  # bugs: at least one parent task linked (``parent_ids``)
    requires_passing_tests: bool = False  # DNA test_pass_count == test_total_count > 0
    note: str = ""

    def as_data(self) -> dict:
        data = asdict(self)
        return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items()}


def _claims(from_status: str, *, extra_by_role: dict[str, tuple[str, ...]] | None = None) -> dict[str, Rule]:
    """``from->active`` claim rules: a generic fallback plus one per role (seeds/003)."""
    extra_by_role = extra_by_role or {}
    rules = {
        f"{from_status}->active": Rule(
            actors=AGENT_ROLES,
            new_role=ACTOR_ROLE,
            requires_dna=(MQS,),
            note="Fallback for a task whose role has no role-specific claim rule; the claimer's role becomes its role.",
        )
    }
    for role in AGENT_ROLES:
        rules[f"{from_status}->active:{role}"] = Rule(
            actors=(role,), require_role=role, requires_dna=(MQS, *extra_by_role.get(role, ()))
        )
    return rules


_BLOCK_AND_CANCEL = {
    "any->blocked": Rule(
        actors=("liaison", SYSTEM, "pdsa", "dev", "qa"),
        requires_dna=("blocked_reason",),
        note="Remembers the state, role and phase clock; 'restore' returns to exactly them.",
    ),
    f"blocked->{RESTORE}": Rule(
        actors=("liaison", SYSTEM),
        note="Back to the exact state and role the task was blocked in; clears the blocked_* fields.",
    ),
    "any->cancelled:liaison": Rule(actors=("liaison",), new_role="liaison", requires_dna=("abstract_ref",)),
    "any->cancelled:system": Rule(actors=(SYSTEM,), new_role="liaison"),
}

_TO_REWORK_CLEARS = (*MEMORY_FIELDS,)

TASK_RULES: dict[str, Rule] = {
    "backlog->pending": Rule(actors=("liaison", SYSTEM, "pdsa")),
    "pending->backlog": Rule(actors=("liaison", SYSTEM, "pdsa")),
    "pending->ready": Rule(actors=("liaison", SYSTEM, "pdsa"), new_role="pdsa", requires_dependencies_complete=True),
    **_claims("ready", extra_by_role={"dev": ("pdsa_ref",), "qa": ("pdsa_ref",)}),
    "active->review": Rule(actors=("dev",), require_role="dev", new_role="qa", requires_dna=(MCI,)),
    "active->review:liaison": Rule(actors=("liaison",), require_role="liaison", requires_dna=(MCI,)),
    "active->approval": Rule(actors=("pdsa",), require_role="pdsa", new_role="liaison", requires_dna=("pdsa_ref", MCI)),
    "active->testing:qa": Rule(
        actors=("qa",),
        require_role="qa",
        requires_dna=(MCI,),
        note="Not in SPEC 3.2's starting table: lets QA, who claimed an approved task to write tests, hand it on.",
    ),
    "approval->approved": Rule(actors=("liaison", HUMAN), new_role="qa", human_confirmation=True),
    "approval->complete": Rule(actors=("liaison",), human_confirmation=True, requires_dna=("abstract_ref",)),
    "approval->rework": Rule(
        actors=("liaison", HUMAN), new_role="pdsa", clears_dna=_TO_REWORK_CLEARS, human_confirmation=True
    ),
    "approved->active": Rule(actors=("qa",), require_role="qa", requires_dna=(MQS, "pdsa_ref")),
    "approved->testing": Rule(actors=("liaison", SYSTEM), new_role="qa"),
    "testing->active": Rule(actors=("qa",), require_role="qa", requires_dna=(MQS,)),
    "testing->ready": Rule(actors=("qa",), require_role="qa", new_role="dev"),
    **_claims("rework"),
    "review->complete": Rule(
        actors=("liaison",),
        require_role="liaison",
        human_confirmation=True,
        requires_dna=("abstract_ref",),
        requires_passing_tests=True,
    ),
    "review->rework": Rule(
        actors=("pdsa", "qa"), new_role="dev", clears_dna=(*_TO_REWORK_CLEARS, *REVIEW_VERDICT_FIELDS)
    ),
    "review->review:qa": Rule(actors=("qa",), require_role="qa", new_role="pdsa"),
    "review->review:pdsa": Rule(actors=("pdsa",), require_role="pdsa", new_role="liaison"),
    "complete->rework": Rule(
        actors=("liaison",),
        new_role=DNA_REWORK_TARGET,
        requires_dna=("rework_target_role",),
        clears_dna=_TO_REWORK_CLEARS,
    ),
    **_BLOCK_AND_CANCEL,
}

BUG_RULES: dict[str, Rule] = {
    "backlog->pending": Rule(actors=("liaison", SYSTEM, "pdsa")),
    "pending->backlog": Rule(actors=("liaison", SYSTEM, "pdsa")),
    "pending->ready": Rule(
        actors=("liaison", SYSTEM, "pdsa"),
        new_role="dev",
        note="Bugs go straight to dev; a bug must name the task(s) it was found in (parent_ids).",
        requires_dependencies_complete=True,
        requires_parents=True,
    ),
    "ready->active": Rule(actors=("dev",), require_role="dev", requires_dna=(MQS,)),
    "active->review": Rule(actors=("dev",), require_role="dev", new_role="qa", requires_dna=(MCI,)),
    "review->review:qa": Rule(actors=("qa",), require_role="qa", new_role="liaison"),
    "review->complete": Rule(
        actors=("liaison",), require_role="liaison", requires_dna=("abstract_ref",), requires_passing_tests=True
    ),
    "review->rework": Rule(
        actors=("pdsa", "qa", "liaison"),
        new_role="dev",
        clears_dna=(*_TO_REWORK_CLEARS, *REVIEW_VERDICT_FIELDS),
    ),
    "rework->active": Rule(actors=("dev",), require_role="dev", requires_dna=(MQS,)),
    "complete->rework": Rule(actors=("liaison",), new_role="dev", clears_dna=_TO_REWORK_CLEARS),
    **_BLOCK_AND_CANCEL,
}

WORKFLOW: dict[str, dict[str, Rule]] = {TaskType.TASK: TASK_RULES, TaskType.BUG: BUG_RULES}

# Approval modes (SPEC 3.4). Which human-confirmation rules a project's mode waives; a waived rule
# behaves as if it had no human confirmation (its actors may perform it alone).
#   manual        every human-confirmation rule needs a human.
#   semi          sending work back (approval->rework) is the liaison's call; passing a gate needs a human.
#   auto-approval additionally lets the liaison approve a design (approval->approved) alone; finishing
#                 work (approval->complete, review->complete) still needs a human.
#   autonomous    no human confirmation anywhere.
HUMAN_CONFIRMATION_WAIVED: dict[str, frozenset[str] | None] = {
    ApprovalMode.MANUAL: frozenset(),
    ApprovalMode.SEMI: frozenset({"approval->rework"}),
    ApprovalMode.AUTO_APPROVAL: frozenset({"approval->rework", "approval->approved"}),
    ApprovalMode.AUTONOMOUS: None,  # None = every rule waived
}

# DNA keys only the engine or a human may write: agents can't fake a confirmation or a remembered
# blocked state through update-dna. Any key starting with ``human_`` is protected too.
PROTECTED_DNA_KEYS = frozenset(
    {"blocked_from_state", "blocked_from_role", "blocked_at", "blocked_by", "parent_ids", "depends_on"}
)
PROTECTED_DNA_PREFIXES = ("human_",)


@dataclass(frozen=True)
class Resolved:
    key: str
    rule: Rule


def rule_keys(*, from_status: str, to: str, role: str, actor: str) -> list[str]:
    """Candidate keys in lookup order (SPEC 3.2)."""
    keys = []
    if role:
        keys.append(f"{from_status}->{to}:{role}")
    keys.append(f"{from_status}->{to}")
    if from_status not in ANY_EXCLUDES_FROM and from_status != to and to != RESTORE:
        keys += [f"{ANY}->{to}:{actor}", f"{ANY}->{to}"]
    return keys


def rule_lookup(*, task_type: str, from_status: str, to: str, role: str, actor: str) -> Resolved | None:
    """The rule deciding ``from_status -> to`` for this actor and task role, or None (prohibited)."""
    table = WORKFLOW[task_type]
    for key in rule_keys(from_status=from_status, to=to, role=role, actor=actor):
        if key in table:
            return Resolved(key=key, rule=table[key])
    return None


def human_confirmation_needed(*, rule_key: str, rule: Rule, approval_mode: str) -> bool:
    if not rule.human_confirmation:
        return False
    waived = HUMAN_CONFIRMATION_WAIVED[approval_mode]
    return waived is not None and rule_key not in waived


def targets_from(*, task_type: str, from_status: str) -> list[str]:
    """Every target some rule could allow from ``from_status`` (for listing what may happen next)."""
    targets: list[str] = []
    for key in WORKFLOW[task_type]:
        source, rest = key.split("->", 1)
        target = rest.split(":", 1)[0]
        applies = source == from_status or (
            source == ANY and from_status not in ANY_EXCLUDES_FROM and from_status != target
        )
        if applies and target not in targets:
            targets.append(target)
    return targets


def dna_reference_present(value) -> bool:
    """Whether ``value`` satisfies a rule's ``requires_dna``: a string with a visible character. Spaces,
    invisible controls, ``false``, ``0``, lists and objects name no design, abstract or reason."""
    return isinstance(value, str) and one_line(value) != ""


def is_protected_dna_key(key: str) -> bool:
    return key in PROTECTED_DNA_KEYS or key.startswith(PROTECTED_DNA_PREFIXES)


def workflow_as_data() -> dict:
    """The whole table as JSON-ready data (``GET /api/v1/workflow``)."""
    return {
        "lookup_order": list(LOOKUP_ORDER),
        "any_excludes_from": sorted(ANY_EXCLUDES_FROM),
        "statuses": list(TaskStatus.values),
        "restore": RESTORE,
        "actors": list(ACTORS),
        "types": {
            task_type: {key: rule.as_data() for key, rule in rules.items()} for task_type, rules in WORKFLOW.items()
        },
        "approval_modes": {
            mode: ("all" if waived is None else sorted(waived)) for mode, waived in HUMAN_CONFIRMATION_WAIVED.items()
        },
        "protected_dna_keys": sorted(PROTECTED_DNA_KEYS),
        "protected_dna_prefixes": list(PROTECTED_DNA_PREFIXES),
        "memory_gates": {
            MQS: "a session in which the acting agent queried the brain after the task entered its current state",
            MCI: "a thought the acting agent contributed after the task entered its current (active) state; "
            "transition markers don't count",
        },
        "special_roles": {
            ACTOR_ROLE: "the role of the acting agent",
            DNA_REWORK_TARGET: "the role named in DNA rework_target_role",
        },
    }
