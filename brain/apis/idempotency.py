"""The ``Idempotency-Key`` request header and the ``Idempotent-Replayed`` response header for each
operation that takes a key (the import, the memory call, a thought's correction): how the schema states
them, and the response a keyed request gets (``brain.services.receipts`` keeps the answers)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.renderers import JSONRenderer

from api.responses import ResponseThenWork
from api.schema import ERROR_DESCRIPTIONS, error_responses
from brain.services.receipts import IDEMPOTENCY_HEADER, KEY_MAX_LENGTH, REPLAYED_HEADER, answer_once, key_clean


def request_key(request) -> str | None:
    """The request's Idempotency-Key, None without one; a 400 when it can't be a key."""
    return key_clean(request.headers.get(IDEMPOTENCY_HEADER))


def answered_once(
    request,
    *,
    key: str | None,
    fingerprint: str,
    run: Callable[[], tuple[int, Any]],
    after: list[Callable[[], Any]] | None = None,
) -> ResponseThenWork:
    """``run()`` (status, body) once per key of the calling agent, or the answer kept for the key, marked
    ``Idempotent-Replayed: true``; without a key, ``run()`` as it is. The body is kept as the wire carries
    it (UUIDs and dates as strings). ``after``: work for after the answer (none on a replay), which ``run``
    fills; ``run`` may be called again after a deadlock (``answer_once``), so each call starts it empty."""
    after = after if after is not None else []

    def wire() -> tuple[int, Any]:
        after.clear()  # what a rolled-back attempt left to do is not to be done
        status, body = run()
        return status, json.loads(JSONRenderer().render(body))

    status, body, replayed = answer_once(agent=request.user, key=key, fingerprint=fingerprint, run=wire)
    response = ResponseThenWork(body, after=after, status=status)
    if replayed:
        response[REPLAYED_HEADER] = "true"
    return response


#: The 409 of an operation that takes a key: the usual conflicts, and a key sent earlier with another request.
KEY_CONFLICT_RESPONSES = error_responses(
    409,
    e409=f"{ERROR_DESCRIPTIONS[409]} `IDEMPOTENCY_KEY_REUSED`: the Idempotency-Key was sent earlier with other "
    "fields (send a new key).",
)


def idempotency_parameters(*, what: str, success: int, replayed_skips: str) -> list[OpenApiParameter]:
    """The two headers of an operation whose ``what`` ("batch", "call") a key names; ``success`` is the
    status a replay answers with; ``replayed_skips`` says what a replayed request did not do."""
    return [
        OpenApiParameter(
            IDEMPOTENCY_HEADER,
            OpenApiTypes.STR,
            OpenApiParameter.HEADER,
            required=False,
            pattern=f"^[!-~]{{1,{KEY_MAX_LENGTH}}}$",
            description=f"Your own unique string for this {what} (a UUID), to retry it safely. The {what} sent "
            f"again with the same key is answered with the first response and stored once; the key with another "
            f"{what} is a 409 `IDEMPOTENCY_KEY_REUSED`. A refused {what} leaves its key free. Keys are per agent, "
            "kept `IMPORT_RECEIPT_HOURS` (24 by default).",
        ),
        OpenApiParameter(
            REPLAYED_HEADER,
            OpenApiTypes.STR,
            OpenApiParameter.HEADER,
            response=[success],
            enum=["true"],
            description="Present when this is the stored response of an earlier request with the same "
            f"Idempotency-Key ({replayed_skips} by this one).",
        ),
    ]
