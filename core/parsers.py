"""The JSON parser of the API: DRF's, plus no NUL character anywhere (keys included, at any depth).

PostgreSQL can't store U+0000 in text or JSONB, so a NUL used to reach the database and fail there
(a 500). Here it is a 400 ``VALIDATION_ERROR`` naming where it is, before any view runs.
"""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.parsers import JSONParser

NUL_MESSAGE = "NUL characters (\\u0000) are not allowed."


def nul_paths(value, path: str = "") -> list[str]:
    """Where ``value`` (parsed JSON) holds a NUL: ``["tags[2]", "dna.<key>"]``; empty when none."""
    found: list[str] = []
    if isinstance(value, str):
        if "\x00" in value:
            found.append(path or "body")
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{path}.{key}" if path else str(key)
            if "\x00" in str(key):
                found.append(name.replace("\x00", "\\u0000") + " (key)")
            found.extend(nul_paths(item, name.replace("\x00", "\\u0000")))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(nul_paths(item, f"{path}[{index}]" if path else f"[{index}]"))
    return found


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        found = nul_paths(data)
        if found:
            raise serializers.ValidationError({path: [NUL_MESSAGE] for path in found})
        return data
