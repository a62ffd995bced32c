"""manage.py task create|list|get|transition|update-dna — the same services as the API.

Who acts is explicit: ``--agent NAME`` (acts as that agent and its role) or ``--system``. Humans act
and confirm human-gated steps as logged-in users (admin, later the board), never from the shell:
a shell can't prove who is typing. Output is JSON, so scripts can read it.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from rest_framework.renderers import JSONRenderer

from api.errors import ApplicationError
from api.parsers import json_loads_bounded
from core import selectors as core_selectors
from core import services as core_services
from core.choices import DEFAULT_SPACE_SLUG
from core.management.arguments import arguments_refuse_unstorable
from tasks import selectors
from tasks.choices import TaskStatus, TaskType
from tasks.outputs import task_detail_output, task_output, transition_output
from tasks.services import tasks as task_services
from tasks.services import transitions as transition_services


def _json_object(text: str) -> dict:
    try:
        value = json_loads_bounded(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"Not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CommandError('DNA must be a JSON object, e.g. \'{"pdsa_ref": "docs/x.md"}\'.')
    return value


class Command(BaseCommand):
    help = "Create, list, show, transition tasks and update their DNA (the API's services, from the shell)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)

        def with_space(p):
            p.add_argument("--space", default=DEFAULT_SPACE_SLUG)
            return p

        def with_actor(p, required: bool):
            group = p.add_mutually_exclusive_group(required=required)
            group.add_argument("--agent", help="act as this agent (its role)")
            group.add_argument("--system", action="store_true", help="act as the system")
            return p

        create = with_actor(with_space(sub.add_parser("create", help="create a task")), required=False)
        create.add_argument("--project", required=True)
        create.add_argument("--slug", required=True)
        create.add_argument("--title", required=True)
        create.add_argument("--type", default=TaskType.TASK, choices=TaskType.values)
        create.add_argument("--description", default="")
        create.add_argument("--role", default="")
        create.add_argument("--status", default=TaskStatus.BACKLOG, choices=[TaskStatus.BACKLOG, TaskStatus.PENDING])
        create.add_argument("--dna", default="{}", help="JSON object")
        create.add_argument("--parent", action="append", default=[], help="parent task id or slug (bugs need one)")
        create.add_argument("--depends-on", action="append", default=[], dest="depends_on")

        listing = with_space(sub.add_parser("list", help="list tasks"))
        listing.add_argument("--status", choices=TaskStatus.values)
        listing.add_argument("--role")
        listing.add_argument("--project")
        listing.add_argument("--type", choices=TaskType.values)

        get = with_space(sub.add_parser("get", help="one task with DNA and its last transitions"))
        get.add_argument("task")

        transition = with_actor(with_space(sub.add_parser("transition", help="move a task")), required=True)
        transition.add_argument("task")
        transition.add_argument("to", help="a status, or 'restore' to leave blocked")
        transition.add_argument("--summary", default="")

        update = with_space(sub.add_parser("update-dna", help="shallow-merge a JSON object into DNA"))
        update.add_argument("task")
        update.add_argument("dna", help="JSON object; null removes a key")

    def handle(self, *args, action, **options):
        arguments_refuse_unstorable(options)
        try:
            space = core_services.space_get(slug=options.pop("space"))
            getattr(self, "_" + action.replace("-", "_"))(space=space, **options)
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc

    def _out(self, data) -> None:
        self.stdout.write(JSONRenderer().render(data, renderer_context={"indent": 2}).decode())

    def _actor(self, space, options) -> dict:
        if options.get("agent"):
            return {"agent": core_selectors.agent_get(space=space, name=options["agent"])}
        if options.get("system"):
            return {"as_system": True}
        return {}

    def _create(self, space, **options):
        actor = self._actor(space, options)
        task = task_services.task_create(
            space=space,
            project=options["project"],
            slug=options["slug"],
            title=options["title"],
            type=options["type"],
            description=options["description"],
            role=options["role"],
            status=options["status"],
            dna=_json_object(options["dna"]),
            parent_ids=options["parent"],
            depends_on=options["depends_on"],
            created_by=actor.get("agent"),
        )
        self._out(task_output(selectors.task_get(space=space, id_or_slug=str(task.id))))

    def _list(self, space, **options):
        tasks = selectors.task_list(
            space=space,
            status=options["status"],
            role=options["role"],
            project=options["project"],
            type=options["type"],
        )
        for task in tasks:
            self.stdout.write(
                f"{task.slug:40} {task.type:4} {task.status:10} {task.role or '-':12} "
                f"{task.project.slug:20} {task.title}"
            )

    def _get(self, space, task, **_):
        self._out(task_detail_output(selectors.task_get(space=space, id_or_slug=task)))

    def _transition(self, space, task, to, summary, **options):
        obj = selectors.task_get(space=space, id_or_slug=task)
        log = transition_services.task_transition(task=obj, to=to, summary=summary, **self._actor(space, options))
        self._out({"task": task_output(obj), "transition": transition_output(log)})

    def _update_dna(self, space, task, dna, **_):
        obj = selectors.task_get(space=space, id_or_slug=task)
        task_services.task_update_dna(task=obj, patch=_json_object(dna))
        self._out(task_output(obj))
