"""``POST /api/v1/memory`` and ``GET /api/v1/memory``: one orchestration, two wire forms (SPEC 2.2)."""

from __future__ import annotations

import copy

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from api import fields as strict
from api.errors import ValidationFailed
from api.parsers import json_loads_bounded
from api.responses import ResponseThenWork
from api.schema import ERROR_DESCRIPTIONS, error_response, error_responses
from brain.apis.idempotency import KEY_CONFLICT_RESPONSES, answered_once, idempotency_parameters, request_key
from brain.inputs import MemoryInputSerializer
from brain.services.memory import memory_run
from brain.services.receipts import fields_fingerprint
from core.models import UrlToken

LIST_FIELDS = {"consolidates", "supersedes", "related_thoughts", "tags"}


def memory_query_params(params) -> dict:
    """GET's query string as the POST body: lists repeat the parameter or separate items by commas,
    ``source_ref`` is JSON, and an empty parameter counts as not given."""
    data: dict = {}
    for key in params:
        if key == "token":  # a read-only URL token: authentication, not a memory field (core.auth)
            continue
        values = params.getlist(key)
        if key in LIST_FIELDS:
            items = [part.strip() for value in values for part in value.split(",") if part.strip()]
            if items:
                data[key] = items
            continue
        value = values[-1]
        if value == "":
            continue
        if key == "source_ref":
            try:
                value = json_loads_bounded(value)
            except ValueError:  # JSONDecodeError, JSONTooDeep
                raise ValidationFailed(
                    'source_ref must be JSON, e.g. {"type": "task", "value": "my-task", "project": "colony"}.'
                ) from None
        data[key] = value
    return data


URL_TOKEN_PARAMETER = OpenApiParameter(
    "token",
    str,
    required=False,
    description="A read-only URL token (instead of the Authorization header) for clients that can only fetch "
    "URLs: the call is then retrieve-only. Accepted on this operation only.",
)


#: The memory call's own 409: only a correction supersedes a correction (``lineage.corrections_refuse``).
CORRECTION_CONFLICT = (
    "`CORRECTION_NEEDS_CORRECTION`: refines or consolidates (or supersedes on a thought that is not a correction) "
    "names a correction, listed in `corrections`; only a correction supersedes a correction (send one whose "
    "supersedes names it)."
)

MEMORY_ERRORS = error_responses(
    400,
    404,
    409,
    e400="`VALIDATION_ERROR` names each bad field (unknown fields included); cross-field rules: "
    "`MISSING_CATEGORY_FIELDS` (a thought_category without its required fields, listed in `missing`), "
    "`MUTUAL_EXCLUSION` (refines with consolidates or with a correction; supersedes with either on a thought "
    "that is not a correction; contribute/store false with a write), "
    "`MIN_CONSOLIDATION` (fewer than two distinct ids in consolidates); GET: a token parameter together with "
    "the Authorization header.",
    e404="An id in refines/consolidates/supersedes/related_thoughts is unknown (`THOUGHT_NOT_FOUND`).",
    e409=f"{ERROR_DESCRIPTIONS[409]} {CORRECTION_CONFLICT}",
)

MEMORY_POST_ERRORS = {
    **MEMORY_ERRORS,
    409: error_response(409, f"{KEY_CONFLICT_RESPONSES[409].description} {CORRECTION_CONFLICT}"),
}


class SourceOutputSerializer(serializers.Serializer):
    thought_id = serializers.UUIDField()
    contributor = serializers.CharField(help_text="The contributing agent's registered name.")
    score = serializers.FloatField()
    relevance = serializers.FloatField(
        help_text="Calibrated estimate (0-1) of the chance this source is what the asker needs; "
        "min_relevance and inject filter on it."
    )
    content_preview = serializers.CharField(help_text="The first 80 characters.")
    refined_by = serializers.UUIDField(allow_null=True)
    superseded = serializers.BooleanField()
    thought_category = serializers.CharField()
    topic = serializers.CharField(allow_blank=True)
    temporal_scope = serializers.DateField(allow_null=True)
    quality_flags = serializers.ListField(child=serializers.CharField())
    matching_reason = serializers.CharField()
    effective_confidence = serializers.FloatField()


