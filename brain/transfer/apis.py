"""``POST /api/v1/thoughts/import``: a batch of thoughts in one request.

The body is a JSON array of thought objects (``Content-Type: application/json``) or one object per
line (``application/x-ndjson`` or ``application/jsonl``); the items carry the thought fields of
SPEC 2.1 by name. One request is one batch of at most ``IMPORT_BATCH_MAX_ITEMS`` (default 1000):
all of it is stored or nothing, and every bad line is reported (``error.lines``). The space is the
token's. It is an agent restoring its own thoughts (``ImportMode.AGENT``): the caller's identity,
dates no later than now, values in their formulas' ranges, no transition markers, new ids; see
``brain.transfer.serializers.ImportItemSerializer``. ``manage.py brain import`` is the operator's
full-fidelity restore.
"""

from __future__ import annotations

import json
import time

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.views import APIView

from api import fields as strict
from api.body_limit import LargeBody
from api.errors import ValidationFailed
from api.parsers import is_utf8, json_lines, json_loads_bounded
from api.schema import error_responses
from brain.apis.idempotency import answered_once, idempotency_parameters, request_key
from brain.services.receipts import body_fingerprint
from brain.transfer.serializers import ImportItemSerializer
from brain.transfer.services import ImportMode, LineError, import_batch_max, thoughts_import


class RawBodyParser(BaseParser):
    """Hands the view the raw bytes: the import parses lines itself, to report each bad line."""

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read() if stream is not None else b""


class ImportJsonParser(RawBodyParser):
    media_type = "application/json"


class ImportNdjsonParser(RawBodyParser):
    media_type = "application/x-ndjson"


class ImportJsonlParser(RawBodyParser):
    media_type = "application/jsonl"


def decode_body(body: bytes, charset: str | None = None) -> str:
    """The body as text: UTF-8 (a leading byte-order mark is not part of the JSON), or the charset its
    Content-Type names. Bytes that don't decode are a PARSE_ERROR naming the line: replaced by U+FFFD,
    a file saved as Windows-1252 would be stored with every accented letter lost, and nobody told."""
    encoding = "utf-8-sig" if is_utf8(charset) else charset
    try:
        return body.decode(encoding)
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        raise ValidationFailed(
            f"The body is not valid {charset or 'UTF-8'}: byte 0x{body[exc.start]:02x} on line {line} is not "
            "part of any character. Send the body encoded as UTF-8 (or name its charset in Content-Type, "
            "e.g. application/x-ndjson; charset=windows-1252).",
            code="PARSE_ERROR",
        ) from None


def parse_import_body(body: bytes, media_type: str, charset: str | None = None) -> tuple[list, list[LineError]]:
    """(items, parse errors): a JSON array, or one JSON object per non-empty line (None for a bad one)."""
    text = decode_body(body, charset)
    if "json" in media_type and "nd" not in media_type and "jsonl" not in media_type:
        try:
            data = json_loads_bounded(text)
        except json.JSONDecodeError as exc:
            raise ValidationFailed(
                f"The body is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}). Send a JSON "
                "array of thought objects, or one object per line with Content-Type: application/x-ndjson.",
                code="PARSE_ERROR",
            )
        if not isinstance(data, list):
            hint = _wrapped_list_hint(data)
            raise ValidationFailed(
                f"Send a JSON array of thought objects (or JSONL, one object per line).{hint}", code="VALIDATION_ERROR"
            )
        return data, []
    items, errors = [], []
    for number, line in enumerate((ln for ln in json_lines(text) if ln.strip()), start=1):
        try:
            items.append(json_loads_bounded(line))
        except json.JSONDecodeError as exc:
            items.append(None)
            errors.append(LineError(number, f"not valid JSON: {exc.msg} at column {exc.colno}."))
    return items, errors


class ImportResultSerializer(serializers.Serializer):
    imported = strict.IntegerField(help_text="Thoughts stored by this batch.")
    embedded = strict.IntegerField(help_text="How many of them were embedded on import (no vector given).")
    ids = serializers.ListField(child=strict.UUIDField(), help_text="Their ids, in the order of the batch.")
    id_map = serializers.DictField(
        child=strict.UUIDField(), help_text="{id given in the batch: id stored}, for the items that gave one."
    )
    batch_max_items = strict.IntegerField()
    seconds = serializers.FloatField()


def _wrapped_list_hint(data) -> str:
    """What to send when the body is an object that holds the list (Mem0's get_all() answers
    ``{"results": [...]}``), or ""."""
    if not isinstance(data, dict):
        return ""
    key = next((k for k in ("results", "memories", "thoughts", "items") if isinstance(data.get(k), list)), None)
    if key is None:
        return ""
    mem0 = (
        " (a Mem0 get_all() dump is read as it is by manage.py brain import FILE)"
        if key in ("results", "memories")
        else ""
    )
    return f" This is an object holding a list under {key!r}: send that list itself{mem0}."


