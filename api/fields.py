"""Strict input fields for every API serializer: the one place where "a string means a string".

DRF's ``CharField`` turns ``5`` into ``"5"`` and its ``UUIDField`` turns an integer into a UUID, so
it would accept ``{"prompt": 5}``. These subclasses refuse any JSON value of the wrong type with
the field's ``invalid`` message (a 400 ``VALIDATION_ERROR`` naming the field); ``IntegerField`` takes
a JSON integer in a body and a decimal string only in a query string. NUL characters are refused for
every field, key and nested value by ``api.parsers.StrictJSONParser`` and ``api.middleware``.
Use them as ``from core import fields`` then ``fields.CharField(...)`` in every input serializer.
"""

from __future__ import annotations

import heapq
import math
import re
import threading

from django.http import QueryDict
from django.utils.functional import cached_property
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict

from api import errors
from api.text import storable

#: Serializer context flag: the data is a query string, so numbers and booleans arrive as strings.
QUERY_STRING = "query_string"


def _from_query_string(field: serializers.Field) -> bool:
    root = field.root
    return bool(field.context.get(QUERY_STRING)) or isinstance(getattr(root, "initial_data", None), QueryDict)


class _StringOnly:
    """A string, without the invisible controls that would reorder or hide what people read and without
    feedback markers (``api.text.storable``)."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string", type=type(data).__name__)
        return super().to_internal_value(storable(data))


_NOT_A_STRING = {"not_a_string": "Expected a string, got {type}."}


class CharField(_StringOnly, serializers.CharField):
    """``max_length`` bounds the string as sent, as the schema's ``maxLength`` does: DRF checks it after
    trimming whitespace, so 100 characters plus a leading ``\x1f`` would pass DRF's ``max_length=100``."""

    default_error_messages = _NOT_A_STRING

    def to_internal_value(self, data):
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


#: What ``django.utils.text.slugify(s) == s`` accepts: lower-case ASCII letters and digits, single hyphens
#: and underscores inside, a letter or digit at both ends (the services' own rule for project and task slugs).
SLUG_PATTERN = r"^[a-z0-9](?:(?:_|-_)*-?[a-z0-9])*$"


class SlugField(_StringOnly, serializers.RegexField):
    """A slug as the services accept it (:data:`SLUG_PATTERN`), refused here with the field's name."""

    default_error_messages = {
        **_NOT_A_STRING,
        "invalid": "Enter a slug: lower-case letters, digits, single hyphens or underscores inside, "
        "a letter or digit at both ends.",
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)  # " a" is not the slug "a"
        super().__init__(SLUG_PATTERN, **kwargs)