class HighwayOutputSerializer(serializers.Serializer):
    thought_id = serializers.UUIDField()
    content_preview = serializers.CharField()
    contributor = serializers.CharField(help_text="Who contributed it (its agent's name now).")
    access_count = serializers.IntegerField()
    agents = serializers.IntegerField(help_text="Distinct agents that accessed it.")
    traffic = serializers.IntegerField(help_text="access_count × agents.")
    similarity = serializers.FloatField(help_text="To the query.")


class DisambiguationOptionSerializer(serializers.Serializer):
    tag = serializers.CharField()
    count = serializers.IntegerField()
    thought_ids = serializers.ListField(child=serializers.UUIDField())


class DisambiguationSerializer(serializers.Serializer):
    message = serializers.CharField()
    options = DisambiguationOptionSerializer(many=True)


class PendingCorrectionSerializer(serializers.Serializer):
    suggestion_id = serializers.UUIDField()
    thought_id = serializers.UUIDField()
    thought_preview = serializers.CharField()
    statement = serializers.CharField()
    confidence = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
    origin = serializers.CharField()
    draft = serializers.JSONField(allow_null=True)
    created_at = serializers.DateTimeField()
    accept = serializers.CharField(help_text="POST here to accept it.")
    dismiss = serializers.CharField(help_text="POST here to dismiss it.")


class LineageSummarySerializer(serializers.Serializer):
    thought_id = serializers.UUIDField()
    has_lineage = serializers.BooleanField()
    chain_length = serializers.IntegerField()
    deepest_ancestor = serializers.UUIDField()
    latest_refinement = serializers.UUIDField(allow_null=True)
    truncated = serializers.BooleanField()


class MemoryResultSerializer(serializers.Serializer):
    response = serializers.CharField()
    sources = SourceOutputSerializer(many=True)
    highways_nearby = HighwayOutputSerializer(many=True)
    disambiguation = DisambiguationSerializer(allow_null=True)
    guidance = serializers.CharField(allow_null=True)
    pending_corrections = PendingCorrectionSerializer(many=True)


class MemoryTraceSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    operations = serializers.ListField(child=serializers.CharField())
    thoughts_retrieved = serializers.IntegerField()
    thoughts_contributed = serializers.IntegerField()
    contribution_threshold_met = serializers.BooleanField()
    context_used = serializers.BooleanField()
    retrieval_method = serializers.CharField(allow_null=True)
    thought_id = serializers.UUIDField(
        allow_null=True,
        help_text="The thought this call stored, if any; with already_known, the live thought that already says "
        "the same.",
    )
    already_known = serializers.BooleanField(
        help_text="The prompt repeats a live thought of the space (the same text once case and whitespace are "
        "normalised): nothing was stored (thoughts_contributed 0), that thought (thought_id) was reinforced."
    )
    lineage_summary = LineageSummarySerializer(allow_null=True)


class MemoryOutputSerializer(serializers.Serializer):
    """The memory endpoint's answer (SPEC 2.2), as brain.services.memory.response renders it."""

    result = MemoryResultSerializer()
    trace = MemoryTraceSerializer()


