"""Reads of projects, tasks and their history. Every read is scoped to one space."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    F,
    Func,
    JSONField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
    Window,
)
from django.db.models.functions import Cast, Coalesce, Length, RowNumber

from api.errors import NotFound, ValidationFailed, did_you_mean
from api.paging import order_by
from brain.models import thought_defer_bulky
from core.choices import ROLE_SYNONYMS
from core.db import prepared_cursor
from core.models import Agent, Space
from tasks.choices import ROLE_ACTORS, TaskStatus, TaskType
from tasks.models import HumanConfirmation, Project, Task, TransitionLog, dna_digest, task_id_of
from tasks.workflow import MQS

IN_FLIGHT_STATUSES = (TaskStatus.ACTIVE, TaskStatus.BLOCKED)


#: The project list's order (api.paging): by slug, which is unique within a space, so it is the cursor's key.
PROJECT_LIST_ORDER = (("slug", False, str),)


def project_list(*, space: Space) -> QuerySet[Project]:
    return Project.objects.filter(space=space).order_by(*order_by(PROJECT_LIST_ORDER))


def _with_links(qs: QuerySet[Task]) -> QuerySet[Task]:
    link_fields = Task.objects.only("id", "slug", "status")
    return qs.select_related("project").prefetch_related(
        Prefetch("parents", queryset=link_fields), Prefetch("depends_on", queryset=link_fields)
    )


def _links_sql(name: str) -> str:
    """Three arrays (ids, slugs, statuses) of the tasks a task links to through ``name``, in the order
    ``Task.objects`` lists them (newest change first)."""
    field = Task._meta.get_field(name)
    through = field.remote_field.through._meta.db_table
    return ", ".join(
        f"ARRAY(SELECT x.{column} FROM {through} m JOIN tasks_task x ON x.id = m.{field.m2m_reverse_name()} "  # noqa: S608 - names from the models
        f"WHERE m.{field.m2m_column_name()} = t.id ORDER BY x.updated_at DESC, x.id)"
        for column in ("id", "slug", "status")
    )


_TASK_FIELDS = Task._meta.concrete_fields
_PROJECT_FIELDS = Project._meta.concrete_fields
_LINKS = ("parents", "depends_on")
#: What ``_with_links(...).first()`` reads in three queries (the task with its project, then each
#: link), in one prepared statement: task_get runs on every task request, and building those three
#: querysets would cost a quarter of a transition's CPU in the web process (py-spy on the web worker).
_TASK_GET_SQL = f"""
SELECT {", ".join(f"t.{f.column}" for f in _TASK_FIELDS)}, {", ".join(f"p.{f.column}" for f in _PROJECT_FIELDS)},
       {", ".join(_links_sql(name) for name in _LINKS)}
FROM tasks_task t JOIN tasks_project p ON p.id = t.project_id
WHERE t.space_id = %(space)s AND (t.slug = %(slug)s OR t.id = %(id)s::uuid)
ORDER BY t.id LIMIT 1
"""  # noqa: S608 - names from the models


def _instance(model, fields, values):
    """A model instance from a row, as the ORM would build it (each field's database converter applied)."""
    converted = [
        field.from_db_value(value, None, connection) if hasattr(field, "from_db_value") else value
        for field, value in zip(fields, values, strict=True)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], converted)


def task_get(*, space: Space, id_or_slug: str) -> Task:
    """One task of ``space`` by UUID (its id) or else by slug; another space's task is simply not found.

    The task comes with its project and its parents and dependencies (id, slug, status) loaded as
    ``prefetch_related`` would leave them (``task.parents.all()`` runs no query), in one statement.
    """
    key = task_id_of(id_or_slug)
    with prepared_cursor() as cursor:
        cursor.execute(_TASK_GET_SQL, {"space": space.pk, "slug": None if key else str(id_or_slug), "id": key})
        row = cursor.fetchone()
    if row is None:
        raise NotFound(
            f"No task {id_or_slug!r} in this space.{_slug_hint(space, str(id_or_slug))}", code="TASK_NOT_FOUND"
        )
    width, project_width = len(_TASK_FIELDS), len(_PROJECT_FIELDS)
    task = _instance(Task, _TASK_FIELDS, row[:width])
    project = _instance(Project, _PROJECT_FIELDS, row[width : width + project_width])
    Task._meta.get_field("project").set_cached_value(task, project)
    links = row[width + project_width :]
    task._prefetched_objects_cache = {}
    for index, name in enumerate(_LINKS):
        ids, slugs, statuses = links[3 * index : 3 * index + 3]
        linked = getattr(task, name).get_queryset()  # the related queryset prefetch_related would keep
        linked._result_cache = [
            Task.from_db(connection.alias, ["id", "slug", "status"], values)
            for values in zip(ids, slugs, statuses, strict=True)
        ]
        linked._prefetch_done = True
        task._prefetched_objects_cache[name] = linked
    return task


