"""manage.py brain query|contribute|refine|consolidate|correct|history|highways — the brain from a terminal.

Each subcommand is a small class in :data:`SUBCOMMANDS`: its ``name``, ``help``,
``add_arguments(parser)`` and ``run(command, options)``. Adding one (e.g. ``brain correct``) is
one class and one entry in that list. The memory subcommands run the same orchestration as the
API (``memory_run``) as the agent named by ``--agent``, after the API's own input validation;
``correct`` runs the service behind ``POST /api/v1/thoughts/{id}/correct``.
"""

from __future__ import annotations

import abc
import json
import textwrap
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from api.errors import ApplicationError
from api.parsers import json_loads_bounded
from api.text import one_line
from brain.choices import ThoughtCategory
from brain.inputs import MemoryInputSerializer, SourceRefSerializer
from brain.selectors.activity import thought_highways
from brain.selectors.lineage import DEFAULT_MAX_DEPTH, MAX_MAX_DEPTH, thought_lineage
from brain.services.corrections import correction_supersede_guidance, thought_correct_by_id
from brain.services.memory import memory_run
from brain.transfer.cli import Export, Import
from core import selectors, services
from core.choices import DEFAULT_SPACE_SLUG
from core.management.arguments import arguments_refuse_unstorable


def _validated(payload: dict[str, Any]) -> dict[str, Any]:
    serializer = MemoryInputSerializer(data=payload)
    if not serializer.is_valid():
        problems = "; ".join(f"{field}: {' '.join(map(str, errors))}" for field, errors in serializer.errors.items())
        raise CommandError(f"Invalid input. {problems}")
    return serializer.validated_data


class Subcommand(abc.ABC):
    name = ""
    help = ""

    def add_arguments(self, parser) -> None:
        parser.add_argument("--space", default=DEFAULT_SPACE_SLUG)

    @abc.abstractmethod
    def run(self, command: BaseCommand, options: dict[str, Any]) -> Any: ...


class MemorySubcommand(Subcommand):
    """A subcommand that makes one memory call as an agent and prints the answer."""

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--agent", required=True, help="name of the agent to act as (manage.py agent list)")
        parser.add_argument("--session", default="", help="session id to continue (printed by earlier calls)")
        parser.add_argument("--context", default="")
        parser.add_argument("--json", action="store_true", help="print the raw API response")

    @abc.abstractmethod
    def payload(self, options: dict[str, Any]) -> dict[str, Any]: ...

    def run(self, command: BaseCommand, options: dict[str, Any]) -> dict[str, Any]:
        space = services.space_get(slug=options["space"])
        agent = selectors.agent_get(space=space, name=options["agent"])
        payload = {"session_id": options["session"], "context": options["context"], **self.payload(options)}
        response = memory_run(
            agent=agent, request=_validated({k: v for k, v in payload.items() if v not in ("", None)})
        )
        if options["json"]:
            command.stdout.write(json.dumps(response, indent=2))
        else:
            print_memory(command, response)
        return response


def print_memory(command: BaseCommand, response: dict[str, Any]) -> None:
    result, trace = response["result"], response["trace"]
    out = command.stdout.write
    if trace["thought_id"]:
        out(f"Stored thought {trace['thought_id']}.")
    out(f"session {trace['session_id']}  ({trace['thoughts_retrieved']} result(s), {trace['retrieval_method']})")
    for rank, source in enumerate(result["sources"], start=1):
        labels = [source["thought_category"]] + ([source["topic"]] if source["topic"] else [])
        if source["superseded"]:
            labels.append(f"superseded by {source['refined_by'] or '?'}")
        labelled = f"[{one_line(', '.join(labels))}]  {one_line(source['contributor'])}"
        out(f"{rank:2}. {source['score']:.2f}  {source['thought_id']}  {labelled}")
        out(f"      {one_line(source['content_preview'])}")
        out(f"      why: {source['matching_reason']}")
    if result["guidance"]:
        out("guidance:")
        for line in result["guidance"].splitlines():
            out(textwrap.indent(textwrap.fill(line, 100), "  "))
    for suggestion in result["pending_corrections"]:
        out(
            f"pending correction {suggestion['suggestion_id']} on {suggestion['thought_id']}: "
            f"{suggestion['statement']}  (accept: {suggestion['accept']})"
        )


class Query(MemorySubcommand):
    name = "query"
    help = "ask the brain (a declarative prompt over 50 characters is also stored, as on the API)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("prompt")
        super().add_arguments(parser)
        parser.add_argument("--limit", type=int)
        parser.add_argument("--topic", dest="filter_topic", default="")
        parser.add_argument("--category", dest="filter_category", default="", choices=["", *ThoughtCategory.values])

    def payload(self, options):
        return {k: options[k] for k in ("prompt", "limit", "filter_topic", "filter_category")}