class MemoryApi(APIView):
    """The shared brain: contribute what you learned, retrieve what others know, in one call."""

    @extend_schema(
        request=MemoryInputSerializer,
        parameters=idempotency_parameters(
            what="call", success=200, replayed_skips="nothing was stored, logged or reinforced"
        ),
        responses={200: MemoryOutputSerializer, **MEMORY_POST_ERRORS},
    )
    def post(self, request):
        key = request_key(request)
        if key is None:
            return self._run(request, request.data, query_string=False)
        validated = self._validated(request, request.data, query_string=False)
        after: list = []  # reinforcement, after the answer (none when the answer is a replay)
        return answered_once(
            request,
            key=key,
            fingerprint=fields_fingerprint("POST /api/v1/memory", request.data),
            # A copy each run: the call rewrites its request (``supersedes`` as ``refines``), and after a
            # deadlock it is run again from the fields as sent.
            run=lambda: (200, memory_run(agent=request.user, request=copy.deepcopy(validated), defer=after.append)),
            after=after,
        )

    @extend_schema(
        parameters=[MemoryInputSerializer, URL_TOKEN_PARAMETER],
        responses={200: MemoryOutputSerializer, **MEMORY_ERRORS},
    )
    def get(self, request):
        return self._run(request, memory_query_params(request.query_params), query_string=True)

    def head(self, request):
        """HEAD is safe (RFC 9110 9.3.2): the GET's checks of the query string and its status, none of its
        work. Django runs GET for HEAD, and GET searches, may store the prompt, logs the query and reinforces
        what it returned: a link checker, a chat app's link preview or an uptime monitor sending HEAD to a
        memory link (a URL token's, say) did all of that."""
        self._validated(request, memory_query_params(request.query_params), query_string=True)
        return Response(status=200)

    def _validated(self, request, data, *, query_string: bool) -> dict:
        if not hasattr(data, "keys"):
            raise ValidationFailed('Send a JSON object of memory fields, e.g. {"prompt": "..."}.')
        if isinstance(request.auth, UrlToken):
            # A read-only URL token (seed 003 layer B) retrieves; it never stores, whatever it asks.
            data = {**data, "contribute": False}
        serializer = MemoryInputSerializer(data=data, context={strict.QUERY_STRING: query_string})
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def _run(self, request, data, *, query_string: bool):
        validated = self._validated(request, data, query_string=query_string)
        after: list = []  # reinforcement: run once the answer is sent (api.responses)
        read_only = isinstance(request.auth, UrlToken)
        return ResponseThenWork(
            memory_run(agent=request.user, request=validated, defer=after.append, read_only=read_only), after=after
        )


def memory_schema_rules(result, generator, request, public):
    """POSTPROCESSING_HOOKS entry: what the memory operations accept that a serializer can't say.

    - ``consolidates``: at least two distinct ids (400 MIN_CONSOLIDATION otherwise);
    - GET: ``source_ref`` is one JSON-encoded parameter; list items are split on commas (so a tag holds
      none); the ``token`` parameter is a security scheme of its own (``urlToken``), the alternative to
      the bearer header (both at once: 400).
    """
    schemas = result.get("components", {}).get("schemas", {})
    body = schemas.get("MemoryInputRequest", {}).get("properties", {})
    if "consolidates" in body:
        body["consolidates"].update(minItems=2, uniqueItems=True)
    operation = result.get("paths", {}).get("/api/v1/memory", {}).get("get")
    if operation is None:
        return result
    kept = []
    for parameter in operation.get("parameters", []):
        name = parameter["name"]
        if name == URL_TOKEN_PARAMETER.name:
            continue
        if name == "source_ref":
            parameter.pop("schema", None)
            parameter["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/SourceRefRequest"}}}
            parameter["description"] = 'JSON, e.g. {"type": "task", "value": "my-task", "project": "colony"}.'
        elif name in LIST_FIELDS:
            array = parameter["schema"]["anyOf"][0]
            if name == "consolidates":
                array.update(minItems=2, uniqueItems=True)
            if array["items"].get("pattern"):
                array["items"]["pattern"] = array["items"]["pattern"].replace("\\u0000", "\\u0000,")
            parameter["description"] = "Repeat the parameter or separate items by commas."
        kept.append(parameter)
    operation["parameters"] = kept
    result["components"].setdefault("securitySchemes", {})["urlToken"] = {
        "type": "apiKey",
        "in": "query",
        "name": URL_TOKEN_PARAMETER.name,
        "description": URL_TOKEN_PARAMETER.description + " Not together with the Authorization header (400).",
    }
    operation["security"] = [*operation.get("security", []), {"urlToken": []}]
    return result
