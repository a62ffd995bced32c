"""``manage.py brain import FILE`` and ``brain export FILE``, with progress bars.

They run the services behind ``POST /api/v1/thoughts/import`` in-process, batch by batch; see
``brain.transfer.readers`` for the formats and ``brain.transfer.services`` for what an import keeps.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from tqdm import tqdm

from api.errors import ApplicationError
from brain.transfer.dumps import DumpInvalid, dump_plan
from brain.transfer.export import space_export_counts, space_export_rows
from brain.transfer.readers import FORMATS, Dump, read_dump
from brain.transfer.services import (
    ImportMode,
    querylogs_import,
    suggestions_import,
    thoughts_import,
    thoughts_import_links,
)
from core import services
from core.choices import DEFAULT_SPACE_SLUG


class Import:
    name = "import"
    help = "import a dump: Colony's own export, a Mem0 get_all() JSON dump or seed-brain Qdrant points"

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--space", default=DEFAULT_SPACE_SLUG)
        parser.add_argument("--format", default="auto", choices=FORMATS)
        parser.add_argument("--query-log", type=Path, help="the seed brain's SQLite database with its query_log table")
        parser.add_argument("--batch-size", type=int, default=500, help="thoughts per transaction (default 500)")
        parser.add_argument(
            "--skip-existing",
            action="store_true",
            help="leave out what an earlier import of the file stored in the space (to finish one that stopped)",
        )
        parser.add_argument(
            "--new-ids",
            action="store_true",
            help="give the file's thoughts new ids, references following (to copy an export into another space)",
        )
        parser.add_argument(
            "--into-other-space",
            action="store_true",
            help="restore an export into --space although its header names another space, keeping its ids "
            "(a renamed space, a backup taken on another server)",
        )
        parser.add_argument("--no-progress", action="store_true")

    @staticmethod
    def read(path: Path, options: dict[str, Any]) -> Dump:
        if not path.is_file():
            raise CommandError(f"No file {path}." if not path.exists() else f"{path} is not a file.")
        query_log: Path | None = options["query_log"]
        if query_log is not None and not query_log.is_file():
            raise CommandError(f"No query-log database {query_log} (--query-log: the seed brain's SQLite file).")
        try:
            dump = read_dump(path, fmt=options["format"], query_log=query_log)
        except sqlite3.Error as exc:
            raise CommandError(
                f"Could not read the query log {query_log}: {exc}. --query-log takes the seed brain's SQLite "
                "database, the one with the query_log table."
            ) from exc
        except UnicodeDecodeError as exc:
            raise CommandError(
                f"Could not read {path}: it is not UTF-8 (byte 0x{exc.object[exc.start]:02x} is not part of any "
                f"character). Save it as UTF-8 first, e.g. iconv -f WINDOWS-1252 -t UTF-8 {path} > {path}.utf8"
            ) from exc
        except ValueError as exc:  # JSON errors
            raise CommandError(f"Could not read {path}: {exc}") from exc
        except OSError as exc:
            raise CommandError(f"Could not read {path}: {exc.strerror}.") from exc
        counted = (dump.header or {}).get("counts")
        if isinstance(counted, dict):
            found = {
                "thoughts": len(dump.thoughts),
                "query_logs": len(dump.query_logs) if query_log is None else None,  # --query-log adds rows
                "correction_suggestions": len(dump.suggestions),
            }
            short = {
                name: (counted[name], n) for name, n in found.items() if n is not None and counted.get(name, n) != n
            }
            if short:
                listed = ", ".join(
                    f"{want} {name.replace('_', ' ')} (it holds {n})" for name, (want, n) in short.items()
                )
                raise CommandError(
                    f"{path} is not a whole export: its header promises {listed}, so the export stopped before it "
                    "ended or the file was cut. Export again; if you removed rows on purpose, remove the header's "
                    '"counts" too.'
                )
        return dump

    def run(self, command: BaseCommand, options: dict[str, Any]) -> dict[str, int]:
        space = services.space_get(slug=options["space"])
        path: Path = options["file"]
        dump = self.read(path, options)
        try:
            plan = dump_plan(
                space=space,
                thoughts=dump.thoughts,
                query_logs=dump.query_logs,
                suggestions=dump.suggestions,
                skip_existing=options["skip_existing"],
                new_ids=options["new_ids"],
                exported_from=(dump.header or {}).get("space"),
                into_other_space=options["into_other_space"],
                leave_out_unknown_refs=dump.format == "colony",
            )
        except DumpInvalid as exc:
            listed = "\n".join(f"  {problem}" for problem in exc.problems[:50])
            more = f"\n  ... and {len(exc.problems) - 50} more" if len(exc.problems) > 50 else ""
            raise CommandError(f"{path}: {exc.message}\n{listed}{more}") from exc
        colony = dump.format == "colony"
        size = max(1, options["batch_size"])
        started = time.perf_counter()
        imported, links = 0, list(plan.skipped_links)  # those a stopped import left out, then the batches' own
        bar = tqdm(total=len(plan.thoughts), unit="thought", disable=options["no_progress"], desc="import")
        try:
            for start in range(0, len(plan.thoughts), size):
                batch = plan.thoughts[start : start + size]
                result = thoughts_import(
                    space=space,
                    agent=None,
                    items=batch,
                    mode=ImportMode.OPERATOR,
                    first_line=start + 1,
                    derive_lineage=not colony,
                    defer_links=True,
                    precleaned=True,
                )
                imported += len(result.ids)
                links.extend(result.deferred_links)
                bar.update(len(batch))
        except ApplicationError as exc:  # the database refused a batch, the model failed, ...
            lines = (exc.extra or {}).get("lines", [])
            # thoughts_import numbers the planned thoughts from 1; the file's numbers differ when some were left out
            problems = "".join(f"\n  item {plan.numbers[e['line'] - 1]} {e['field']}: {e['message']}" for e in lines)
            raise CommandError(
                f"{exc.message}{problems}\n{imported} thoughts of earlier batches were imported. Run the same "
                "command again with --skip-existing to import the rest."
            ) from exc
        finally:
            bar.close()
        dangling = thoughts_import_links(space=space, links=links)
        with transaction.atomic():
            logs = querylogs_import(space=space, rows=plan.query_logs, precleaned=True)
            suggestions = (
                suggestions_import(space=space, rows=plan.suggestions, precleaned=True) if plan.suggestions else 0
            )
        seconds = time.perf_counter() - started
        rate = imported / seconds if seconds else 0.0
        command.stdout.write(
            f"Imported {imported} thoughts ({dump.format} format), {logs} query-log rows and {suggestions} "
            f"correction suggestions into space {space.slug} in {seconds:.1f} s ({rate:.0f} thoughts/s)."
        )
        if any(plan.skipped.values()):
            command.stdout.write(
                f"Already in the space, left out: {plan.skipped['thoughts']} thoughts, {plan.skipped['query_logs']} "
                f"query-log rows, {plan.skipped['correction_suggestions']} correction suggestions."
            )
        for link in [*plan.refs_left_out, *dangling]:
            command.stderr.write(f"Reference left out: {link}")
        return {
            "thoughts": imported,
            "query_logs": logs,
            "suggestions": suggestions,
            **{f"skipped_{k}": v for k, v in plan.skipped.items()},
        }


class Export:
    name = "export"
    help = "write the space's whole brain as Colony's own export (JSONL; brain import reads it back)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--space", default=DEFAULT_SPACE_SLUG)
        parser.add_argument("--no-embeddings", action="store_true", help="leave the vectors out (import re-embeds)")
        parser.add_argument("--no-progress", action="store_true")

    def run(self, command: BaseCommand, options: dict[str, Any]) -> dict[str, int]:
        path: Path = options["file"]
        # Written beside the file and renamed when complete: an export that stops half-way (an error,
        # a kill) leaves no file that looks finished. The partial file is always created new under a
        # random name (mkstemp: O_CREAT|O_EXCL, mode 0600), so a file or link planted beside the export
        # is never written through.
        try:
            descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".partial")
        except OSError as exc:
            raise CommandError(f"Could not write {path}: {exc.strerror}.") from exc
        partial = Path(name)
        outermost = not connection.in_atomic_block
        try:
            # one snapshot: rows added meanwhile are not half in the file
            with open(descriptor, "w", encoding="utf-8") as out, transaction.atomic():
                if outermost:
                    with connection.cursor() as cursor:
                        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                space = services.space_get(slug=options["space"])
                counts = space_export_counts(space=space)
                total = sum(counts.values())
                with tqdm(total=total, unit="row", disable=options["no_progress"], desc="export") as bar:
                    for row in space_export_rows(space=space, embeddings=not options["no_embeddings"]):
                        out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
                        if row["kind"] != "header":
                            bar.update(1)
            os.replace(partial, path)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise CommandError(f"Could not write {path}: {exc.strerror}.") from exc
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        command.stdout.write(
            f"Exported {counts['thoughts']} thoughts, {counts['query_logs']} query-log rows and "
            f"{counts['correction_suggestions']} correction suggestions of space {space.slug} to {path}."
        )
        return counts