#: The list's order, the newest change first; unique as a whole, so it is also the paging cursor's key
#: (api.paging). A task that changes while an agent pages moves to the front, before the cursor.
TASK_LIST_ORDER = (("updated_at", True, datetime), ("slug", False, str), ("id", False, uuid.UUID))


def task_list(
    *,
    space: Space,
    status: str | None = None,
    role: str | None = None,
    project: str | None = None,
    type: str | None = None,
) -> QuerySet[Task]:
    """Tasks of ``space``, newest change first, with project and links loaded in a fixed number of queries."""
    for name, value, allowed in (
        ("status", status, TaskStatus.values),
        ("role", role, ROLE_ACTORS),
        ("type", type, TaskType.values),
    ):
        if value and value not in allowed:
            raise ValidationFailed(f"Filter {name}={value!r}: use one of {', '.join(allowed)}.")
    qs = Task.objects.filter(space=space)
    if status:
        qs = qs.filter(status=status)
    if role:
        qs = qs.filter(role=role)
    if project:
        qs = qs.filter(project__slug=project)
    if type:
        qs = qs.filter(type=type)
    return _with_links(qs).order_by(*order_by(TASK_LIST_ORDER))


def task_memory_sessions_open() -> list[tuple[int, str, datetime]]:
    """``(space id, session id, since)`` of every ``memory_query_session`` the DNA of a task not complete or
    cancelled names, ``since`` the moment the task entered its current state: the query-log rows its memory
    gate can accept are that session's made since then (the query-log retention keeps them, tasks.apps).
    Older rows of the session are not kept: any agent can name any session in an open task's DNA."""
    rows = (
        Task.objects.exclude(status__in=[TaskStatus.COMPLETE, TaskStatus.CANCELLED])
        .filter(dna__has_key=MQS)
        .values_list("space_id", f"dna__{MQS}", "status_changed_at")
    )
    # The gate reads the value as a string (tasks.services.gates: str(value)), so the same is kept here.
    return [(space_id, str(session), since) for space_id, session, since in rows if session not in (None, "")]


#: A listed transition's ``dna_diff`` is read whole only up to this many characters (its JSON text);
#: a larger one (a restore that removed a 99,000-character reason) is read as the keys it added,
#: removed and changed, so what others wrote and removed before can't make a page of markers megabytes.
DNA_DIFF_SHOWN_MAX = 2_000
#: The keys of each part of a diff read as keys (the rest are counted in ``keys_left_out``).
DNA_DIFF_KEYS_SHOWN = 20


class _DiffKeys(Func):
    """A ``dna_diff`` as ``{"added": [k], "removed": [k], "changed": [k], "keys_left_out": n}``: the
    first :data:`DNA_DIFF_KEYS_SHOWN` keys of each part in order, and how many more there are."""

    template = (
        "(SELECT jsonb_build_object("
        "'added', COALESCE(jsonb_agg(k ORDER BY k) FILTER (WHERE part = 'added' AND n <= %(shown)s), '[]'), "
        "'removed', COALESCE(jsonb_agg(k ORDER BY k) FILTER (WHERE part = 'removed' AND n <= %(shown)s), '[]'), "
        "'changed', COALESCE(jsonb_agg(k ORDER BY k) FILTER (WHERE part = 'changed' AND n <= %(shown)s), '[]'), "
        "'keys_left_out', count(*) FILTER (WHERE n > %(shown)s)) "
        "FROM (SELECT p.part, k, row_number() OVER (PARTITION BY p.part ORDER BY k) AS n "
        "FROM unnest(ARRAY['added', 'removed', 'changed']) AS p(part), "
        "jsonb_object_keys(COALESCE(%(expressions)s -> p.part, '{}')) AS k) AS diff_keys)"
    )
    output_field = JSONField()


def with_dna_diff_shown(qs: QuerySet[TransitionLog]) -> QuerySet[TransitionLog]:
    """``qs`` without loading ``dna_diff``: each row carries ``dna_diff_keys`` (at most
    :data:`DNA_DIFF_KEYS_SHOWN` keys of each part, and ``keys_left_out``) and ``dna_diff_whole`` (the
    diff itself, or None when its text is longer than :data:`DNA_DIFF_SHOWN_MAX`)."""
    size = Length(Cast("dna_diff", TextField()))
    return (
        qs.defer("dna_diff")
        .alias(dna_diff_size=size)
        .annotate(
            dna_diff_keys=_DiffKeys("dna_diff", shown=DNA_DIFF_KEYS_SHOWN),
            dna_diff_whole=Case(
                When(dna_diff_size__lte=DNA_DIFF_SHOWN_MAX, then=F("dna_diff")), default=None, output_field=JSONField()
            ),
        )
    )


