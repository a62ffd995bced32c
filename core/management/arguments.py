"""What the management commands check in their arguments before they act."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from api.parsers import SURROGATE_MESSAGE, printable, text_problem


def arguments_refuse_unstorable(options: dict[str, Any]) -> None:
    """Raise CommandError naming the first text argument (a string, or a string of a list) that PostgreSQL
    can't store. A byte that is not UTF-8 in an argument (a Latin-1 terminal, ``$'\\xff'``) reaches Python
    as a lone surrogate (surrogateescape), which psycopg can't encode. Paths (``type=Path``) are not text
    and are not checked: a file name may hold any bytes."""
    for name, value in options.items():
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str):
                continue
            problem = text_problem(item)
            if problem == SURROGATE_MESSAGE:
                raise CommandError(
                    f"The argument {name} is not UTF-8 text: {printable(item)!r}. Set the terminal to UTF-8 "
                    "and type it again."
                )
            if problem:
                raise CommandError(f"The argument {name}: {problem}")
