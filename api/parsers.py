"""The JSON parser of the API: DRF's, plus no text PostgreSQL can't store, anywhere (keys included, at any
depth): a NUL character, or a lone surrogate; and no nesting deeper than MAX_JSON_DEPTH (a PARSE_ERROR).

PostgreSQL can't store U+0000 in text or JSONB, and a lone surrogate (``"\\ud800"`` in JSON, half of a
pair) is no Unicode text at all: psycopg can't encode it to UTF-8. Either would fail in the database (a
500 on a task's DNA or a turn's tool calls); here it is a 400 ``VALIDATION_ERROR`` naming where it is,
before any view runs. DRF's CharField refuses both already; JSON fields and keys it does not look at.
"""

from __future__ import annotations

import json
import math
import re

from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

NUL_MESSAGE = "NUL characters (\\u0000) are not allowed."
SURROGATE_MESSAGE = "Lone surrogate characters (\\ud800-\\udfff, half of a pair) are not allowed: they are not text."
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Python's json reads 1e400 as infinity (and NaN / Infinity literals where it is not told otherwise);
#: jsonb can't hold either: a DNA or metadata value of 1e400 would be a 500 ("invalid input syntax for type json").
NOT_FINITE_MESSAGE = (
    "Not a finite number: JSON numbers must lie within about ±1.8e308 (1e400 overflows to infinity), "
    "and NaN and Infinity are not JSON."
)

#: The deepest nesting of arrays and objects Colony reads. Its own fields nest a few levels (DNA,
#: metadata, tool calls); a body nested ~900 levels deep would run Python's json, or the walks of the value
#: after it, into the interpreter's recursion limit: a 500 on every JSON endpoint, the web forms and the admin.
MAX_JSON_DEPTH = 100
TOO_DEEP_MESSAGE = f"Nested more than {MAX_JSON_DEPTH} levels of arrays and objects deep."


def text_problem(text: str) -> str | None:
    """Why PostgreSQL can't store ``text`` (the message), or None."""
    if "\x00" in text:
        return NUL_MESSAGE
    if _SURROGATE.search(text):
        return SURROGATE_MESSAGE
    return None


def printable(name: str) -> str:
    """``name`` with a NUL or a lone surrogate written as its escape, safe to put in an answer."""
    return name.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace").decode("utf-8")


def unstorable_paths(value, path: str = "") -> dict[str, str]:
    """Where ``value`` (parsed JSON) holds text PostgreSQL can't store, a number that is not finite, or
    nests past MAX_JSON_DEPTH, with why: ``{"tags[2]": NUL_MESSAGE, "dna.<key> (key)": SURROGATE_MESSAGE}``;
    empty when none. Iterative: a value of any depth is walked without Python's recursion limit."""
    found: dict[str, str] = {}
    stack = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                found[where or "body"] = problem
            continue
        if isinstance(item, float) and not math.isfinite(item):
            found[where or "body"] = NOT_FINITE_MESSAGE
            continue
        if not isinstance(item, (dict, list)):
            continue
        if depth >= MAX_JSON_DEPTH:
            found[where or "body"] = TOO_DEEP_MESSAGE
            continue
        children = []
        if isinstance(item, dict):
            for key, child in item.items():
                name = printable(f"{where}.{key}" if where else str(key))
                problem = text_problem(str(key))
                if problem:
                    found[name + " (key)"] = problem
                children.append((child, name, depth + 1))
        else:
            children = [(child, f"{where}[{i}]" if where else f"[{i}]", depth + 1) for i, child in enumerate(item)]
        stack.extend(reversed(children))
    return found


def parsed_problems(value) -> dict[str, str]:
    """``unstorable_paths`` of a value just parsed, the one walk of it: a nesting past MAX_JSON_DEPTH raises
    JSONTooDeep (a parse error to every caller) instead of being one of the paths."""
    found = unstorable_paths(value)
    if TOO_DEEP_MESSAGE in found.values():
        raise JSONTooDeep()
    return found


def unstorable_text(value) -> str:
    """``parsed_problems`` as one sentence for a form error; empty when there is nothing. Raises JSONTooDeep."""
    return "; ".join(f"{path}: {message}" for path, message in parsed_problems(value).items())


class JSONTooDeep(json.JSONDecodeError):
    """A JSON text nested deeper than MAX_JSON_DEPTH (a JSONDecodeError: callers report it as one)."""

    def __init__(self, text: str = ""):
        super().__init__(f"nested more than {MAX_JSON_DEPTH} levels of arrays and objects deep", text, 0)


