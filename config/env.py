"""The one typed reader for Colony's settings.

Every setting Colony reads from the environment goes through :func:`env`, which casts the raw
string to the type of its default and says clearly what was wrong when a value can't be read.
The README lists every variable read here.
"""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T", str, int, float, bool, list)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ImproperSetting(ValueError):
    """An environment variable holds a value that can't be read as its setting's type."""


def env(name: str, default: T) -> T:
    """Read ``name`` from the environment, cast to the type of ``default``.

    Lists are comma-separated; booleans accept 1/0, true/false, yes/no, on/off.
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    raw = raw.strip()
    try:
        if isinstance(default, bool):
            lowered = raw.lower()
            if lowered in _TRUE:
                return True  # type: ignore[return-value]
            if lowered in _FALSE:
                return False  # type: ignore[return-value]
            raise ValueError(raw)
        if isinstance(default, int):
            return int(raw)  # type: ignore[return-value]
        if isinstance(default, float):
            return float(raw)  # type: ignore[return-value]
        if isinstance(default, list):
            return [item.strip() for item in raw.split(",") if item.strip()]  # type: ignore[return-value]
        return raw  # type: ignore[return-value]
    except ValueError:
        kind = type(default).__name__
        raise ImproperSetting(
            f"Environment variable {name}={raw!r} is not a valid {kind}; "
            f"unset it to use the default ({default!r}) or give a {kind}."
        ) from None
