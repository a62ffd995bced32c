"""Keyset paging for the API's lists: a page after a cursor, not after a count of rows.

With offset paging, a list that changes while an agent pages through it moves rows across pages: a
thought contributed meanwhile pushes every row down by one (the next page repeats the last row of
the one before), and a row that leaves the filter (a thought superseded while paging
``superseded=false``) pulls every row up by one (the next page skips a row the agent never saw). A
cursor names the last row a page ended on, by the list's own order, so the next page starts right
after it whatever was added or removed meanwhile.

A list declares its order as ``[(field, descending, type), ...]``, unique as a whole (its last field is
the primary key), and :func:`page_after` returns one page and the cursor of the next. The cursor is
opaque to clients: base64url of a JSON array of the last row's values of those fields, read back by
the types the order declares (a cursor never chooses how it is read).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce
from operator import or_
from typing import Any

from django.core.validators import RegexValidator
from django.db.models import Q, QuerySet
from rest_framework import serializers

from api import fields as strict
from api.parsers import text_problem

#: A list's order: (field, descending, type) triples, most significant first; unique as a whole. The
#: type (datetime, uuid.UUID, bool or str) reads the field's value back from a cursor. A field may be
#: an annotation of the list's queryset (a bool that ranks some rows first).
Order = Sequence[tuple[str, bool, type]]

CURSOR_HELP = (
    "The next_cursor of the page before; omit it for the first page. Unlike offset, a cursor neither "
    "repeats nor skips rows when the list changes between pages."
)
CURSOR_MESSAGE = (
    "This is not a cursor this list gave. Send the next_cursor of the previous page unchanged, or omit "
    "cursor to start from the first page."
)
#: The largest UTC offset PostgreSQL reads in a timestamp.
MAX_UTC_OFFSET = timedelta(hours=15, minutes=59, seconds=59)
#: What a cursor looks like: base64url (its padding optional).
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+={0,2}$"
BOTH_MESSAGE = "Send cursor or offset, not both: next_cursor already says where the next page starts."


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _read(kind: type, text: str) -> Any:
    """One value of a cursor, as the database can compare it: a time with an offset PostgreSQL takes
    (Python reads offsets up to ±23:59:59.999999; PostgreSQL refuses one past ±15:59:59 or with a
    fraction of a second), text it can store."""
    if kind is datetime:
        value = datetime.fromisoformat(text)
        offset = value.utcoffset()
        if offset is None:
            raise ValueError("a cursor's time carries its offset")
        if offset.microseconds or abs(offset) > MAX_UTC_OFFSET:
            raise ValueError("a cursor's offset is one PostgreSQL can't read")
        return value
    if kind is uuid.UUID:
        return uuid.UUID(text)
    if kind is bool:
        if text not in ("true", "false"):
            raise ValueError("a cursor's flag is true or false")
        return text == "true"
    if kind is int:
        # ASCII digits only, as an int column compares them (Python's int() also reads "1_000" and "١٢").
        if not re.fullmatch(r"-?[0-9]{1,18}", text):
            raise ValueError("a cursor's number is a whole number")
        return int(text)
    problem = text_problem(text)
    if problem:
        raise ValueError(problem)
    return text


def encode(values: Sequence[Any]) -> str:
    """The cursor of a row whose order fields hold ``values``."""
    text = json.dumps([_text(value) for value in values], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode(cursor: str, order: Order) -> list[Any]:
    """The order fields' values a cursor holds; ValueError (saying what to send) when it is not one of
    :func:`encode`'s for this order."""
    try:
        texts = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not (isinstance(texts, list) and len(texts) == len(order) and all(isinstance(t, str) for t in texts)):
            raise ValueError("not a list of the order's values")
        return [_read(kind, text) for (_, _, kind), text in zip(order, texts, strict=True)]
    except (binascii.Error, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(CURSOR_MESSAGE) from exc


def _after(order: Order, values: Sequence[Any]) -> Q:
    """Rows strictly after ``values`` in ``order``: a keyset condition, one OR branch per field."""
    branches, equal = [], {}
    for (field, descending, _), value in zip(order, values, strict=True):
        branches.append(Q(**equal, **{f"{field}__{'lt' if descending else 'gt'}": value}))
        equal[field] = value
    return reduce(or_, branches)


def order_by(order: Order) -> list[str]:
    return [f"-{field}" if descending else field for field, descending, _ in order]


@dataclass(frozen=True)
class Newest:
    """The first rows of a list ordered newest first, and how many more there are."""

    items: list
    more: int  # rows past ``items``

    @property
    def total(self) -> int:
        return len(self.items) + self.more


def newest(queryset: QuerySet, limit: int) -> Newest:
    """The first ``limit`` rows of ``queryset`` (ordered newest first) and how many more: one statement
    reading ``limit + 1`` rows, and a count only when more follow. For lists agents can grow without end
    that a page or a detail shows whole otherwise (links, corrections, a task's transitions)."""
    items = list(queryset[: limit + 1])
    if len(items) <= limit:
        return Newest(items, 0)
    return Newest(items[:limit], queryset.count() - limit)


def page_after(
    qs: QuerySet,
    *,
    order: Order,
    cursor: list[Any] | None,
    limit: int,
    offset: int = 0,
    budget: tuple[Any, int] | None = None,
) -> tuple[list, str | None]:
    """One page of ``qs`` in ``order``, after ``cursor`` (decoded) when given, else after ``offset``
    rows, and the next page's cursor (None on the last page). One statement: it reads ``limit + 1``
    rows to know whether more follow.

    ``budget`` (an expression of a row's size, the most a page holds) ends a page early when its rows
    would hold more (one row at least): the sizes are read first, then only the rows of the page, so a
    list whose rows agents can make large (a task's DNA) answers a bounded page and a cursor."""
    qs = qs.order_by(*order_by(order))
    if cursor is not None:
        qs = qs.filter(_after(order, cursor))
    if budget is not None:
        return _page_within(qs, order=order, limit=limit, offset=offset, budget=budget)
    rows = list(qs[offset : offset + limit + 1])
    page = rows[:limit]
    if len(rows) <= limit:
        return page, None
    last = page[-1]
    return page, encode([getattr(last, field) for field, _, _ in order])


def _page_within(
    qs: QuerySet, *, order: Order, limit: int, offset: int, budget: tuple[Any, int]
) -> tuple[list, str | None]:
    size, most = budget
    sizes = list(qs.annotate(_size=size).values_list("pk", "_size")[offset : offset + limit + 1])
    keys, total = [], 0
    for pk, row_size in sizes[:limit]:
        if keys and total + (row_size or 0) > most:
            break
        keys.append(pk)
        total += row_size or 0
    rows = {row.pk: row for row in qs.filter(pk__in=keys)}
    page = [rows[pk] for pk in keys if pk in rows]
    if len(sizes) <= len(keys) or not page:
        return page, None
    last = page[-1]
    return page, encode([getattr(last, field) for field, _, _ in order])


#: The largest ``offset`` a list takes: PostgreSQL reads every row before an offset, so a call with a
#: large one reads most of the list; a cursor starts right after a row, whatever the list's length.
OFFSET_MAX = 10_000


class OffsetField(strict.IntegerField):
    """A list's ``offset`` query parameter: 0 to :data:`OFFSET_MAX`; past it, a 400 saying to page by cursor."""

    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", OFFSET_MAX)
        kwargs.setdefault("default", 0)
        kwargs.setdefault("help_text", f"Rows to skip (at most {OFFSET_MAX}); cursor pages any further.")
        kwargs.setdefault(
            "error_messages",
            {
                "max_value": f"At most {OFFSET_MAX}: past that, page with cursor (send each page's next_cursor "
                "back), which reads only the page."
            },
        )
        super().__init__(**kwargs)


class CursorField(strict.CharField):
    """A list's ``cursor`` query parameter, decoded into the order fields' values (a 400 in the
    envelope, saying what to send, when it is not a cursor the list gave)."""

    def __init__(self, *, order: Order, **kwargs):
        self.order = order
        kwargs.setdefault("required", False)
        kwargs.setdefault("max_length", 1000)
        kwargs.setdefault("help_text", CURSOR_HELP)
        super().__init__(**kwargs)
        # The schema's pattern (drf-spectacular reads it off the validator); decoding is the real check.
        self.validators.append(RegexValidator(CURSOR_PATTERN, message=CURSOR_MESSAGE))

    def run_validation(self, data=serializers.empty):
        text = super().run_validation(data)  # the string checks and the pattern, on the string
        if not text:  # not given (or given empty: the first page)
            return None
        try:
            return decode(text, self.order)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


def no_cursor_with_offset(attrs: dict, given: Any) -> dict:
    """A list's serializer ``validate``: a 400 when a request sends both ``cursor`` and ``offset``
    (``given``: the request's query parameters); ``attrs`` unchanged otherwise."""
    if attrs.get("cursor") is not None and "offset" in given:
        raise serializers.ValidationError({"offset": [BOTH_MESSAGE]})
    return attrs
