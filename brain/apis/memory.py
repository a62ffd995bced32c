"""``POST /api/v1/memory`` and ``GET /api/v1/memory``: one orchestration, two wire forms (SPEC 2.2)."""

from __future__ import annotations

import json

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from brain.choices import SourceRefType, ThoughtCategory
from brain.services.memory import memory_run
from core import fields as strict
from core.errors import ValidationFailed
from core.models import UrlToken
from core.schema import error_responses

#: Transition markers are written by the task workflow itself, never through the memory endpoint.
CONTRIBUTABLE_CATEGORIES = [c for c in ThoughtCategory.values if c != ThoughtCategory.TRANSITION_MARKER]
MAX_ID_LIST = 100
MAX_TAGS = 20


class TextOrListField(strict.CharField):
    """Free text, or a list of short texts (one alternative per item) joined one per line."""

    def to_internal_value(self, data):
        if isinstance(data, list):
            if not all(isinstance(item, str) for item in data):
                self.fail("invalid")
            data = "\n".join(item.strip() for item in data if item.strip())
        return super().to_internal_value(data)


class OptionalBooleanField(strict.BooleanField):
    """A boolean that stays "not given" when absent, also in form-encoded bodies (DRF's default
    reads a missing checkbox as false, which would make every form POST a pure search)."""

    default_empty_html = serializers.empty


class SourceRefSerializer(serializers.Serializer):
    type = strict.ChoiceField(choices=SourceRefType.values)
    value = strict.CharField(max_length=500)
    project = strict.CharField(max_length=200, required=False, allow_blank=True)


def thought_ids_field(**kwargs) -> serializers.ListField:
    """A list of at most MAX_ID_LIST thought ids (UUIDs), optional; shared by every endpoint that takes one."""
    return serializers.ListField(child=strict.UUIDField(), required=False, max_length=MAX_ID_LIST, **kwargs)


class MemoryInputSerializer(serializers.Serializer):
    prompt = strict.CharField(max_length=10000)
    agent_id = strict.CharField(max_length=100, required=False, allow_blank=True)
    agent_name = strict.CharField(max_length=200, required=False, allow_blank=True)
    context = strict.CharField(max_length=2000, required=False, allow_blank=True)
    session_id = strict.CharField(max_length=100, required=False, allow_blank=True)
    refines = strict.UUIDField(required=False, allow_null=True)
    # No min length here: fewer than two ids is MIN_CONSOLIDATION, raised by the service.
    consolidates = thought_ids_field(allow_null=True)
    thought_category = strict.ChoiceField(choices=CONTRIBUTABLE_CATEGORIES, required=False)
    topic = strict.CharField(max_length=200, required=False, allow_blank=True)
    temporal_scope = strict.DateField(required=False, allow_null=True, input_formats=["iso-8601"])
    source_ref = SourceRefSerializer(required=False, allow_null=True)
    alternatives_considered = TextOrListField(max_length=5000, required=False, allow_blank=True)
    corrected_fact = strict.CharField(max_length=5000, required=False, allow_blank=True)
    correct_fact = strict.CharField(max_length=5000, required=False, allow_blank=True)
    supersedes = thought_ids_field()
    related_thoughts = thought_ids_field()
    tags = serializers.ListField(child=strict.CharField(max_length=100), required=False, max_length=MAX_TAGS)
    filter_topic = strict.CharField(max_length=200, required=False, allow_blank=True)
    filter_category = strict.ChoiceField(choices=ThoughtCategory.values, required=False, allow_blank=True)
    limit = strict.IntegerField(min_value=1, max_value=50, required=False)
    contribute = OptionalBooleanField(
        required=False,
        help_text="false: a pure search. Retrieve, reinforce and log the query, never store the prompt.",
    )
    store = OptionalBooleanField(
        required=False,
        help_text="true: store the prompt even when it is below the contribution threshold (short facts, "
        "imports); false: the same as contribute: false.",
    )


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
                value = json.loads(value)
            except ValueError:
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


MEMORY_ERRORS = error_responses(404, 409, e404="An id in refines/consolidates/supersedes/related_thoughts is unknown.")


class MemoryApi(APIView):
    """The shared brain: contribute what you learned, retrieve what others know, in one call."""

    @extend_schema(request=MemoryInputSerializer, responses={200: OpenApiTypes.OBJECT, **MEMORY_ERRORS})
    def post(self, request):
        return self._run(request, request.data, query_string=False)

    @extend_schema(
        parameters=[MemoryInputSerializer, URL_TOKEN_PARAMETER], responses={200: OpenApiTypes.OBJECT, **MEMORY_ERRORS}
    )
    def get(self, request):
        return self._run(request, memory_query_params(request.query_params), query_string=True)

    def _run(self, request, data, *, query_string: bool):
        if not hasattr(data, "keys"):
            raise ValidationFailed('Send a JSON object of memory fields, e.g. {"prompt": "..."}.')
        if isinstance(request.auth, UrlToken):
            # A read-only URL token (seed 003 layer B) retrieves; it never stores, whatever it asks.
            data = {**data, "contribute": False}
        serializer = MemoryInputSerializer(data=data, context={strict.QUERY_STRING: query_string})
        serializer.is_valid(raise_exception=True)
        return Response(memory_run(agent=request.user, request=serializer.validated_data))
