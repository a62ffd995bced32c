"""``POST /api/v1/memory`` and ``GET /api/v1/memory``: one orchestration, two wire forms (SPEC 2.2)."""

from __future__ import annotations

import json

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from brain.inputs import MemoryInputSerializer
from brain.services.memory import memory_run
from core import fields as strict
from core.errors import ValidationFailed
from core.models import UrlToken
from core.schema import error_responses

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