class ThoughtImportApi(APIView):
    """Import a batch of thoughts into the caller's space, all or nothing (at most
    ``IMPORT_BATCH_MAX_ITEMS`` per request, default 1000). Items without ``embedding`` are embedded in
    one batched model call; every row is written in one bulk insert. References (``source_ids``,
    ``supersedes``, ``refined_by``, ``superseded_by``, ``related_thoughts``, …) must name a thought of
    the batch or of this space. An imported refinement, consolidation or correction supersedes the
    thoughts it names, as a live contribution would (never a transition marker): the server's clock
    dates it, their pending correction suggestions are closed, and a correction supersedes the live
    correction it replaces too. Short notes are kept (no contribution threshold).

    The caller restores its own thoughts: ``agent``, ``contributor_id``, ``contributor_name`` and
    ``accessed_by`` are left out or its own name, dates are no later than now (a time within a few
    minutes' clock skew is stored as now), weights, scores and counters lie in their formulas' ranges,
    ``transition_marker`` is refused, ``content`` is as long as a memory call's prompt at most and
    ``corrected_fact``, ``correct_fact``, ``alternatives_considered``, ``tags`` and ``source_ref``
    are bounded as a memory call's; ``refined_by`` and ``superseded_by`` name only an item of the batch
    that supersedes the item. A value outside is refused with a 400 naming the field, never clamped.
    A thought that repeats a correction's corrected fact is flagged ``contradicts_correction`` as a
    contribution is. Each thought is stored under a new id (``id_map``); an ``id`` of another space is
    answered as a free one. The operator's ``manage.py brain import`` restores an export with
    everything it carries.

    Send ``Idempotency-Key`` to retry safely: a batch sent again with its key (within
    ``IMPORT_RECEIPT_HOURS``, default 24) gets the first response again, marked
    ``Idempotent-Replayed: true``, and stores nothing (``brain.services.receipts``)."""

    method_hints = {
        "GET": "List thoughts with GET /api/v1/thoughts; export a whole space with manage.py brain export FILE.",
    }

    parser_classes = [ImportJsonParser, ImportNdjsonParser, ImportJsonlParser]
    #: A batch of exported thoughts is larger than any other body (``api.body_limit``).
    body_limit = LargeBody(
        "MAX_REQUEST_BODY_MB",
        "Send fewer thoughts a request (at most IMPORT_BATCH_MAX_ITEMS); "
        "manage.py brain import takes a file of any size.",
    )

    @extend_schema(
        operation_id="thoughts_import",
        parameters=idempotency_parameters(what="batch", success=201, replayed_skips="nothing was stored"),
        request={
            "application/json": ImportItemSerializer(many=True),
            "application/x-ndjson": ImportItemSerializer,
            "application/jsonl": ImportItemSerializer,
        },
        responses={
            201: ImportResultSerializer,
            **error_responses(
                400,
                409,
                413,
                415,
                500,
                e400="`IMPORT_INVALID`: `error.lines` lists every bad line ({line, field, message}), nothing stored; "
                "`PARSE_ERROR`: the body is not JSON.",
                e409="`IMPORT_CONFLICT`: the batch is valid but an `id` is a thought of this space, or was "
                "imported before (`error.lines`); nothing stored. `IDEMPOTENCY_KEY_REUSED`: the Idempotency-Key was "
                "sent earlier with another batch.",
                e413="`IMPORT_TOO_LARGE`: more items than `IMPORT_BATCH_MAX_ITEMS` (`error.max_items`); "
                "`REQUEST_TOO_LARGE`: a body over `MAX_REQUEST_BODY_MB`.",
                e415="`UNSUPPORTED_MEDIA_TYPE`: send application/json, application/x-ndjson or application/jsonl.",
                e500="`EMBEDDING_FAILED` or `INTERNAL_ERROR`; nothing stored.",
            ),
        },
        examples=[
            OpenApiExample(
                "two notes",
                value=[
                    {"content": "Deploys run migrations first.", "topic": "deploy", "tags": ["ops"]},
                    {"content": "Staging uses the filesystem broker.", "thought_category": "operational_learning"},
                ],
                request_only=True,
            )
        ],
    )
    def post(self, request):
        started = time.perf_counter()
        body = request.data if isinstance(request.data, bytes) else b""
        media_type = request.content_type or ""
        key = request_key(request)

        def run() -> tuple[int, dict]:
            items, parse_errors = parse_import_body(body, media_type, request.encoding)
            result = thoughts_import(
                space=request.user.space,
                agent=request.user,
                items=items,
                mode=ImportMode.AGENT,
                parse_errors=parse_errors,
                derive_lineage=True,
            )
            return status.HTTP_201_CREATED, {
                "imported": len(result.ids),
                "embedded": result.embedded,
                "ids": result.ids,
                "id_map": result.id_map,
                "batch_max_items": import_batch_max(),
                "seconds": round(time.perf_counter() - started, 3),
            }

        fingerprint = body_fingerprint(body, media_type) if key is not None else ""
        return answered_once(request, key=key, fingerprint=fingerprint, run=run)
