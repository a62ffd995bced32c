"""Logging filter that keeps tokens out of logs: ``token=colr_AbCdEf...`` becomes ``token=colr_AbC…``,
whatever the parameter's case or percent-encoding, and any ``col_``/``colr_`` token is cut the same
way wherever it stands in a line.

Attached to Colony's console handler (``config.settings.LOGGING``) and, in ``CoreConfig.ready``, to
the access loggers of the servers Colony runs under (:data:`ACCESS_LOGGERS`), so a request line with
a URL token is masked whatever handler the server itself installs on its access logger.
"""

from __future__ import annotations

import logging
import re

#: Access loggers of the web servers Colony can run under: Django's runserver, uvicorn (also under
#: gunicorn's uvicorn workers), gunicorn, granian, hypercorn, daphne.
ACCESS_LOGGERS = (
    "django.server",
    "django.request",
    "uvicorn.access",
    "uvicorn.error",
    "gunicorn.access",
    "gunicorn.error",
    "granian.access",
    "hypercorn.access",
    "daphne.access",
)
KEEP_CHARS = 8  # "colr_AbC": enough to tell tokens apart (the stored prefix is longer), useless to replay
#: How agent tokens and read-only URL tokens begin (core.services makes them; this module is loaded
#: before the apps, so the prefixes live here).
TOKEN_PREFIX = "col_"  # noqa: S105 - a public token prefix
URL_TOKEN_PREFIX = "colr_"  # noqa: S105 - a public token prefix
TOKEN_PREFIXES = (TOKEN_PREFIX, URL_TOKEN_PREFIX)


def _any_spelling(word: str) -> str:
    """A pattern for ``word`` with each letter in either case or percent-encoded (``t``, ``T``, ``%74``, ``%54``)."""
    return "".join(f"(?:{re.escape(c)}|%{ord(c.lower()):02x}|%{ord(c.upper()):02x})" for c in word)


# Not inside a word, but right after a percent-escape (%22col_...) is a start too.
_START = r"(?:(?<![A-Za-z0-9_-])|(?<=%[0-9A-Fa-f]{2}))"
#: One pass over a line finds both kinds: ``token=value`` whatever the name's case or percent-encoding
#: (``%74oken=``, ``TOKEN%3D``; groups ``name`` and ``value``), or a Colony token anywhere (a header, a
#: path, a message): its prefix and the token_urlsafe characters, in that case only.
_TOKEN = re.compile(
    rf"(?P<name>{_START}(?i:{_any_spelling('token')}(?:=|%3D)))(?P<value>[^&;\s\"'#]+)"
    rf"|{_START}(?:{'|'.join(map(re.escape, TOKEN_PREFIXES))})[A-Za-z0-9_-]{{16,}}"
)


def _cut(match: re.Match) -> str:
    if match["name"] is not None:
        return match["name"] + match["value"][:KEEP_CHARS] + "…"
    return match[0][:KEEP_CHARS] + "…"


def mask_tokens(text: str) -> str:
    # Most lines hold no token: none of the pattern's fixed parts ("col", "token" in any case, a %-escape).
    if "%" not in text and "col" not in text and "oken" not in text.lower():
        return text
    return _TOKEN.sub(_cut, text)


class MaskUrlTokens(logging.Filter):
    """Rewrites the record's message with every token (``token=`` value, prefixed token) cut to its first characters."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the logger's problem, not ours
            return True
        masked = mask_tokens(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def install_access_log_masking() -> None:
    """Add the filter to every known access logger (idempotent)."""
    for name in ACCESS_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, MaskUrlTokens) for f in logger.filters):
            logger.addFilter(MaskUrlTokens())


class HealthProbeAnswerIsAWarning(logging.Filter):
    """``GET /api/v1/health`` answering 503 is the probe's answer (a part is down, or the workers are
    still starting), not a server error: Django's ``django.request`` logs every 5xx at ERROR, so each
    probe during a start or an outage added an ERROR line beside the health module's own warning
    naming the part. On that logger, this filter lowers such records to WARNING."""

    PATH = "/api/v1/health"

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if (
            record.levelno == logging.ERROR
            and getattr(record, "status_code", None) == 503
            and getattr(request, "path_info", None) == self.PATH  # under a SCRIPT_NAME prefix too
        ):
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True