class VisibleAsciiField(_StringOnly, serializers.RegexField):
    """An id the client makes up (a turn id): visible ASCII, no spaces or line breaks, as an
    ``Idempotency-Key``. Colony names it in sentences other agents read (a suggestion's reason), where
    free text could pass for Colony's own words."""

    default_error_messages = {
        **_NOT_A_STRING,
        "invalid": "Use visible ASCII characters only, no spaces or line breaks (a UUID, a counter or a hash).",
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(r"^[!-~]+$", **kwargs)


class ChoiceField(_StringOnly, serializers.ChoiceField):
    """A choice whose refusal lists the choices and names the one most likely meant: DRF's said only
    '"decision" is not a valid choice.', leaving an agent to find "decision_record" in the schema."""

    default_error_messages = _NOT_A_STRING

    def __init__(self, *args, synonyms: dict[str, str] | None = None, **kwargs):
        self.synonyms = synonyms  # other words for a choice, for the "Did you mean" (api.errors.meant)
        super().__init__(*args, **kwargs)

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError:
            if not isinstance(data, str):
                raise
            choices = [str(choice) for choice in self.choices]
            hint = errors.did_you_mean(data, choices, synonyms=self.synonyms, cutoff=0.6)
            raise serializers.ValidationError(
                f"{errors.clip(repr(data), 100)} is not one of {', '.join(choices)}.{hint}", code="invalid_choice"
            ) from None


class UUIDField(_StringOnly, serializers.UUIDField):
    default_error_messages = _NOT_A_STRING


class DateField(_StringOnly, serializers.DateField):
    default_error_messages = _NOT_A_STRING


#: A date-time whose UTC offset lost its "+" to a query string: an unencoded "+" there means a space.
_OFFSET_AS_SPACE = re.compile(r"^(\d{4}-\d{2}-\d{2}T[\d:.]+) (\d{2}(?::?\d{2})?)$")


class DateTimeField(_StringOnly, serializers.DateTimeField):
    """In a query string, an offset whose "+" arrived as a space (``?since=2026-11-29T10:00:00+01:00``
    written without ``%2B``) is read as the "+" it was: DRF's own field refuses it with "Use one of these
    formats instead: ...[+HH:MM|-HH:MM|Z]", the very format the caller used."""

    default_error_messages = _NOT_A_STRING

    def to_internal_value(self, data):
        if isinstance(data, str) and _from_query_string(self):
            data = _OFFSET_AS_SPACE.sub(r"\1+\2", data)
        return super().to_internal_value(data)


#: An integer in a query string, as the schema's ``type: integer`` reads it: ASCII digits with an optional
#: sign. Python's ``int()`` also reads ``1_000``, ``5.0`` (after DRF strips the ``.0``) and non-ASCII
#: digits (``٣٠``, ``５``), which a proxy, a log reader or a rate rule would not read as that number.
_QUERY_INTEGER = re.compile(r"[+-]?[0-9]+")


class IntegerField(serializers.IntegerField):
    """A JSON integer (a whole float such as 5.0 too); a string only from a query string, and only ASCII
    digits with an optional sign there."""

    default_error_messages = {"not_an_integer": "Expected an integer, got {type}."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or (isinstance(data, str) and not _from_query_string(self)):
            self.fail("not_an_integer", type=type(data).__name__)
        if isinstance(data, float) and not data.is_integer():
            self.fail("invalid")
        if isinstance(data, str) and not _QUERY_INTEGER.fullmatch(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class FloatField(serializers.FloatField):
    """A finite JSON number; a string only from a query string."""

    default_error_messages = {"not_a_number": "Expected a number, got {type}."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or (isinstance(data, str) and not _from_query_string(self)):
            self.fail("not_a_number", type=type(data).__name__)
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value


class BooleanField(serializers.BooleanField):
    """A JSON boolean; the usual spellings (true/false/1/0) only from a query string."""

    default_error_messages = {"not_a_boolean": "Expected true or false, got {type}."}

    def to_internal_value(self, data):
        if not isinstance(data, bool) and not _from_query_string(self):
            self.fail("not_a_boolean", type=type(data).__name__)
        return super().to_internal_value(data)


class Serializer(serializers.Serializer):
    """An input serializer that refuses keys it does not know (400 ``VALIDATION_ERROR`` naming them),
    in a JSON body, a nested object or a query string: a misspelt field is an error, never silently
    ignored. The OpenAPI schema says so (``additionalProperties: false``, api.schema).

    An optional field sent as ``null`` counts as not given (its default applies), unless the field
    gives ``null`` a meaning of its own (``allow_null``). Tool-calling clients send every parameter and
    ``null`` for those the model left out (OpenAI's strict function calling requires it): otherwise each
    such call would be a 400 "This field may not be null." A required field's ``null`` is still refused. The schema says
    so (``api.schema.truthful_requests``)."""

    default_error_messages = {"unknown_field": "Unknown field.{hint} Allowed: {allowed}."}
    #: Names callers use for one of this serializer's fields (another API's, an MCP tool's argument),
    #: mapped to the hint an unknown key of that name gets; a misspelling gets "Did you mean ...?".
    unknown_field_hints: dict[str, str] = {}

    def to_internal_value(self, data):
        if hasattr(data, "keys"):
            known = {name for name, f in self.fields.items() if not f.read_only}
            unknown = [str(key) for key in data.keys() if key not in known]
            if unknown:
                raise serializers.ValidationError(self._unknown_fields(unknown, known))
            if not isinstance(data, QueryDict) and any(value is None for value in data.values()):
                data = {
                    key: value
                    for key, value in data.items()
                    if value is not None or self.fields[key].required or self.fields[key].allow_null
                }
        return super().to_internal_value(data)

    def _unknown_fields(self, unknown: list[str], known: set[str]) -> dict[str, list[str]]:
        """The error for keys this serializer does not know: one key gets "Unknown field. Allowed: ...";
        more get the count and the allowed names once, and each of the first UNKNOWN_NAMED (sorted) by
        name. A body of 20,000 unknown keys is one short error, not one message per key."""
        allowed = ", ".join(sorted(known)) or "none"

        def hint(name: str) -> str:
            return errors.name_hint(name, known, self.unknown_field_hints)

        if len(unknown) == 1:
            return {unknown[0]: [self.error_messages["unknown_field"].format(hint=hint(unknown[0]), allowed=allowed)]}
        named = heapq.nsmallest(UNKNOWN_NAMED, unknown)
        listed = ", ".join(errors.clip(name, errors.ERROR_NAME_MAX) for name in named)
        more = f" and {len(unknown) - len(named)} more unknown fields" if len(unknown) > len(named) else ""
        summary = f"{len(unknown)} unknown fields: {listed}{more}. Allowed: {allowed}."
        return {"non_field_errors": [summary]} | {name: [f"Unknown field.{hint(name)}"] for name in named}


#: How many unknown keys an error names (the first, sorted); it counts the others.
UNKNOWN_NAMED = 5


class NoQuerySerializer(Serializer):
    """The query string of an operation that defines no query parameter: every key is unknown."""

    default_error_messages = {
        "unknown_field": "Unknown field.{hint} This operation takes no query parameters: send it without them."
    }


def query_none(request) -> None:
    """A GET that takes no query parameters refuses any (400 ``VALIDATION_ERROR`` naming them), as every
    other operation refuses one it does not define: a misspelt ``limit`` is never silently ignored."""
    if request.query_params:
        NoQuerySerializer(data=request.query_params).is_valid(raise_exception=True)


class FieldsReusedPerThread:
    """Mix into a hot serializer (before ``Serializer``): its fields are built once per thread.

    DRF deep-copies every declared field for each serializer instance (``Serializer.get_fields``): for
    the memory endpoint's 24 fields (lists and a nested serializer among them) that would be ~11% of a
    memory GET's CPU in the web process (py-spy on the web worker). Here the copies bound by the
    first instance of a class in a thread are kept and handed to the next instance in that thread,
    re-parented to it (``field.parent``: context and ``root`` follow; name, source and validators are
    the same). Only for a serializer used one instance at a time per thread — built, validated or
    rendered, read, as a view's input and output serializers are — whose fields no instance changes.
    """

    _kept = threading.local()

    @cached_property
    def fields(self):
        by_class = getattr(self._kept, "by_class", None)
        if by_class is None:
            by_class = self._kept.by_class = {}
        kept = by_class.get(type(self))
        fields = BindingDict(self)
        if kept is None:
            for key, value in self.get_fields().items():
                fields[key] = value  # binds: name, parent, source
            by_class[type(self)] = dict(fields.items())
        else:
            for key, field in kept.items():
                field.parent = self
                fields.fields[key] = field
        return fields
