"""``POST /api/v1/thoughts/import``: a batch of thoughts in one request (issue 14 item 4).

The body is a JSON array of thought objects (``Content-Type: application/json``) or one object per
line (``application/x-ndjson`` or ``application/jsonl``); the items carry the thought fields of
SPEC 2.1 by name. One request is one batch of at most ``IMPORT_BATCH_MAX_ITEMS`` (default 1000):
all of it is stored or nothing, and every bad line is reported (``error.lines``). The space is the
token's. It is an agent restoring its own thoughts (``ImportMode.AGENT``): the caller's identity,
dates no later than now, values in their formulas' ranges, no transition markers, new ids; see
``brain.services.transfer.agent_item_check``. ``manage.py brain import`` is the operator's
full-fidelity restore.
"""

from __future__ import annotations

import json
import time

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.views import APIView

from brain.apis.idempotency import answered_once, idempotency_parameters, request_key
from brain.choices import QualityFlag, ThoughtCategory, ThoughtType
from brain.inputs import PROMPT_MAX_CHARS
from brain.models import EMBEDDING_DIMENSIONS
from brain.ranking import PHEROMONE_MAX
from brain.services.pheromones import CO_RETRIEVAL_PARTNERS_MAX, COUNTER_MAX, DECAY_FLOOR
from brain.services.receipts import body_fingerprint
from brain.services.transfer import (
    EFFECTIVE_CONFIDENCE_MAX,
    FLOAT32_MAX,
    ImportMode,
    LineError,
    import_batch_max,
    thoughts_import,
)
from core import fields as strict
from core.errors import ValidationFailed
from core.parsers import is_utf8, json_lines, json_loads_bounded
from core.schema import JSON_VALUE_REF, NO_NUL_PATTERN, error_responses


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
    a file saved as Windows-1252 was stored with every accented letter lost, and nobody was told."""
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


_NULL_OK = {"required": False, "allow_null": True}


def _or_not_given(schema: dict) -> dict:
    """An optional value the import takes as "not given" when it is the empty string (seed exports write
    ""), as it does null (``allow_null``: drf-spectacular adds the null branch)."""
    return {"anyOf": [schema, {"type": "string", "enum": [""]}]}


@extend_schema_field(_or_not_given({"type": "string", "format": "uuid"}))
class _OptionalUuidField(strict.UUIDField):
    pass


@extend_schema_field(_or_not_given({"type": "string", "format": "date-time"}))
class _OptionalDateTimeField(serializers.DateTimeField):
    pass


@extend_schema_field(_or_not_given({"type": "string", "format": "date"}))
class _OptionalDateField(strict.DateField):
    pass


def _ids(**kwargs) -> serializers.ListField:
    return serializers.ListField(child=strict.UUIDField(), required=False, allow_null=True, **kwargs)


def _vector() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.FloatField(min_value=-FLOAT32_MAX, max_value=FLOAT32_MAX),  # stored as float32
        min_length=EMBEDDING_DIMENSIONS,
        max_length=EMBEDDING_DIMENSIONS,
        required=False,
        allow_null=True,
        help_text=f"{EMBEDDING_DIMENSIONS} numbers; computed when absent.",
    )


@extend_schema_field(
    {
        "description": "An object; a string is kept as {'text': ...}.",
        "anyOf": [
            {"type": "null"},
            {"type": "string", "pattern": NO_NUL_PATTERN},
            {"type": "object", "propertyNames": {"pattern": NO_NUL_PATTERN}, "additionalProperties": JSON_VALUE_REF},
        ],
    }
)
class _MetadataField(serializers.JSONField):
    pass


_COUNT = {"type": "integer", "minimum": 0, "maximum": COUNTER_MAX}


@extend_schema_field(
    {
        "description": f"{{thought id: count}} (or the seed brain's [{{thought_id, count}}]); at most "
        f"{CO_RETRIEVAL_PARTNERS_MAX} partners.",
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "propertyNames": {"pattern": NO_NUL_PATTERN},
                "additionalProperties": _COUNT,
                "maxProperties": CO_RETRIEVAL_PARTNERS_MAX,
            },
            {
                "type": "array",
                "maxItems": CO_RETRIEVAL_PARTNERS_MAX,
                "items": {
                    "type": "object",
                    "required": ["thought_id", "count"],
                    "properties": {"thought_id": {"type": "string", "pattern": NO_NUL_PATTERN}, "count": _COUNT},
                    "additionalProperties": JSON_VALUE_REF,  # other keys of a seed entry are ignored
                },
            },
        ],
    }
)
class _CoRetrievedField(serializers.JSONField):
    pass


class ImportItemSerializer(serializers.Serializer):
    """One thought to import: documentation of the wire shape, as ``brain.services.transfer.item_clean``
    accepts it (the service validates; ``null`` or an empty string means "not given" for optional fields).

    An import over the API restores the caller's own thoughts: a value outside these rules is
    refused (400 naming the field), never clamped. ``manage.py brain import`` restores an export as
    it is (other agents, markers, ids).

    Rules across items and the space, each a 400 ``IMPORT_INVALID`` naming the line: an ``id``
    appears once in the batch (one that is a thought of the caller's space, or was stored from the
    same ``id`` before, is a 409 ``IMPORT_CONFLICT``); every reference (``source_ids``,
    ``supersedes``, ``refined_by``, ``superseded_by``, ``contradicted_by``, ``related_thoughts``)
    names a thought of the batch or of the space, and a thought is not related to itself; a
    refinement, consolidation or correction does not supersede a transition marker."""

    id = _OptionalUuidField(
        help_text="Names the item within the batch (references may use it); the thought is stored under a new id, "
        "given in the answer's id_map.",
        **_NULL_OK,
    )
    kind = serializers.JSONField(required=False, help_text="Ignored (export files carry it).")
    content = strict.CharField(
        max_length=PROMPT_MAX_CHARS,
        help_text="Required; as long as a memory call's prompt at most (no contribution threshold).",
    )
    context_metadata = _MetadataField(required=False)
    contributor_id = strict.CharField(
        max_length=100, allow_blank=True, help_text="Left out, or the caller's agent name.", **_NULL_OK
    )
    contributor_name = strict.CharField(
        max_length=200, allow_blank=True, help_text="Left out, or the caller's agent name.", **_NULL_OK
    )
    agent = strict.CharField(
        max_length=100, allow_blank=True, help_text="Left out, or the caller's agent name.", **_NULL_OK
    )
    created_at = _OptionalDateTimeField(help_text="Kept when no later than now; default now.", **_NULL_OK)
    thought_type = strict.ChoiceField(choices=ThoughtType.choices, allow_blank=True, **_NULL_OK)
    source_ids = _ids()
    tags = serializers.ListField(child=strict.CharField(max_length=100, allow_blank=True), **_NULL_OK)
    thought_category = strict.ChoiceField(
        choices=[c for c in ThoughtCategory.choices if c[0] != ThoughtCategory.TRANSITION_MARKER],
        allow_blank=True,
        help_text="Not transition_marker: markers are written by task transitions.",
        **_NULL_OK,
    )
    topic = strict.CharField(max_length=200, allow_blank=True, **_NULL_OK)
    temporal_scope = _OptionalDateField(help_text="A date-time's date part is kept.", **_NULL_OK)
    source_ref = serializers.DictField(**_NULL_OK)
    alternatives_considered = strict.CharField(allow_blank=True, **_NULL_OK)
    corrected_fact = strict.CharField(allow_blank=True, **_NULL_OK)
    correct_fact = strict.CharField(allow_blank=True, **_NULL_OK)
    supersedes = _ids()
    quality_flags = serializers.ListField(child=strict.ChoiceField(choices=QualityFlag.choices), **_NULL_OK)
    superseded = strict.BooleanField(required=False)
    superseded_at = _OptionalDateTimeField(help_text="No later than now.", **_NULL_OK)
    superseded_by = _OptionalUuidField(**_NULL_OK)
    refined_by = _OptionalUuidField(**_NULL_OK)
    contradicted_by = _OptionalUuidField(**_NULL_OK)
    related_thoughts = _ids()
    embedding = _vector()
    corrected_fact_embedding = _vector()
    embedding_model = strict.CharField(max_length=200, allow_blank=True, **_NULL_OK)
    pheromone_weight = serializers.FloatField(min_value=DECAY_FLOOR, max_value=PHEROMONE_MAX, required=False)
    access_count = strict.IntegerField(min_value=0, max_value=COUNTER_MAX, required=False)
    last_accessed = _OptionalDateTimeField(help_text="No later than now.", **_NULL_OK)
    accessed_by = serializers.ListField(child=strict.CharField(max_length=100, allow_blank=True), **_NULL_OK)
    co_retrieved_with = _CoRetrievedField(required=False)
    usage_score = serializers.FloatField(min_value=0, max_value=1, **_NULL_OK)
    contradiction_score = serializers.FloatField(min_value=0, max_value=1, **_NULL_OK)
    effective_confidence = serializers.FloatField(min_value=0, max_value=EFFECTIVE_CONFIDENCE_MAX, required=False)


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
    thoughts it names, as a live contribution would (never a transition marker). Short notes are kept
    (no contribution threshold).

    The caller restores its own thoughts: ``agent``, ``contributor_id`` and ``contributor_name`` are
    left out or its own name, dates are no later than now, weights, scores and counters lie in their
    formulas' ranges, ``transition_marker`` is refused, and ``content`` is as long as a memory call's
    prompt at most; a value outside is refused with a 400 naming the field, never clamped. Each thought
    is stored under a new id (``id_map``); an ``id`` of another space is answered as a free one. The
    operator's ``manage.py brain import`` restores an export with everything it carries.

    Send ``Idempotency-Key`` to retry safely: a batch sent again with its key (within
    ``IMPORT_RECEIPT_HOURS``, default 24) gets the first response again, marked
    ``Idempotent-Replayed: true``, and stores nothing (``brain.services.receipts``)."""

    method_hints = {
        "GET": "List thoughts with GET /api/v1/thoughts; export a whole space with manage.py brain export FILE.",
    }

    parser_classes = [ImportJsonParser, ImportNdjsonParser, ImportJsonlParser]

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
