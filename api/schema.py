"""OpenAPI for the agent API: the bearer scheme, the one error envelope, the errors every operation implies.

Every error is ``{"error": {"code", "message", ...}}``; it is documented once, as the ``ErrorEnvelope``
component. ``ColonyAutoSchema`` (``DEFAULT_SCHEMA_CLASS``) adds to every operation the errors its shape
implies, so a new endpoint gets them without saying so:

- 400 when it takes a request body or query parameters (``VALIDATION_ERROR``, ``PARSE_ERROR``);
- 413 and 415 when it takes a request body (too large; another media type or a compressed body);
- 414 when it has query or path parameters (a URL over 65,535 bytes, which the server does not read);
- 401 and 429 when it needs a token (``UNAUTHENTICATED``, ``THROTTLED``);
- 404 when its path has parameters (an unknown or another space's id);
- 503 always (a dependency such as the database is unavailable).

Errors only some operations raise (403, 409, another 503 meaning) are declared on the view with
:func:`error_responses`, merged with the success response::

    @extend_schema(request=In, responses={201: Out, **error_responses(409)})
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

ERROR_DESCRIPTIONS = {
    400: "Invalid request (`VALIDATION_ERROR` names each field in `fields`; `PARSE_ERROR` for malformed JSON).",
    401: "No token, or an unknown or revoked one (`UNAUTHENTICATED`).",
    403: "The token's agent may not do this (`FORBIDDEN` or a more specific code).",
    404: "Nothing with this id in the caller's space (`NOT_FOUND` or a more specific code).",
    405: "The path exists but does not take this method (`METHOD_NOT_ALLOWED`).",
    409: "The request conflicts with the current state (`CONFLICT` or a more specific code).",
    413: "The request body is larger than the route's limit (`REQUEST_TOO_LARGE`: `MAX_REQUEST_BODY_KB`, the "
    "import's `MAX_REQUEST_BODY_MB`); nothing was read past it.",
    414: "The URL is over 65,535 bytes and was not read (`URL_TOO_LONG`): send long text in a request body "
    "(for a memory query, `POST /api/v1/memory`).",
    415: "The body's Content-Type is not one this operation reads, or the body is compressed "
    "(`Content-Encoding`); the message says what to send (`UNSUPPORTED_MEDIA_TYPE`).",
    429: "Too many requests from this token (`THROTTLED`); retry after the `Retry-After` seconds.",
    503: "A part Colony depends on is unavailable (database, broker), or the request collided with concurrent "
    "changes to the same rows (`DATABASE_CONFLICT`); nothing was changed: retry after the `Retry-After` seconds.",
}


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Machine-readable case, e.g. VALIDATION_ERROR, NOT_FOUND, CONFLICT.")
    message = serializers.CharField(help_text="One sentence saying what went wrong and what to do next.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="VALIDATION_ERROR only: the messages per field (nested fields as `a.b`, list items as `a[0]`).",
    )
    omitted = serializers.DictField(
        child=serializers.IntegerField(),
        required=False,
        help_text="How many entries of each of this error's lists or objects were left out (an error lists the "
        "first ten at most, and stays a few KB whatever the request held).",
    )


class ErrorEnvelopeSerializer(serializers.Serializer):
    """Every API error: ``{"error": {"code", "message"}}``, plus case-specific keys such as ``fields``."""

    error = ErrorDetailSerializer()


def error_response(status: int, description: str | None = None) -> OpenApiResponse:
    """One documented error response in the shared envelope."""
    return OpenApiResponse(response=ErrorEnvelopeSerializer, description=description or ERROR_DESCRIPTIONS[status])


def error_responses(*statuses: int, **descriptions: str) -> dict[int, OpenApiResponse]:
    """``{status: error_response(status)}`` for ``extend_schema(responses=...)``; a description may be
    given per status as ``e409="Task already exists."``."""
    return {status: error_response(status, descriptions.get(f"e{status}")) for status in statuses}


class ColonyAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema plus the error responses each operation's shape implies."""

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        parameters = operation.get("parameters", [])
        implied = {503}
        if "requestBody" in operation or any(p.get("in") == "query" for p in parameters):
            implied.add(400)
        if "requestBody" in operation:
            implied.update({413, 415})
        if any(p.get("in") in ("query", "path") for p in parameters):
            implied.add(414)
        if any(p.get("in") == "path" for p in parameters):
            implied.add(404)
        if any(requirement for requirement in operation.get("security", [])):
            implied.update({401, 429})
        responses = operation.setdefault("responses", {})
        ref = self.resolve_serializer(ErrorEnvelopeSerializer, "response").ref
        for status in sorted(implied):
            if str(status) not in responses:
                responses[str(status)] = {
                    "description": ERROR_DESCRIPTIONS[status],
                    "content": {"application/json": {"schema": ref}},
                }
        operation["responses"] = dict(sorted(responses.items()))
        return operation


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "core.auth.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An agent token: `manage.py agent create`."}


#: Every request string refuses U+0000 (PostgreSQL can't store it): the schema says so with a pattern.
NO_NUL_PATTERN = "^[^\\u0000]*$"
#: ... and a required text (``minLength`` >= 1: DRF trims it, then refuses it blank) has a visible character.
NOT_BLANK_PATTERN = "^[^\\u0000]*[^\\s\\u0000\\u001c-\\u001f\\u0085][^\\u0000]*$"


