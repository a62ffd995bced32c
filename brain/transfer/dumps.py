"""Planning a whole dump's import (``manage.py brain import FILE``): every row checked, ids settled,
before the first batch is stored (:func:`dump_plan`)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.transfer.serializers import ARRAY_REFS, FK_REFS, clean_each, item_clean, querylog_clean, suggestion_clean
from core.models import Space

#: Names the ids a file import gives its items: an item without an id gets uuid5(this, space + item
#: number + the item's JSON), and --new-ids maps an id to uuid5(this, space + old id). The same file
#: imported into the same space gives the same ids, so a second run knows what the first one stored.
IMPORT_ID_NAMESPACE = uuid.UUID("6f6c6f6e-792d-4269-8d70-6f7274000001")


def querylog_key(*, session_id: str, query_text: str, created_at: dt.datetime) -> tuple[str, str, str]:
    """What tells a query-log row from another (rows have no id of their own in an export)."""
    return (session_id, query_text, created_at.isoformat())


def querylog_keys(*, space: Space) -> set[tuple[str, str, str]]:
    return {
        querylog_key(session_id=s, query_text=q, created_at=c)
        for s, q, c in QueryLog.objects.filter(space=space).values_list("session_id", "query_text", "created_at")
    }


@dataclass
class DumpPlan:
    """What a file import will store, every row already checked (see :func:`dump_plan`)."""

    thoughts: list[dict[str, Any]]  # item_clean's rows: thoughts_import(..., precleaned=True)
    numbers: list[int]  # each of those thoughts' item number in the file
    query_logs: list[dict[str, Any]]  # querylog_clean's rows: querylogs_import(..., precleaned=True)
    suggestions: list[dict[str, Any]]  # suggestion_clean's rows: suggestions_import(..., precleaned=True)
    skipped: dict[str, int] = field(default_factory=dict)
    #: The links of thoughts left out as already stored that the space lacks (an import stopped before its
    #: final link pass): (thought, field, target), for ``thoughts_import_links``.
    skipped_links: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class DumpProblem:
    what: str  # "item", "query-log row", "correction suggestion"
    number: int  # from 1, among the file's rows of that kind
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.what} {self.number}"
        return f"{where} {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class DumpInvalid(Exception):
    """The file can't be imported as it is; nothing was stored. ``problems`` lists why."""

    def __init__(self, message: str, problems: list[DumpProblem]):
        super().__init__(message)
        self.message = message
        self.problems = problems


def _remap_ids(items: list[Any], logs: list[Any], suggestions: list[Any], new_id) -> None:
    """Give every thought of the file a new id, the file's references following (--new-ids)."""
    mapping = {
        str(item["id"]).lower(): str(new_id(item["id"]))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]
    }

    def ref(value: Any) -> Any:
        return mapping.get(value.lower(), value) if isinstance(value, str) else value

    for item in items:
        if not isinstance(item, dict):
            continue
        for name in ("id", *FK_REFS):
            if name in item:
                item[name] = ref(item[name])
        for name in (*ARRAY_REFS, "related_thoughts"):
            if isinstance(item.get(name), list):
                item[name] = [ref(v) for v in item[name]]
        co = item.get("co_retrieved_with")
        if isinstance(co, dict):
            item["co_retrieved_with"] = {ref(k): v for k, v in co.items()}
        elif isinstance(co, list):
            for entry in co:
                if isinstance(entry, dict) and "thought_id" in entry:
                    entry["thought_id"] = ref(entry["thought_id"])
    for log in logs:
        if isinstance(log, dict):
            log["stored_thought"] = ref(log.get("stored_thought"))
            for result in log.get("results") or []:
                if isinstance(result, dict) and "id" in result:
                    result["id"] = ref(result["id"])
    for suggestion in suggestions:
        if isinstance(suggestion, dict):
            if suggestion.get("id"):
                suggestion["id"] = str(new_id(f"suggestion {suggestion['id']}"))
            for name in ("thought", "contradicting_thought", "correction"):
                suggestion[name] = ref(suggestion.get(name))