class Contribute(MemorySubcommand):
    name = "contribute"
    help = "store a thought (it must meet the contribution threshold)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("prompt")
        super().add_arguments(parser)
        parser.add_argument("--category", dest="thought_category", default="")
        parser.add_argument("--topic", default="")
        parser.add_argument("--temporal-scope", dest="temporal_scope", default="", help="ISO date")
        parser.add_argument("--tags", default="", help="comma-separated")
        parser.add_argument("--related", default="", help="ids of related thoughts, comma-separated (linked both ways)")
        parser.add_argument("--alternatives", dest="alternatives_considered", default="", help="for decision_record")
        parser.add_argument(
            "--source-ref", dest="source_ref", default="", help='JSON, e.g. {"type":"task","value":"x"}'
        )

    def payload(self, options):
        fields = ("prompt", "thought_category", "topic", "temporal_scope", "alternatives_considered")
        payload = {k: options[k] for k in fields}
        payload["tags"] = [t.strip() for t in options["tags"].split(",") if t.strip()] or None
        payload["related_thoughts"] = [i.strip() for i in options["related"].split(",") if i.strip()] or None
        if options["source_ref"]:
            payload["source_ref"] = _source_ref(options["source_ref"])
        return payload

    def run(self, command, options):
        response = super().run(command, options)
        if not response["trace"]["thought_id"]:
            command.stderr.write(
                "Not stored: a contribution is a statement of more than 50 characters, not a question or a follow-up."
            )
        return response


class Refine(MemorySubcommand):
    name = "refine"
    help = "store a better version of a thought (it becomes superseded)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("thought_id")
        parser.add_argument("prompt")
        super().add_arguments(parser)

    def payload(self, options):
        return {"prompt": options["prompt"], "refines": options["thought_id"]}


class Consolidate(MemorySubcommand):
    name = "consolidate"
    help = "merge several thoughts (comma-separated ids) into one"

    def add_arguments(self, parser) -> None:
        parser.add_argument("thought_ids", help="id1,id2,...")
        parser.add_argument("prompt")
        super().add_arguments(parser)

    def payload(self, options):
        ids = [i.strip() for i in options["thought_ids"].split(",") if i.strip()]
        return {"prompt": options["prompt"], "consolidates": ids}


def _source_ref(raw: str) -> dict | None:
    if not raw:
        return None
    try:
        value = json_loads_bounded(raw)
    except ValueError:
        raise CommandError("--source-ref must be JSON.") from None
    serializer = SourceRefSerializer(data=value)
    if not serializer.is_valid():
        raise CommandError(f'--source-ref: {serializer.errors} (e.g. {{"type":"url","value":"human-correction"}}).')
    return dict(serializer.validated_data)


class Correct(Subcommand):
    name = "correct"
    help = "correct a wrong thought: store a correction that supersedes it (and any --supersedes)"

    def add_arguments(self, parser) -> None:
        parser.add_argument("thought_id")
        parser.add_argument("correct_fact", help="what is right")
        super().add_arguments(parser)
        parser.add_argument("--agent", required=True, help="name of the agent to act as (manage.py agent list)")
        parser.add_argument("--corrected-fact", default="", help="what was wrong (default: the thought's content)")
        parser.add_argument("--content", default="", help="text of the correction (default: written from the facts)")
        parser.add_argument("--topic", default="", help="default: the thought's topic")
        parser.add_argument("--supersedes", default="", help="more wrong copies of the fact: id1,id2,...")
        parser.add_argument("--source-ref", dest="source_ref", default="", help='JSON, e.g. {"type":"url","value":"x"}')

    def run(self, command, options):
        space = services.space_get(slug=options["space"])
        agent = selectors.agent_get(space=space, name=options["agent"])
        if not options["correct_fact"].strip():
            raise CommandError("Say what the correct fact is.")
        correction, count = thought_correct_by_id(
            space=space,
            agent=agent,
            thought_id=options["thought_id"],
            correct_fact=options["correct_fact"],
            corrected_fact=options["corrected_fact"] or None,
            content=options["content"] or None,
            topic=options["topic"] or None,
            extra_supersedes=[i.strip() for i in options["supersedes"].split(",") if i.strip()],
            source_ref=_source_ref(options["source_ref"]),
        )
        command.stdout.write(f"Stored correction {correction.id} (topic {correction.topic}).")
        command.stdout.write(correction_supersede_guidance(count=count, repeats=correction.repeats_flagged))
        for thought_id in correction.supersedes:
            command.stdout.write(f"  superseded: {thought_id}")
        for thought_id in correction.repeats_flagged:
            command.stdout.write(f"  repeats the wrong fact (flagged): {thought_id}")
        return correction


