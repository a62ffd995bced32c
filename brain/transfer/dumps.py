"""Planning a whole dump's import (``manage.py brain import FILE``): every row checked, ids settled,
before the first batch is stored (:func:`dump_plan`)."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from brain.choices import ThoughtCategory
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.transfer.serializers import ARRAY_REFS, FK_REFS, clean_each, item_clean, querylog_clean, suggestion_clean
from core.models import Space

#: Names the ids a file import gives its items: an item without an id gets uuid5(this, space + item
#: number + the item's JSON), and --new-ids maps an id to uuid5(this, space + old id). The same file
#: imported into the same space gives the same ids, so a second run knows what the first one stored.
IMPORT_ID_NAMESPACE = uuid.UUID("6f6c6f6e-792d-4269-8d70-6f7274000001")


def querylog_key(*, session_id: str, agent_ref: str, created_at: dt.datetime) -> tuple[str, str, dt.datetime]:
    """What tells a query-log row from another: its session, who asked and when. Not its text, which a
    redaction erases from the stored row (a backup's copy of it would read as missing and bring the text
    back), and not its database id, which a copy into another space can't keep."""
    return (session_id, agent_ref, created_at)


def querylog_keys(*, space: Space, rows: list[dict[str, Any]], chunk: int = 10_000) -> set[tuple]:
    """The keys (:func:`querylog_key`) of ``space``'s stored query-log rows that some of ``rows`` have,
    asked in chunks by time."""
    times, found = sorted({row["created_at"] for row in rows}), set()
    for start in range(0, len(times), chunk):
        stored = QueryLog.objects.filter(space=space, created_at__in=times[start : start + chunk])
        found.update(
            querylog_key(session_id=s, agent_ref=a, created_at=c)
            for s, a, c in stored.values_list("session_id", "agent_ref", "created_at")
        )
    return found


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
    #: Lineage ids left out of the thoughts' arrays, as "thought field -> id: why" (a Colony export's
    #: ``source_ids`` or ``supersedes`` naming a thought deleted since, or of no thought of the space).
    refs_left_out: list[str] = field(default_factory=list)


@dataclass
class DumpProblem:
    what: str  # "item", "query-log row", "correction suggestion", "header"
    number: int | None  # from 1, among the file's rows of that kind (None: the file's one header)
    field: str
    message: str

    def __str__(self) -> str:
        where = self.what if self.number is None else f"{self.what} {self.number}"
        return f"{where} {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class DumpInvalid(Exception):
    """The file can't be imported as it is; nothing was stored. ``problems`` lists why."""

    def __init__(self, message: str, problems: list[DumpProblem]):
        super().__init__(message)
        self.message = message
        self.problems = problems


#: The key of a correction's ``context_metadata`` naming the suggestion it was accepted from
#: (``brain.services.corrections.suggestion_accept``).
ACCEPTED_SUGGESTION_KEY = "accepted_suggestion"


def _remap_ids(items: list[Any], logs: list[Any], suggestions: list[Any], new_id) -> None:
    """Give every thought and suggestion of the file a new id, the file's references following (--new-ids),
    those Colony writes into a thought's ``context_metadata`` included: every thought id a transition
    marker's record names (the contribution a hand-off was given on, which the memory gate finds it by)
    and the suggestion a correction was accepted from. A marker's ``task_id`` names a task, which an export
    does not carry, and stays as it is."""
    mapping = {
        str(item["id"]).lower(): str(new_id(item["id"]))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"]
    }
    suggestion_mapping = {
        str(suggestion["id"]).lower(): str(new_id(f"suggestion {suggestion['id']}"))
        for suggestion in suggestions
        if isinstance(suggestion, dict) and suggestion.get("id")
    }

    def ref(value: Any) -> Any:
        return mapping.get(value.lower(), value) if isinstance(value, str) else value

    for item in items:
        if not isinstance(item, dict):
            continue
        metadata = item.get("context_metadata")
        if isinstance(metadata, dict):
            if item.get("thought_category") == ThoughtCategory.TRANSITION_MARKER:
                metadata = {key: ref(value) for key, value in metadata.items()}
            accepted = metadata.get(ACCEPTED_SUGGESTION_KEY)
            if isinstance(accepted, str):
                metadata = {**metadata, ACCEPTED_SUGGESTION_KEY: suggestion_mapping.get(accepted.lower(), accepted)}
            item["context_metadata"] = metadata
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
                suggestion["id"] = suggestion_mapping[str(suggestion["id"]).lower()]
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


def _plan_thoughts(
    space: Space, thoughts: list[Any], skip_existing: bool, problems: list[DumpProblem], *, leave_out_unknown_refs: bool
):
    """(rows to store, their item numbers, item number of every id in the file, how many left out, the
    links of those left out, the lineage ids left out)."""
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
    refs_left_out = _check_array_refs(space, cleaned, set(first_seen), problems, leave_out=leave_out_unknown_refs)
    kept = [(number, row) for number, _, row in cleaned if not (skip_existing and row["id"] in here)]
    skipped = [row for _, _, row in cleaned if skip_existing and row["id"] in here]
    return (
        [row for _, row in kept],
        [number for number, _ in kept],
        first_seen,
        len(cleaned) - len(kept),
        _links_missing(skipped),
        refs_left_out,
    )