def json_lines(text: str) -> list[str]:
    """The lines of JSON Lines text. Not ``str.splitlines()``: that also breaks at U+2028, U+2029 and U+0085,
    which JSON strings may hold as they are (Colony's own export writes them so, as do JavaScript's
    JSON.stringify and most encoders asked for readable UTF-8), and a thought pasted from a PDF or a web
    page would arrive as two lines that are not JSON."""
    return re.split(r"\r\n?|\n", text)


class JSONNumberTooLong(json.JSONDecodeError):
    """An integer of more digits than Python converts from text (``sys.get_int_max_str_digits()``, 4,300
    by default): json raises a plain ValueError for it, which callers would not take for bad JSON."""

    def __init__(self, text: str, detail: str):
        super().__init__(f"a number too long to read ({detail})", text, 0)


class NumberCheckedDecoder(json.JSONDecoder):
    """json's decoder, with an integer too long to convert as JSONNumberTooLong (a JSONDecodeError, which
    every caller already reads as bad JSON: this module's readers, Django's form JSONField)."""

    def decode(self, s, *args, **kwargs):
        try:
            return super().decode(s, *args, **kwargs)
        except json.JSONDecodeError:
            raise
        except ValueError as exc:
            raise JSONNumberTooLong(s, str(exc)) from None


def json_loads_bounded(text: str):
    """``json.loads``, with Python's RecursionError (past ~1,000 levels) as JSONTooDeep and an integer too
    long to convert as JSONNumberTooLong (both JSONDecodeErrors). The depth limit
    itself is checked by the walk every caller makes next (``parsed_problems`` / ``unstorable_paths``): the
    import's readers leave it to each item's other fields, whose rows carry 384-float vectors that a walk
    of the whole row would cost ~50% of the parse for."""
    try:
        return json.loads(text, cls=NumberCheckedDecoder)
    except RecursionError:
        raise JSONTooDeep(text) from None


def is_utf8(encoding: str | None) -> bool:
    """Whether a charset name (None: the default) means UTF-8."""
    return str(encoding or "utf-8").lower().replace("_", "-") in ("utf-8", "utf8", "utf-8-sig")


def not_decodable_message(exc: UnicodeDecodeError, encoding: str | None) -> str:
    """What to do about a body that is not in the charset it was read as (Windows PowerShell 5 sends a
    string body as ISO-8859-1 unless told otherwise)."""
    name = "UTF-8" if is_utf8(encoding) else encoding
    byte = exc.object[exc.start] if exc.start < len(exc.object) else 0
    return (
        f"JSON parse error - the body is not valid {name}: byte 0x{byte:02x} at position {exc.start} is not part "
        "of any character. Send the JSON encoded as UTF-8 (or name its charset in Content-Type, e.g. "
        "application/json; charset=windows-1252)."
    )


class StrictJSONParser(JSONParser):
    # NaN and Infinity literals (what Python's json.dumps writes for float("nan") and float("inf"), and
    # what the MCP tools forward for an argument of 1e400) are read as floats, so that the walk below
    # refuses them by field like 1e400 (VALIDATION_ERROR, NOT_FINITE_MESSAGE) instead of a parse error
    # naming none ("Out of range float values are not JSON compliant: 'NaN'").
    strict = False

    def parse(self, stream, media_type=None, parser_context=None):
        context = dict(parser_context or {})
        if is_utf8(context.get("encoding")):
            # A leading byte-order mark (PowerShell 5, some Windows clients) is not part of the JSON
            # (RFC 8259 8.1 lets a parser ignore it); json refuses it: "Unexpected UTF-8 BOM".
            context["encoding"] = "utf-8-sig"
        try:
            data = super().parse(stream, media_type, context)
        except RecursionError:
            raise ParseError(f"JSON parse error - {JSONTooDeep().msg}.") from None
        except ParseError as exc:
            # DRF's own message reads "'utf-8' codec can't decode byte 0xe9 in position 14: invalid
            # continuation byte"; replaced by one naming the byte and the charset.
            if isinstance(exc.__context__, UnicodeDecodeError):
                raise ParseError(not_decodable_message(exc.__context__, context.get("encoding"))) from None
            raise
        try:
            found = parsed_problems(data)  # one walk on the request path: the text, the numbers, the depth
        except JSONTooDeep:
            raise ParseError(f"JSON parse error - {JSONTooDeep().msg}.") from None
        if found:
            raise serializers.ValidationError({path: [message] for path, message in found.items()})
        return data


def canonical_json(value, *, default=None) -> str:
    """``value`` as one canonical JSON text (keys sorted, no spaces, characters as they are): the same
    object serialised by any client gives the same text, so its digest identifies it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=default)