class History(Subcommand):
    name = "history"
    help = "print the lineage chain of a thought: ancestors above, descendants below"

    def add_arguments(self, parser) -> None:
        parser.add_argument("thought_id")
        super().add_arguments(parser)
        parser.add_argument(
            "--max-depth", type=int, default=DEFAULT_MAX_DEPTH, help=f"how far to walk, 0 to {MAX_MAX_DEPTH}"
        )

    def run(self, command, options):
        if not 0 <= options["max_depth"] <= MAX_MAX_DEPTH:  # the API's bound: a walk around a cycle stays short
            raise CommandError(f"--max-depth must be from 0 to {MAX_MAX_DEPTH}.")
        space = services.space_get(slug=options["space"])
        lineage = thought_lineage(space=space, thought_id=options["thought_id"], max_depth=options["max_depth"])
        out = command.stdout.write
        out(f"Lineage of {lineage['thought_id']} ({len(lineage['chain'])} thought(s)):")
        for node in lineage["chain"]:
            depth = node["depth"]
            marker = ">" if depth == 0 else " "
            relation = "this thought" if depth == 0 else ("ancestor" if depth < 0 else "descendant")
            state = "  [superseded]" if node["superseded"] else ""
            out(
                f"{marker}{depth:+3d}  {node['thought_id']}  {node['thought_type']:<13} {relation:<12} "
                f"{node['created_at'][:19]}  {one_line(node['contributor'])}{state}"
            )
            out(f"       {one_line(node['content_preview'])}")
            if node["source_ids"]:
                out(f"       from: {', '.join(node['source_ids'])}")
        if lineage["truncated"]:
            out(f"(truncated at depth {options['max_depth']}; use --max-depth to see more)")


HIGHWAYS_MAX_LIMIT = 1000


class Highways(Subcommand):
    name = "highways"
    help = "list the busiest thoughts: accessed at least 3 times by at least 2 agents"

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--limit", type=int, default=20, help=f"at most this many (1-{HIGHWAYS_MAX_LIMIT})")

    def run(self, command, options):
        if not 1 <= options["limit"] <= HIGHWAYS_MAX_LIMIT:
            raise CommandError(f"--limit must be between 1 and {HIGHWAYS_MAX_LIMIT}.")
        space = services.space_get(slug=options["space"])
        highways = thought_highways(space=space, limit=options["limit"])
        if not highways:
            command.stdout.write("No highways yet (a thought needs 3 accesses by 2 different agents).")
        for highway in highways:
            command.stdout.write(
                f"{highway['traffic']:>6}  {highway['thought_id']}  {highway['access_count']} accesses by "
                f"{highway['agents']} agents  {one_line(highway['content_preview'])}"
            )


class Expire(Subcommand):
    name = "expire"
    help = "delete query-log rows older than QUERY_LOG_RETENTION_DAYS (the nightly job; open tasks' sessions kept)"

    def add_arguments(self, parser) -> None:
        pass  # every space

    def run(self, command, options):
        from django.conf import settings

        from brain.services.pheromones import query_logs_expire

        days = settings.QUERY_LOG_RETENTION_DAYS
        if days <= 0:
            command.stdout.write("QUERY_LOG_RETENTION_DAYS is 0: query logs are kept forever; nothing deleted.")
            return
        deleted = query_logs_expire()
        command.stdout.write(f"Deleted {deleted} query-log row(s) older than {days} days.")


SUBCOMMANDS: list[type[Subcommand]] = [
    Query,
    Contribute,
    Refine,
    Consolidate,
    Correct,
    History,
    Highways,
    Import,  # type: ignore[list-item]  # same interface, in brain/transfer/cli.py
    Export,  # type: ignore[list-item]
    Expire,
]


class Command(BaseCommand):
    help = (
        "The shared brain from a terminal: query, contribute, refine, consolidate, correct, history, highways, "
        "import, export, expire."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="subcommand", required=True)
        for cls in SUBCOMMANDS:
            cls().add_arguments(sub.add_parser(cls.name, help=cls.help))

    def handle(self, *args, subcommand: str, **options):
        arguments_refuse_unstorable(options)
        handler = next(cls for cls in SUBCOMMANDS if cls.name == subcommand)()
        try:
            handler.run(self, options)
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
