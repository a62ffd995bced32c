"""Readers for the dumps ``manage.py brain import`` understands, each giving import items with the
thought fields of SPEC 2.1 (``brain.transfer.serializers`` validates them):

- ``colony``: Colony's own export (JSONL, first line ``{"kind": "header", "format": "colony-export"}``),
  thoughts, query-log rows and correction suggestions, imported exactly as exported.
- ``mem0``: the JSON of Mem0's ``Memory.get_all()`` (``{"results": [...]}`` or a bare list); each
  memory becomes a thought: ``memory`` → ``content``, its ``id`` kept when it is a UUID,
  ``agent_id``/``user_id`` → contributor, ``metadata``, ``hash``, ``run_id`` and ``updated_at`` kept
  in ``context_metadata.mem0``, ``metadata.tags``/``categories`` → ``tags``.
- ``seed``: the seed brain's Qdrant ``thought_space`` points as JSON (a list of points, the scroll
  API's ``{"result": {"points": [...]}}``, or JSONL), each ``{"id", "vector", "payload"}``; the
  payload's fields are the seed's names, the vector (all-MiniLM-L6-v2) is kept. Its SQLite
  ``query_log`` (``--query-log FILE``: id, agent_id, query_text, context_text, returned_ids,
  session_id, timestamp, result_count) becomes Colony query-log rows.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from api.parsers import json_loads_bounded
from brain.transfer.export import EXPORT_FORMAT
from brain.transfer.serializers import ITEM_FIELDS, vector_compact

FORMATS = ("auto", "colony", "mem0", "seed")


@dataclass
class Dump:
    format: str
    thoughts: list[Any]
    query_logs: list[dict[str, Any]] = field(default_factory=list)
    suggestions: list[dict[str, Any]] = field(default_factory=list)
    header: dict[str, Any] | None = None


#: Keys whose value is a thought's vector: "embedding" and "corrected_fact_embedding" of Colony's
#: export, a seed point's "vector".
_VECTOR_KEYS = ("embedding", "corrected_fact_embedding", "vector")


def _compact(row: Any) -> Any:
    if isinstance(row, dict):
        for key in _VECTOR_KEYS:
            if key in row:
                row[key] = vector_compact(row[key])
    return row


def _load_json_or_lines(path: Path) -> Any:
    """One JSON document (a list, or an object such as Mem0's ``{"results": [...]}``), or JSON Lines
    as a list of rows. JSONL is read line by line and its vectors compacted as they come
    (``vector_compact``: float32 arrays), so the file's text and its rows' float lists are never all in memory."""
    # utf-8-sig: a file written with a byte-order mark (PowerShell 5's Out-File -Encoding utf8, Notepad) is
    # read as the same JSON; its first line was "not JSON".
    with path.open(encoding="utf-8-sig") as lines:
        first_number, first = next(((n, line) for n, line in enumerate(lines, start=1) if line.strip()), (0, ""))
        if not first:
            return []  # nothing but blank lines
        if first.lstrip().startswith("["):  # a JSON array: one document
            lines.seek(0)
            data = json_loads_bounded(lines.read())
            return [_compact(row) for row in data] if isinstance(data, list) else data
        try:
            head = json_loads_bounded(first)
        except json.JSONDecodeError as exc:
            if not first.lstrip().startswith("{"):
                raise _not_json(first_number, exc) from exc
            lines.seek(0)  # an object over several lines: one document
            try:
                return json_loads_bounded(lines.read())
            except json.JSONDecodeError as whole:  # neither a document nor JSON Lines: where the document breaks
                raise _not_json(whole.lineno, whole) from whole
        rows = [_compact(head)]
        for number, line in enumerate(lines, start=first_number + 1):
            if not line.strip():
                continue
            try:
                rows.append(_compact(json_loads_bounded(line)))
            except json.JSONDecodeError as exc:
                raise _not_json(number, exc) from exc
        if len(rows) == 1:
            return head  # a file of one line is one document ({"results": [...]} on one line)
        return rows


def _not_json(number: int, exc: json.JSONDecodeError) -> ValueError:
    return ValueError(
        f"line {number} is not JSON ({exc.msg}, column {exc.colno}); the file must be one JSON document or JSON "
        "Lines (one object a line)."
    )


def detect_format(data: Any) -> str:
    if isinstance(data, list) and data and isinstance(data[0], dict):
        first = data[0]
        if first.get("kind") == "header" and first.get("format") == EXPORT_FORMAT:
            return "colony"
        if "payload" in first:
            return "seed"
        if "memory" in first:
            return "mem0"
        if "content" in first:
            return "colony"
    if isinstance(data, dict):
        if "results" in data:
            return "mem0"
        if "result" in data or "points" in data:
            return "seed"
    raise ValueError(
        "Could not tell the dump's format; pass --format colony (Colony export), mem0 (Memory.get_all() JSON) "
        "or seed (Qdrant thought_space points)."
    )


def read_dump(path: Path, *, fmt: str = "auto", query_log: Path | None = None) -> Dump:
    data = _load_json_or_lines(path)
    if fmt == "auto":
        fmt = detect_format(data)
    if fmt == "colony":
        dump = _colony(data)
    elif fmt == "mem0":
        dump = Dump("mem0", list(_mem0(data)))
    elif fmt == "seed":
        dump = Dump("seed", list(_seed_points(data)))
    else:
        raise ValueError(f"Unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if query_log is not None:
        dump.query_logs.extend(read_seed_query_log(query_log))
    return dump


def _colony(data: Any) -> Dump:
    rows = data if isinstance(data, list) else [data]
    dump = Dump("colony", [])
    for row in rows:
        kind = row.get("kind", "thought") if isinstance(row, dict) else "thought"
        if kind == "header":
            dump.header = row
        elif kind == "query_log":
            dump.query_logs.append(row)
        elif kind == "correction_suggestion":
            dump.suggestions.append(row)
        else:
            dump.thoughts.append({k: v for k, v in row.items() if k != "kind"} if isinstance(row, dict) else row)
    return dump


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
        return True
    except (TypeError, ValueError):
        return False


def _mem0(data: Any) -> Iterator[dict[str, Any]]:
    memories = data.get("results", []) if isinstance(data, dict) else data
    if not isinstance(memories, list):
        raise ValueError("a Mem0 dump's results must be a list of memories.")
    for memory in memories:
        if not isinstance(memory, dict):
            yield memory  # reported as a bad line
            continue
        metadata = memory.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        who = memory.get("agent_id") or memory.get("user_id") or memory.get("actor_id") or "mem0"
        tags = metadata.get("tags") or memory.get("categories") or metadata.get("categories") or []
        item = {
            "content": memory.get("memory") or memory.get("text") or "",
            "contributor_id": str(who)[:100],
            "contributor_name": str(who)[:200],
            "created_at": memory.get("created_at"),
            "tags": [str(t)[:100] for t in tags] if isinstance(tags, list) else [],
            "context_metadata": {
                "mem0": {
                    k: memory.get(k)
                    for k in ("id", "hash", "user_id", "agent_id", "run_id", "updated_at", "metadata")
                    if memory.get(k) is not None
                }
            },
        }
        if _is_uuid(memory.get("id")):
            item["id"] = str(memory["id"])
        for name in ("topic", "thought_category"):
            if isinstance(metadata.get(name), str):
                item[name] = metadata[name]
        yield item


#: Seed payload fields Colony stores under the same name; the rest go to context_metadata.seed.
_SEED_DIRECT = ITEM_FIELDS - {"id", "agent", "embedding", "corrected_fact_embedding", "embedding_model"}


def _seed_points(data: Any) -> Iterator[dict[str, Any]]:
    if isinstance(data, dict):
        data = data.get("result", data)  # {"result": {"points": [...]}} (scroll) or {"result": [...]} (retrieve)
    if isinstance(data, dict):
        data = data.get("points", [])
    if not isinstance(data, list):
        raise ValueError("seed points must be a list of {id, vector, payload} objects.")
    for point in data:
        if not isinstance(point, dict):
            yield point
            continue
        payload = point.get("payload")
        payload = dict(payload) if isinstance(payload, dict) else {}
        item = {k: payload.pop(k) for k in list(payload) if k in _SEED_DIRECT}
        item["id"] = str(point.get("id"))
        vector = point.get("vector")
        if isinstance(vector, dict) and len(vector) == 1:
            vector = next(iter(vector.values()))
        if isinstance(vector, (list, np.ndarray)):
            item["embedding"] = vector_compact(vector)
            item["embedding_model"] = "all-MiniLM-L6-v2"
        metadata = item.get("context_metadata")
        if isinstance(metadata, str):
            metadata = {"text": metadata}
        metadata = metadata or {}
        if isinstance(metadata, dict):
            metadata = dict(metadata)
            if payload:  # access_log, knowledge_space_id, ...: kept for audit
                metadata["seed"] = payload
        # any other value is left as it is: the item's validation refuses it ("must be an object")
        item["context_metadata"] = metadata
        # Seed-brain dumps set refined_by/superseded by reference; the importer derives lineage instead.
        for name in ("refined_by", "superseded_by", "contradicted_by"):
            item.pop(name, None)
        yield item


def read_seed_query_log(path: Path) -> list[dict[str, Any]]:
    """Rows of the seed brain's SQLite ``query_log`` as Colony query-log rows (scores unknown: null)."""
    # as_uri() percent-encodes the path: a "?" or "#" in a file name stays part of the name
    connection = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    connection.row_factory = sqlite3.Row
    try:
        rows = connection.execute("SELECT * FROM query_log ORDER BY timestamp").fetchall()
    finally:
        connection.close()
    out = []
    for found in rows:
        row = dict(zip(found.keys(), found, strict=True))
        try:
            returned = json.loads(row.get("returned_ids") or "[]")
        except (TypeError, json.JSONDecodeError):
            returned = []
        returned = returned if isinstance(returned, list) else []
        timestamp = row.get("timestamp")
        if isinstance(timestamp, str) and timestamp and "T" not in timestamp:
            timestamp = timestamp.replace(" ", "T") + "+00:00"  # SQLite datetime('now') is UTC
        out.append(
            {
                "agent_ref": row.get("agent_id"),
                "session_id": row.get("session_id"),
                "query_text": row.get("query_text") or "",
                "results": [{"id": str(i), "score": None} for i in returned],
                "created_at": timestamp,
            }
        )
    return out
