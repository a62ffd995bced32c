"""``manage.py brain import FILE`` and ``brain export FILE`` (issue 14 item 4), with progress bars.

They run the services behind ``POST /api/v1/thoughts/import`` in-process, batch by batch; see
``brain.importers`` for the formats and ``brain.services.transfer`` for what an import keeps.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from tqdm import tqdm

from brain.importers import FORMATS, read_dump
from brain.services.transfer import (
    ImportInvalid,
    querylogs_import,
    space_export_counts,
    space_export_rows,
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
        parser.add_argument("--no-progress", action="store_true")

    def run(self, command: BaseCommand, options: dict[str, Any]) -> dict[str, int]:
        space = services.space_get(slug=options["space"])
        path: Path = options["file"]
        if not path.exists():
            raise CommandError(f"No file {path}.")
        try:
            dump = read_dump(path, fmt=options["format"], query_log=options["query_log"])
        except (ValueError, json.JSONDecodeError) as exc:
            raise CommandError(f"Could not read {path}: {exc}") from exc
        colony = dump.format == "colony"
        size = max(1, options["batch_size"])
        started = time.perf_counter()
        imported, links = 0, []
        bar = tqdm(total=len(dump.thoughts), unit="thought", disable=options["no_progress"], desc="import")
        for start in range(0, len(dump.thoughts), size):
            batch = dump.thoughts[start : start + size]
            try:
                result = thoughts_import(
                    space=space,
                    agent=None,
                    items=batch,
                    first_line=start + 1,
                    derive_lineage=not colony,
                    defer_links=True,
                )
            except ImportInvalid as exc:
                bar.close()
                problems = "\n".join(f"  item {e['line']} {e['field']}: {e['message']}" for e in exc.extra["lines"])
                raise CommandError(
                    f"{exc.message}\n{problems}\n{imported} thoughts of earlier batches were imported; "
                    f"fix the file and import the rest (items from {start + 1} on)."
                ) from exc
            imported += len(result.ids)
            links.extend(result.deferred_links)
            bar.update(len(batch))
        bar.close()
        dangling = thoughts_import_links(space=space, links=links)
        with transaction.atomic():
            logs = querylogs_import(space=space, rows=dump.query_logs)
            suggestions = suggestions_import(space=space, rows=dump.suggestions) if dump.suggestions else 0
        seconds = time.perf_counter() - started
        rate = imported / seconds if seconds else 0.0
        command.stdout.write(
            f"Imported {imported} thoughts ({dump.format} format), {logs} query-log rows and {suggestions} "
            f"correction suggestions into space {space.slug} in {seconds:.1f} s ({rate:.0f} thoughts/s)."
        )
        for link in dangling:
            command.stderr.write(f"Reference to a thought that is not in the space, left out: {link}")
        return {"thoughts": imported, "query_logs": logs, "suggestions": suggestions}


class Export:
    name = "export"
    help = "write the space's whole brain as Colony's own export (JSONL; brain import reads it back)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--space", default=DEFAULT_SPACE_SLUG)
        parser.add_argument("--no-embeddings", action="store_true", help="leave the vectors out (import re-embeds)")
        parser.add_argument("--no-progress", action="store_true")

    def run(self, command: BaseCommand, options: dict[str, Any]) -> dict[str, int]:
        outermost = not connection.in_atomic_block
        with transaction.atomic():  # one snapshot: rows added meanwhile are not half in the file
            if outermost:
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            space = services.space_get(slug=options["space"])
            counts = space_export_counts(space=space)
            with (
                options["file"].open("w", encoding="utf-8") as out,
                tqdm(total=sum(counts.values()), unit="row", disable=options["no_progress"], desc="export") as bar,
            ):
                for row in space_export_rows(space=space, embeddings=not options["no_embeddings"]):
                    out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
                    if row["kind"] != "header":
                        bar.update(1)
        command.stdout.write(
            f"Exported {counts['thoughts']} thoughts, {counts['query_logs']} query-log rows and "
            f"{counts['correction_suggestions']} correction suggestions of space {space.slug} to {options['file']}."
        )
        return counts