def _in_chunks(model, ids: set, chunk: int = 10_000) -> dict[Any, Any]:
    """{pk: space_id} of the rows of ``model`` among ``ids``, asked in chunks."""
    ordered, found = list(ids), {}
    for start in range(0, len(ordered), chunk):
        found.update(model.objects.filter(pk__in=ordered[start : start + chunk]).values_list("pk", "space_id"))
    return found


def _clean_each(rows: list[Any], clean, what: str, problems: list[DumpProblem]) -> list[tuple[int, Any, dict]]:
    """(number, raw row, cleaned row) of every row ``clean`` accepts; the others go to ``problems``."""
    accepted, refused = clean_each(rows, clean)
    problems.extend(DumpProblem(what, number, bad.field, bad.message) for number, bad in refused)
    return accepted


def _stable_json(value: Any) -> Any:
    """JSON for what ``json`` can't write: a compacted vector as its numbers, anything else as text."""
    return value.tolist() if isinstance(value, np.ndarray) else str(value)


def _plan_thoughts(space: Space, thoughts: list[Any], skip_existing: bool, problems: list[DumpProblem]):
    """(rows to store, their item numbers, item number of every id in the file, how many left out)."""
    first_seen: dict[uuid.UUID, int] = {}
    cleaned = _clean_each(thoughts, item_clean, "item", problems)
    for number, item, row in cleaned:
        if item.get("id") in (None, ""):
            stable = json.dumps(item, sort_keys=True, default=_stable_json)
            row["id"] = uuid.uuid5(IMPORT_ID_NAMESPACE, f"{space.pk} {number} {stable}")
        if row["id"] in first_seen:
            problems.append(
                DumpProblem("item", number, "id", f"{row['id']} is also the id of item {first_seen[row['id']]}.")
            )
        first_seen.setdefault(row["id"], number)

    stored = _in_chunks(Thought, set(first_seen))
    here = {pk for pk, owner in stored.items() if owner == space.pk}
    elsewhere = sorted((first_seen[pk], pk) for pk, owner in stored.items() if owner != space.pk)
    if elsewhere:
        number, pk = elsewhere[0]
        problems.append(
            DumpProblem(
                "item",
                number,
                "id",
                f"{pk} is the id of a thought of another space ({len(elsewhere)} such item(s)); ids are unique "
                "on a server. To copy an export into another space, import it with --new-ids.",
            )
        )
    if here and not skip_existing:
        problems.append(
            DumpProblem(
                "item",
                min(first_seen[pk] for pk in here),
                "id",
                f"{len(here)} of the file's thoughts are already in space {space.slug} (an earlier import?). "
                "Run the import again with --skip-existing to store only what is missing.",
            )
        )
    kept = [(number, row) for number, _, row in cleaned if not (skip_existing and row["id"] in here)]
    skipped = [row for _, _, row in cleaned if skip_existing and row["id"] in here]
    return (
        [row for _, row in kept],
        [number for number, _ in kept],
        first_seen,
        len(cleaned) - len(kept),
        _links_missing(skipped),
    )


