"""The one typed reader for Colony's settings.

Every setting Colony reads from the environment goes through :func:`env`, which casts the raw
string to the type of its default and says clearly what was wrong when a value can't be read.
docs/configuration.md lists every variable read here.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T", str, int, float, bool, list)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ImproperSetting(ImproperlyConfigured, ValueError):
    """A setting Colony can't use. Its message is one sentence that says what to fix.

    It is an ``ImproperlyConfigured``, so ``manage.py`` and ``make run`` can report it without
    importing Colony's own modules (whose import is what raises it).
    """


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _range(low: float | None, high: float | None, above: float | None) -> str:
    """The range the bounds allow, as a message says it: ``from 1 to 36500``, ``more than 0 and at most 10240``."""
    if low is not None and high is not None and above is None:
        return f"from {low} to {high}"
    lower = f"more than {above}" if above is not None else f"at least {low}" if low is not None else None
    return " and ".join(part for part in (lower, f"at most {high}" if high is not None else None) if part)


def env(
    name: str,
    default: T,
    *,
    min: float | None = None,
    max: float | None = None,
    above: float | None = None,
) -> T:
    """Read ``name`` from the environment, cast to the type of ``default``.

    Lists are comma-separated; booleans accept 1/0, true/false, yes/no, on/off. An int is ASCII digits
    with an optional sign (``1_000`` or ``٣٠`` is not one: they are not what an operator reads), a float
    is ASCII without ``_``, finite. A number read from the environment must lie within ``min``..``max``
    (inclusive) and be more than ``above``: a value the code can't use (a negative retention, days past
    the calendar, a body size whose bytes overflow) stops the start, naming the variable and its range.
    """
    raw = os.environ.get(name)
    if raw is None:
        return default
    raw = raw.strip()
    value = _read(name, raw, default)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        below = (min is not None and value < min) or (above is not None and value <= above)
        if below or (max is not None and value > max):
            raise ImproperSetting(
                f"Environment variable {name}={raw!r} is out of range: it must be {_range(min, max, above)}; "
                f"unset it to use the default ({default!r}) or give a value in that range."
            )
    return value


def _read(name: str, raw: str, default: T) -> T:
    """``raw`` cast to the type of ``default``, or one sentence naming ``name`` and what to give."""
    try:
        if isinstance(default, bool):
            lowered = raw.lower()
            if lowered in _TRUE:
                return True  # type: ignore[return-value]
            if lowered in _FALSE:
                return False  # type: ignore[return-value]
            raise ValueError(raw)
        if isinstance(default, int):
            if not _INTEGER.fullmatch(raw):  # int() also reads "1_000" and non-ASCII digits
                raise ValueError(raw)
            return int(raw)  # type: ignore[return-value]
        if isinstance(default, float):
            if not raw.isascii() or "_" in raw:  # float() also reads "1_0.5" and non-ASCII digits
                raise ValueError(raw)
            value = float(raw)
            if not math.isfinite(value):  # "nan", "inf": every later comparison or int() of it breaks
                raise ValueError(raw)
            return value  # type: ignore[return-value]
        if isinstance(default, list):
            return [item.strip() for item in raw.split(",") if item.strip()]  # type: ignore[return-value]
        return raw  # type: ignore[return-value]
    except ValueError:
        kind = type(default).__name__
        article = "an" if kind[0] in "aeiou" else "a"
        raise ImproperSetting(
            f"Environment variable {name}={raw!r} is not a valid {kind}; "
            f"unset it to use the default ({default!r}) or give {article} {kind}."
        ) from None


def ensure_writable_dir(path: Path, name: str) -> Path:
    """Create ``path`` if needed and prove it can be written, or say which setting to fix."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ImproperSetting(
            f"{name}={str(path)!r} can't be written ({exc.strerror or exc}); "
            f"fix its permissions or set {name} to a writable folder."
        ) from None
    return path


def secret_key_file(path: Path) -> str:
    """The secret key kept in ``path``, generated there first if it is missing.

    The key is written to an owner-only temporary file (``mkstemp``: mode 0600) and linked into place,
    which fails if the file exists: no one else can ever read it, and processes starting at once all
    read the one whole key that was linked first.
    """
    if not path.exists():
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".secret_key-")
        try:
            with os.fdopen(handle, "w") as file:
                file.write(secrets.token_urlsafe(50))
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass  # another process linked its key first: everyone uses that one
        finally:
            os.unlink(temporary)
    return path.read_text().strip()


#: ``N/period`` as DRF's throttles read it (N at least 1), or a word that turns throttling off.
_RATE = re.compile(r"^[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)$")
RATE_OFF = frozenset({"", "off", "0", "none"})


def check_rate(name: str, value: str) -> str:
    """A request rate setting (``3000/min``; ``off``), or one sentence saying what to fix."""
    if value.strip().lower() in RATE_OFF or _RATE.match(value.strip().lower()):
        return value
    raise ImproperSetting(
        f"{name}={value!r} is not a rate: give requests per period as N/s, N/min, N/hour or N/day with N at "
        "least 1 (3000/min), or off."
    )


def url_without_password(url: str) -> str:
    """``url`` as it may be printed or logged: its password (``redis://:secret@host``) as ``***``."""
    parsed = urlparse(url)
    if not parsed.password:
        return url
    user = parsed.username or ""
    host = parsed.netloc.rsplit("@", 1)[1]
    return parsed._replace(netloc=f"{user}:***@{host}").geturl()


def check_redis_url(url: str) -> str:
    """A Redis URL Celery and redis-py accept, or one sentence saying what to fix (without its password)."""
    parsed = urlparse(url)
    shown = url_without_password(url) if "@" in url else url
    if parsed.scheme not in {"redis", "rediss", "unix"}:
        raise ImproperSetting(
            f"REDIS_URL must look like redis://host:6379/0 (got {shown!r}); fix it or unset it for the local default."
        )
    try:
        parsed.port  # noqa: B018 - raises ValueError on a non-numeric port
    except ValueError:
        raise ImproperSetting(f"REDIS_URL {shown!r} has a port that is not a number; fix it (redis://host:6379/0).")
    if parsed.scheme != "unix" and not parsed.hostname:
        raise ImproperSetting(f"REDIS_URL {shown!r} names no host; fix it (redis://host:6379/0).")
    return url
