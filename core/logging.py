"""Logging filter that keeps URL tokens out of logs: ``token=colr_AbCdEf...`` becomes ``token=colr_AbC…``.

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
_TOKEN = re.compile(r"((?:[?&]|\b)token(?:=|%3D))([^&\s\"'#]+)", re.IGNORECASE)


def mask_tokens(text: str) -> str:
    return _TOKEN.sub(lambda m: m.group(1) + m.group(2)[:KEEP_CHARS] + "…", text)


class MaskUrlTokens(logging.Filter):
    """Rewrites the record's message with every ``token=`` value cut to its first characters."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string is the logger's problem, not ours
            return True
        if "token" in message.lower():
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