def _check_array_refs(
    space: Space, cleaned: list[tuple[int, Any, dict]], in_file: set, problems: list[DumpProblem], *, leave_out: bool
) -> list[str]:
    """Every id of an item's ``source_ids`` and ``supersedes`` names a thought of the file or of ``space``,
    as the API's import requires: the batches store these arrays as they are, and a seed dump's lineage
    supersedes what they name, so an id of another space (or of no thought) would make a thought of this
    space name, or close the suggestions of, another space's thought. An id of another space is reported
    as one of no thought. Such an id is a problem, or with ``leave_out`` is taken out of its array;
    returns what was left out."""
    outside = {ref for _, _, row in cleaned for name in ARRAY_REFS for ref in row[name] if ref not in in_file}
    present = {pk for pk, owner in _in_chunks(Thought, outside).items() if owner == space.pk} if outside else set()
    left_out = []
    for number, _, row in cleaned:
        for name in ARRAY_REFS:
            missing = [ref for ref in row[name] if ref not in in_file and ref not in present]
            if not missing:
                continue
            if leave_out:
                row[name] = [ref for ref in row[name] if ref in in_file or ref in present]
                left_out += [f"{row['id']} {name} -> {ref}: no such thought in the space." for ref in missing]
                continue
            more = f" ({len(missing)} such ids)" if len(missing) > 1 else ""
            message = f"no thought {missing[0]} in the file or in space {space.slug}{more}."
            problems.append(DumpProblem("item", number, name, message))
    return left_out


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


def _plan_query_logs(space: Space, rows: list[Any], problems: list[DumpProblem]):
    """(rows to store, how many left out: already in the space by :func:`querylog_key`). A row already
    there is left out with or without --skip-existing: it is the same search, and a second copy would be
    counted again by the memory gates and the quality metrics (a dump without thoughts has nothing else
    that tells it was restored before)."""
    cleaned = [log for _, _, log in _clean_each(rows, querylog_clean, "query-log row", problems)]
    known = querylog_keys(space=space, rows=cleaned) if cleaned else set()
    kept = [
        log
        for log in cleaned
        if querylog_key(session_id=log["session_id"], agent_ref=log["agent_ref"], created_at=log["created_at"])
        not in known
    ]
    return kept, len(cleaned) - len(kept)


def _plan_suggestions(space: Space, rows: list[Any], in_file: dict, skip_existing: bool, problems: list[DumpProblem]):
    """(rows to store, how many left out); each must be about a thought of the file or the space."""
    cleaned = _clean_each(rows, suggestion_clean, "correction suggestion", problems)
    first_seen: dict[uuid.UUID, int] = {}
    for number, _, suggestion in cleaned:
        if suggestion["id"] in first_seen:
            message = f"{suggestion['id']} is also the id of correction suggestion {first_seen[suggestion['id']]}."
            problems.append(DumpProblem("correction suggestion", number, "id", message))
        first_seen.setdefault(suggestion["id"], number)
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


def _space_problem(space: Space, exported_from: Any) -> DumpProblem | None:
    """The header's space when it is not ``space``: restored there as it is, another team's thoughts,
    markers, query log and suggestions would become this space's own (their agents' names mapped onto its
    agents) with nothing else to tell the mistake when no id of the file is taken (the source space
    emptied, a backup from another server)."""
    if not isinstance(exported_from, str) or exported_from in ("", space.slug):
        return None
    shown = exported_from if re.fullmatch(r"[-\w]{1,64}", exported_from, re.ASCII) else repr(exported_from[:64])
    return DumpProblem(
        "header",
        None,
        "space",
        f"the file is an export of space {shown}, not of space {space.slug}. To copy it into space "
        f"{space.slug} under new ids, run the import again with --new-ids; to restore it there with its own ids "
        "(the space was renamed, or the backup was taken on another server), add --into-other-space; to "
        f"restore it where it came from, give --space {shown}.",
    )


def dump_plan(
    *,
    space: Space,
    thoughts: list[Any],
    query_logs: list[Any],
    suggestions: list[Any],
    skip_existing: bool = False,
    new_ids: bool = False,
    leave_out_unknown_refs: bool = False,
    exported_from: Any = None,
    into_other_space: bool = False,
) -> DumpPlan:
    """Check a whole dump before anything of it is stored; raises :class:`DumpInvalid` listing every
    problem (fields, ids repeated in the file, ids taken by other spaces' thoughts or already in this
    one, lineage arrays and suggestions naming thoughts that are in neither the file nor the space), so
    a file import fails before its first batch rather than half-way. Items without an id get a stable one
    (:data:`IMPORT_ID_NAMESPACE`); with ``skip_existing`` the thoughts and suggestions already in the
    space (by id) are left out, so a stopped import can be finished by running it again. Query-log rows
    already in the space (by session, agent and time) are left out always. With
    ``leave_out_unknown_refs`` (a Colony export: the admin may have deleted a thought its arrays name) a
    lineage id of no thought of the file or the space is left out and reported instead of refused.
    ``exported_from`` (the space a Colony export's header names; a seed or Mem0 dump names none) other than
    ``space`` is a problem unless ``new_ids`` makes the import a copy or ``into_other_space`` says the same
    brain goes into another space on purpose."""
    if new_ids:
        _remap_ids(
            thoughts,
            query_logs,
            suggestions,
            lambda old: uuid.uuid5(IMPORT_ID_NAMESPACE, f"{space.pk} {str(old).lower()}"),
        )
    problems: list[DumpProblem] = []
    if not (new_ids or into_other_space) and (problem := _space_problem(space, exported_from)) is not None:
        problems.append(problem)
    rows, numbers, in_file, thoughts_skipped, skipped_links, refs_left_out = _plan_thoughts(
        space, thoughts, skip_existing, problems, leave_out_unknown_refs=leave_out_unknown_refs
    )
    logs, logs_skipped = _plan_query_logs(space, query_logs, problems)
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
        refs_left_out=refs_left_out,
    )
