"""The ``Idempotency-Key`` request header and the ``Idempotent-Replayed`` response header, as the
schema states them for each operation that takes a key (the import, the memory call;
``brain.services.receipts`` keeps the answers)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from brain.services.receipts import IDEMPOTENCY_HEADER, KEY_MAX_LENGTH, REPLAYED_HEADER


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
            f"{what} is a 409 `IDEMPOTENCY_KEY_REUSED`. A refused {what} leaves its key free. Keys are per space, "
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