def _forbid_nul(schema, seen: set[int]) -> None:
    if not isinstance(schema, dict) or id(schema) in seen:
        return
    seen.add(id(schema))
    kind = schema.get("type")
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)  # OAS 3.1: ["string", "null"]
    if is_string and "enum" not in schema and "format" not in schema and "pattern" not in schema:
        schema["pattern"] = NOT_BLANK_PATTERN if schema.get("minLength", 0) >= 1 else NO_NUL_PATTERN
    for value in schema.values():
        if isinstance(value, dict):
            _forbid_nul(value, seen)
        elif isinstance(value, list):
            for item in value:
                _forbid_nul(item, seen)


def forbid_nul_in_requests(result, generator, request, public):
    """POSTPROCESSING_HOOKS entry: request strings (bodies, query and path parameters) and free-form
    object keys match ``^[^\\u0000]*$``, as StrictJSONParser and ApiInputGuardMiddleware enforce."""
    seen: set[int] = set()
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request"):
            _forbid_nul(schema, seen)
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                _forbid_nul(parameter.get("schema"), seen)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _forbid_nul(media.get("schema"), seen)
    return result


# --- request schemas that say exactly what is accepted ---------------------------------------------

JSON_VALUE = "JsonValue"
JSON_VALUE_REF = {"$ref": f"#/components/schemas/{JSON_VALUE}"}


def json_value_schema() -> dict:
    """Any JSON value without a NUL character, keys included, at any depth: a free-form request value
    (task DNA, tool calls, import metadata) as StrictJSONParser accepts it."""
    return {
        "description": "Any JSON value; no NUL character (\\u0000) in any string or key, at any depth.",
        "anyOf": [
            {"type": "null"},
            {"type": "string", "pattern": NO_NUL_PATTERN},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "array", "items": JSON_VALUE_REF},
            {"type": "object", "propertyNames": {"pattern": NO_NUL_PATTERN}, "additionalProperties": JSON_VALUE_REF},
        ],
    }


def _free_form(schema) -> bool:
    return schema == {} or schema == {"type": "object", "additionalProperties": {}}


def _close_request_schema(schema, seen: set[int]) -> None:
    """Objects with declared properties take no others; free-form values become :func:`json_value_schema`."""
    if not isinstance(schema, dict) or id(schema) in seen:
        return
    seen.add(id(schema))
    # A serializer's object (no additionalProperties of its own yet); not a free-form object that lists a
    # few keys, such as task DNA, where null means something else (remove the key) and some keys take none.
    is_object = schema.get("type") == "object" and "properties" in schema
    serializer_object = is_object and "additionalProperties" not in schema
    if is_object:
        schema.setdefault("additionalProperties", False)
    for key in ("properties",):
        for name, sub in list(schema.get(key, {}).items()):
            if _free_form(sub):
                schema[key][name] = sub = (
                    JSON_VALUE_REF
                    if sub == {}
                    else {
                        "type": "object",
                        "propertyNames": {"pattern": NO_NUL_PATTERN},
                        "additionalProperties": JSON_VALUE_REF,
                    }
                )
            if serializer_object and name not in schema.get("required", ()) and not _accepts_null(sub):
                # api.fields.Serializer: an optional field sent as null counts as not given.
                wrapped = {"anyOf": [sub, {"type": "null", "description": "The same as not given."}]}
                if "description" in sub:
                    wrapped["description"] = sub["description"]
                schema[key][name] = wrapped
    if _free_form(schema.get("items")):
        schema["items"] = JSON_VALUE_REF
    if schema.get("additionalProperties") == {}:
        schema["additionalProperties"] = JSON_VALUE_REF
        schema.setdefault("propertyNames", {"pattern": NO_NUL_PATTERN})
    for value in schema.values():
        if isinstance(value, dict):
            _close_request_schema(value, seen)
        elif isinstance(value, list):
            for item in value:
                _close_request_schema(item, seen)


def _accepts_null(schema) -> bool:
    """Whether a (sub)schema already admits null (a type list with "null", or an alternative that does)."""
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if schema.get("$ref", "").endswith("/NullEnum"):
        return True
    return any(_accepts_null(item) for word in ("anyOf", "oneOf") for item in schema.get(word, ()))


#: A query parameter given empty (``?status=``) counts as not given (DRF's rule for optional fields,
#: and the memory endpoint's): the schema of every optional query parameter says so.
EMPTY_QUERY_VALUE = {"type": "string", "enum": [""], "description": "Empty: the same as not given."}


def truthful_requests(result, generator, request, public):
    """POSTPROCESSING_HOOKS entry (after :func:`forbid_nul_in_requests`): request objects refuse
    unknown keys (``additionalProperties: false``, as ``api.fields.Serializer`` does) and take null for
    an optional property (= not given, as that serializer reads it), free-form values are NUL-free
    JSON, and an optional query parameter may be empty (= not given)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    seen: set[int] = set()
    for name, schema in schemas.items():
        if name.endswith("Request"):
            _close_request_schema(schema, seen)
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _close_request_schema(media.get("schema"), seen)
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query" and not parameter.get("required") and "schema" in parameter:
                    parameter["schema"] = {"anyOf": [parameter["schema"], EMPTY_QUERY_VALUE]}
    schemas[JSON_VALUE] = json_value_schema()
    result["components"]["schemas"] = dict(sorted(schemas.items()))
    return result