def _links_missing(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The links ``rows`` (thoughts already stored) carry that their stored thoughts lack: a pointer left
    empty, or a related thought not linked. An import stopped before its final link pass left them out."""
    if not rows:
        return []
    stored = {
        values["id"]: values
        for values in Thought.objects.filter(pk__in=[row["id"] for row in rows]).values(
            "id", *(f"{name}_id" for name in FK_REFS)
        )
    }
    related = set(
        Thought.related_thoughts.through.objects.filter(from_thought_id__in=list(stored)).values_list(
            "from_thought_id", "to_thought_id"
        )
    )
    links = []
    for row in rows:
        for name in FK_REFS:
            if row[name] is not None and stored[row["id"]][f"{name}_id"] is None:
                links.append((str(row["id"]), name, str(row[name])))
        links += [
            (str(row["id"]), "related_thoughts", str(ref))
            for ref in row["related_thoughts"]
            if (row["id"], ref) not in related
        ]
    return links


def _plan_query_logs(space: Space, rows: list[Any], skip_existing: bool, problems: list[DumpProblem]):
    """(rows to store, how many left out: already in the space by session, text and time)."""
    known = querylog_keys(space=space) if skip_existing and rows else set()
    kept, skipped = [], 0
    for _, _, log in _clean_each(rows, querylog_clean, "query-log row", problems):
        key = querylog_key(session_id=log["session_id"], query_text=log["query_text"], created_at=log["created_at"])
        if key in known:
            skipped += 1
        else:
            kept.append(log)
    return kept, skipped


def _plan_suggestions(space: Space, rows: list[Any], in_file: dict, skip_existing: bool, problems: list[DumpProblem]):
    """(rows to store, how many left out); each must be about a thought of the file or the space."""
    cleaned = _clean_each(rows, suggestion_clean, "correction suggestion", problems)
    taken = _in_chunks(CorrectionSuggestion, {s["id"] for _, _, s in cleaned})
    outside = {s["thought"] for _, _, s in cleaned} - set(in_file)
    present = {pk for pk, owner in _in_chunks(Thought, outside).items() if owner == space.pk}
    kept, skipped = [], 0
    for number, _, suggestion in cleaned:
        what, owner = "correction suggestion", taken.get(suggestion["id"])
        if suggestion["thought"] not in in_file and suggestion["thought"] not in present:
            message = f"no thought {suggestion['thought']} in the file or in space {space.slug}."
            problems.append(DumpProblem(what, number, "thought", message))
        elif owner == space.pk and skip_existing:
            skipped += 1
        elif owner is not None:
            where = (
                f"in space {space.slug}; run the import again with --skip-existing."
                if owner == space.pk
                else "in another space; import the file with --new-ids."
            )
            message = f"a correction suggestion with id {suggestion['id']} exists {where}"
            problems.append(DumpProblem(what, number, "id", message))
        else:
            kept.append(suggestion)
    return kept, skipped


def dump_plan(
    *,
    space: Space,
    thoughts: list[Any],
    query_logs: list[Any],
    suggestions: list[Any],
    skip_existing: bool = False,
    new_ids: bool = False,
) -> DumpPlan:
    """Check a whole dump before anything of it is stored; raises :class:`DumpInvalid` listing every
    problem (fields, ids repeated in the file, ids taken by other spaces' thoughts or already in this
    one, suggestions about thoughts that are nowhere), so a file import fails before its first batch
    rather than half-way. Items without an id get a stable one (:data:`IMPORT_ID_NAMESPACE`); with
    ``skip_existing`` what is already in the space (thoughts and suggestions by id, query-log rows
    by session, text and time) is left out, so a stopped import can be finished by running it again."""
    if new_ids:
        _remap_ids(
            thoughts,
            query_logs,
            suggestions,
            lambda old: uuid.uuid5(IMPORT_ID_NAMESPACE, f"{space.pk} {str(old).lower()}"),
        )
    problems: list[DumpProblem] = []
    rows, numbers, in_file, thoughts_skipped, skipped_links = _plan_thoughts(space, thoughts, skip_existing, problems)
    logs, logs_skipped = _plan_query_logs(space, query_logs, skip_existing, problems)
    kept_suggestions, suggestions_skipped = _plan_suggestions(space, suggestions, in_file, skip_existing, problems)
    if problems:
        raise DumpInvalid(f"{len(problems)} problem(s) in the file; nothing was imported.", problems)
    return DumpPlan(
        thoughts=rows,
        numbers=numbers,
        query_logs=logs,
        suggestions=kept_suggestions,
        skipped={
            "thoughts": thoughts_skipped,
            "query_logs": logs_skipped,
            "correction_suggestions": suggestions_skipped,
        },
        skipped_links=skipped_links,
    )