def transitions_recent(*, task_ids: list, per_task: int) -> dict:
    """The last ``per_task`` transitions (with markers) of each task, in one query, their ``dna_diff``
    as :func:`with_dna_diff_shown` reads it."""
    if not task_ids:
        return {}
    ranked = (
        with_dna_diff_shown(TransitionLog.objects.filter(task_id__in=task_ids))
        .select_related("marker", "agent", "user")
        .defer(*thought_defer_bulky("marker"))
        .annotate(
            rank=Window(RowNumber(), partition_by=[F("task_id")], order_by=[F("created_at").desc(), F("id").desc()])
        )
        .filter(rank__lte=per_task)
        .order_by("task_id", "rank")
    )
    out: dict = {task_id: [] for task_id in task_ids}
    for log in ranked:
        out[log.task_id].append(log)
    return out


def _slug_hint(space: Space, ref: str) -> str:
    """ " Did you mean 'fix-ci'?" when the ref names a task but for its case or spaces (slugs are lower-case,
    so 'Fix-CI' or 'fix ci' can't be one), else a pointer to the list. Runs only on a miss."""
    candidate = "-".join(ref.strip().lower().split())
    if candidate != ref and Task.objects.filter(space=space, slug=candidate).exists():
        return f" Did you mean {candidate!r}?"
    return " GET /api/v1/tasks lists the tasks of this space."


def _links_count(through, column: str):
    """The number of a task's rows in a link table, as a subquery of the task's row."""
    return (
        through.objects.filter(**{column: OuterRef("pk")}).order_by().values(column).annotate(n=Count("pk")).values("n")
    )


#: What a task's entry in a list may weigh besides its DNA and description: each link (a parent or a
#: dependency, up to LINKS_MAX of each) is shown by its slug (up to 150 characters) and status.
LINK_CHARS = 200
#: A page of tasks (the task list, a role's tasks in flight) holds at most this many characters of DNA,
#: description and links (a task may hold 100,000 of DNA, 20,000 of description and 200 links): a fuller
#: page ends early, with a cursor to the rest.
PAGE_BUDGET = (
    Length(Cast("dna", TextField()))
    + Length("description")
    + LINK_CHARS
    * (
        Coalesce(Subquery(_links_count(Task.parents.through, "from_task_id")), 0)
        + Coalesce(Subquery(_links_count(Task.depends_on.through, "from_task_id")), 0)
    ),
    500_000,
)
#: The recovery list's order (api.paging), what an agent back from a crash needs first: the tasks it
#: moved last itself (its claims, its blocks: ``mine``), then the role's active tasks before its blocked
#: ones (a claim is made only by an agent of the task's role; any role may block a task for another),
#: then the newest change first. Slug and id make it unique.
IN_FLIGHT_ORDER = (
    ("mine", True, bool),
    ("active", True, bool),
    ("updated_at", True, datetime),
    ("slug", False, str),
    ("id", False, uuid.UUID),
)


def task_in_flight(*, space: Space, role: str, agent: Agent) -> QuerySet[Task]:
    """The recovery question (SPEC 3.3): tasks active or blocked for ``role``, in :data:`IN_FLIGHT_ORDER`
    for ``agent`` (the caller), with project and links loaded. Their markers: :func:`transitions_recent`."""
    if role not in ROLE_ACTORS:
        hint = did_you_mean(role, ROLE_ACTORS, synonyms=ROLE_SYNONYMS)
        raise ValidationFailed(f"Unknown role {role!r}.{hint} Use one of {', '.join(ROLE_ACTORS)}.")
    last_mover = TransitionLog.objects.filter(task=OuterRef("pk")).order_by("-created_at", "-id").values("agent_id")
    qs = (
        Task.objects.filter(space=space, role=role, status__in=IN_FLIGHT_STATUSES)
        .alias(last_mover=Subquery(last_mover[:1]))
        .annotate(
            mine=Case(When(last_mover=agent.pk, then=Value(True)), default=Value(False), output_field=BooleanField()),
            active=Case(
                When(status=TaskStatus.ACTIVE, then=Value(True)), default=Value(False), output_field=BooleanField()
            ),
        )
    )
    return _with_links(qs).order_by(*order_by(IN_FLIGHT_ORDER))


def confirmation_list_open(*, task: Task) -> QuerySet[HumanConfirmation]:
    """Confirmations given for the state ``task`` is in now and the DNA it has now, not yet used by a
    transition, by a human who may still act in its space, oldest first: the one rule of which
    confirmation is valid (the transition consumes the first for its step; the board shows these)."""
    member = Exists(Space.members.through.objects.filter(user_id=OuterRef("user_id"), space_id=task.space_id))
    return (
        HumanConfirmation.objects.filter(
            Q(user__is_superuser=True) | member,
            task=task,
            from_status=task.status,
            consumed_at__isnull=True,
            confirmed_at__gte=task.status_changed_at,
            dna_digest=dna_digest(task.dna),
            user__is_active=True,
        )
        .select_related("user")
        .order_by("confirmed_at")
    )
