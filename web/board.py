"""Shaping task lists for the board: columns per status, open confirmations per target, DNA split.

Presentation only — which tasks exist and what may happen to them comes from ``tasks``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db.models import Count, F, QuerySet, Window
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Left, RowNumber

from tasks.choices import TaskStatus

#: Columns left to right in the order work flows.
BOARD_ORDER = (
    TaskStatus.BACKLOG,
    TaskStatus.PENDING,
    TaskStatus.READY,
    TaskStatus.ACTIVE,
    TaskStatus.APPROVAL,
    TaskStatus.APPROVED,
    TaskStatus.TESTING,
    TaskStatus.REVIEW,
    TaskStatus.REWORK,
    TaskStatus.BLOCKED,
    TaskStatus.COMPLETE,
    TaskStatus.CANCELLED,
)
TERMINAL = frozenset({TaskStatus.COMPLETE, TaskStatus.CANCELLED})
#: Cards drawn per column, newest change first; the rest is counted (a board of thousands of
#: finished tasks stays fast, and a human narrows it with the filters).
COLUMN_CARDS = 25
#: What a card shows; description and the rest of the DNA stay in the database.
CARD_FIELDS = ("id", "slug", "title", "type", "status", "role", "status_changed_at", "created_at", "project__slug")
#: A card (and the home page's in-flight list) shows this much of a blocked task's reason; its page the
#: whole DNA. Any agent may block any task with up to 100,000 characters of reason, and the board is
#: refreshed every few seconds by every human watching it.
BLOCKED_REASON_SHOWN = 300


def blocked_reason_shown():
    """A task's ``blocked_reason`` cut to one character more than :data:`BLOCKED_REASON_SHOWN` in SQL
    (the template's ``truncatechars`` then says it was cut)."""
    return Left(KeyTextTransform("blocked_reason", "dna"), BLOCKED_REASON_SHOWN + 1)


@dataclass
class Column:
    status: str
    tasks: list = field(default_factory=list)
    count: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def collapsed(self) -> bool:
        """Terminal columns start folded (they only grow); so does any empty column."""
        return self.terminal or self.count == 0

    @property
    def hidden_count(self) -> int:
        return self.count - len(self.tasks)


def board_columns(tasks: QuerySet, *, cards: int = COLUMN_CARDS) -> list[Column]:
    """One column per status in workflow order, from the tasks selector's (filtered) queryset.

    Two queries whatever the number of tasks: the count per status, and the newest ``cards`` tasks
    of each status (a window function), with only what a card shows.
    """
    tasks = tasks.prefetch_related(None)
    counts = dict(tasks.order_by().values_list("status").annotate(n=Count("id")))
    shown = (
        tasks.only(*CARD_FIELDS)
        .annotate(
            blocked_reason=blocked_reason_shown(),
            column_rank=Window(RowNumber(), partition_by=[F("status")], order_by=[F("updated_at").desc(), F("slug")]),
        )
        .filter(column_rank__lte=cards)
    )
    columns = {status: Column(status=status, count=counts.get(status, 0)) for status in BOARD_ORDER}
    for task in shown:
        columns[task.status].tasks.append(task)
    return list(columns.values())


def confirmations_by_target(confirmations: Iterable) -> dict[str, object]:
    """The first open confirmation per target status."""
    out: dict[str, object] = {}
    for confirmation in confirmations:
        out.setdefault(confirmation.to_status, confirmation)
    return out


def dna_split(dna: dict, *, is_gate_key: Callable[[str], bool]) -> tuple[dict, dict]:
    """(what a human may edit, the gate keys shown read-only)."""
    editable = {k: v for k, v in dna.items() if not is_gate_key(k)}
    gate = {k: v for k, v in dna.items() if is_gate_key(k)}
    return editable, gate
