"""Creating projects and tasks, and merging DNA. Status changes are not here: see ``transitions``."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils.text import slugify

from api.errors import Conflict, Forbidden, NotFound, ValidationFailed
from api.text import json_storable, storable
from brain.confusables import skeleton
from core.models import Agent, Space
from tasks import workflow
from tasks.choices import ROLE_ACTORS, ApprovalMode, TaskStatus, TaskType
from tasks.models import DESCRIPTION_MAX_CHARS, LINKS_MAX, Project, Task, task_id_of

DNA_MAX_CHARS = 100_000
#: The most a DNA test count may say: more tests than any suite runs, and an integer every JSON reader
#: (64-bit, JavaScript's doubles) reads as the number Colony compares at the review gate.
DNA_TEST_COUNT_MAX = 1_000_000
CREATE_STATUSES = (TaskStatus.BACKLOG, TaskStatus.PENDING)
# A complete task is closed to DNA changes except the one field that reopens it (complete->rework).
DNA_KEYS_OPEN_WHEN_COMPLETE = frozenset({"rework_target_role"})


def project_create(
    *, space: Space, slug: str, name: str = "", approval_mode: str = ApprovalMode.MANUAL, agent: Agent | None = None
) -> Project:
    """Create a project. How much humans gate its tasks is a human decision: agents create manual projects only.
    Its name is stored as the API stores text (``api.text.storable``)."""
    name = storable(name)
    if approval_mode not in ApprovalMode.values:
        raise ValidationFailed(f"approval_mode must be one of {', '.join(ApprovalMode.values)}.")
    if agent is not None and approval_mode != ApprovalMode.MANUAL:
        raise Forbidden(
            "Agents create projects in manual approval mode; a human changes the mode in the admin.",
            code="HUMAN_ONLY",
        )
    if slugify(slug) != slug or not slug:
        raise ValidationFailed(f"Project slug {slug!r} must be a slug (lower-case letters, digits, hyphens).")
    try:
        with transaction.atomic():
            return Project.objects.create(space=space, slug=slug, name=name or slug, approval_mode=approval_mode)
    except IntegrityError:
        raise Conflict(f"Project {slug!r} already exists in space {space.slug!r}.", code="PROJECT_EXISTS") from None


#: A DNA key that is the DNA wrapped once more ({"dna": {...}}, as a task create body carries it): refused,
#: unless null, which removes the key from a task that carries one.
WRAPPED_DNA_KEY = "dna"


def dna_size_check(dna: dict, *, hint: str) -> None:
    """400 ``INVALID_DNA`` when ``dna`` is more than DNA_MAX_CHARS characters of JSON."""
    if len(json.dumps(dna, default=str)) > DNA_MAX_CHARS:
        raise ValidationFailed(f"DNA larger than {DNA_MAX_CHARS} characters of JSON; {hint}.", code="INVALID_DNA")


def _reads_as(key: str) -> str:
    """What a human reads in a DNA key on a page: without surrounding space or case, look-alike letters of
    other scripts and compatibility forms read as the Latin ones (" Human_confirmed_by" reads as a key
    only a human's confirmation writes)."""
    return skeleton(unicodedata.normalize("NFKC", key)).strip().casefold()


def dna_validate(*, patch: dict) -> dict:
    """Refuse DNA an agent may not write and values the engine would misread; returns the patch with
    the engine's counts as ints (JSON's 3.0 is the integer 3, as everywhere in the API) and its texts
    without invisible controls."""
    if not isinstance(patch, dict):
        raise ValidationFailed("DNA must be a JSON object.", code="INVALID_DNA")
    # DNA is what a human's gate is given on: stored without what only reorders or hides what a reader
    # sees, as every other text is (a right-to-left override made "dm.desiver" read "revised.md").
    patch = json_storable(patch)
    protected = sorted(key for key in patch if workflow.is_protected_dna_key(_reads_as(key)))
    if protected:
        raise ValidationFailed(
            f"DNA keys {', '.join(protected)} are written by the workflow engine or by a human, never through "
            "DNA: human confirmations are given on the board or in the admin, blocked state is kept by "
            "the blocked/restore transitions, links are set when the task is created.",
            code="PROTECTED_DNA_KEY",
        )
    if patch.get(WRAPPED_DNA_KEY) is not None:
        raise ValidationFailed(
            'DNA fields go at the top level of the object: send {"memory_query_session": "..."} itself, not '
            'wrapped in "dna" (a key named dna would be stored as one field of its own and satisfy no gate).',
            code="INVALID_DNA",
        )
    dna_size_check(patch, hint="send less")
    problems = []
    role = patch.get("rework_target_role")
    if role is not None and role not in workflow.AGENT_ROLES:
        problems.append(f"rework_target_role must be one of {', '.join(workflow.AGENT_ROLES)}")
    patch = dict(patch)
    for name in ("test_pass_count", "test_total_count"):
        value = patch.get(name)
        if isinstance(value, float) and value.is_integer():
            value = patch[name] = int(value)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= DNA_TEST_COUNT_MAX
        ):
            problems.append(f"{name} must be a whole number from 0 to {DNA_TEST_COUNT_MAX:,}")
    for name in (workflow.MQS, workflow.MCI):
        value = patch.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > 100):
            problems.append(f"{name} must be a string of at most 100 characters")
    if problems:
        raise ValidationFailed("Invalid DNA: " + "; ".join(problems) + ".", code="INVALID_DNA")
    return patch


def _resolve_refs(*, space: Space, refs: Iterable[str], what: str) -> list[Task]:
    """Tasks of ``space`` named by id or slug; an unknown name is refused, never silently dropped."""
    refs = [str(ref) for ref in refs]
    if not refs:
        return []
    ids = [u for u in map(task_id_of, refs) if u is not None]
    slugs = [ref for ref in refs if task_id_of(ref) is None]
    found = list(Task.objects.filter(space=space).filter(Q(pk__in=ids) | Q(slug__in=slugs)))
    known = {str(t.id) for t in found} | {t.slug for t in found if task_id_of(t.slug) is None}
    unknown = [ref for ref in refs if ref not in known and str(task_id_of(ref)) not in known]
    if unknown:
        raise NotFound(f"{what}: no task {', '.join(unknown)} in this space.", code="UNKNOWN_TASK_REFERENCE")
    return found


def dependencies_check(*, dependencies: Iterable[Task]) -> None:
    """409 ``DEPENDENCY_CANCELLED`` when a task would depend on a cancelled task: cancelled is final, so
    pending->ready (every dependency complete) could never pass and the task would wait for good."""
    cancelled = sorted(task.slug for task in dependencies if task.status == TaskStatus.CANCELLED)
    if cancelled:
        raise Conflict(
            f"depends_on: {', '.join(cancelled)} {'is' if len(cancelled) == 1 else 'are'} cancelled and will never "
            "complete, so this task could never become ready. Depend on the task that carries that work on, or "
            "leave it out.",
            code="DEPENDENCY_CANCELLED",
        )


def task_create(
    *,
    space: Space,
    project: str,
    slug: str,
    title: str,
    type: str = TaskType.TASK,
    description: str = "",
    role: str = "",
    status: str = TaskStatus.BACKLOG,
    dna: dict | None = None,
    parent_ids: Iterable[str] = (),
    depends_on: Iterable[str] = (),
    created_by: Agent | None = None,
) -> Task:
    """Create a task in ``backlog`` (or ``pending``). Bugs must name their parent task(s). The title and
    description are stored as the API stores text (``api.text.storable``), whoever calls: the API, the
    pages, ``manage.py task create``."""
    title, description = storable(title), storable(description)
    dna = dna_validate(patch=dict(dna or {}))
    if type not in TaskType.values:
        raise ValidationFailed(f"type must be one of {', '.join(TaskType.values)}.")
    if status not in CREATE_STATUSES:
        raise ValidationFailed(
            f"A task starts in {' or '.join(CREATE_STATUSES)}; later states are reached by transitions.",
            code="INVALID_STATUS",
        )
    if role and role not in ROLE_ACTORS:
        raise ValidationFailed(f"Unknown role {role!r}.")
    if status != TaskStatus.BACKLOG and created_by is not None:
        # Created in pending, the task has made backlog->pending: only an actor of that rule may.
        allowed = workflow.rule_lookup(
            task_type=type, from_status=TaskStatus.BACKLOG, to=status, role=role, actor=created_by.role
        )
        if allowed is None or created_by.role not in allowed.rule.actors:
            actors = ", ".join(allowed.rule.actors) if allowed else "nobody"
            raise Forbidden(
                f"A {created_by.role} agent creates tasks in backlog: backlog->{status} is for {actors}. Create "
                "it in backlog, or ask one of them to move it.",
                code="ACTOR_NOT_ALLOWED",
            )
    if not slug or slugify(slug) != slug:
        raise ValidationFailed(f"Task slug {slug!r} must be a slug (lower-case letters, digits, hyphens).")
    if task_id_of(slug) is not None:
        raise ValidationFailed(
            f"Task slug {slug!r} reads as a task id (a UUID); a reference must name one task: choose a slug "
            "with a word in it (e.g. 'fix-login')."
        )
    parent_ids, depends_on = list(parent_ids), list(depends_on)
    for name, refs in (("parent_ids", parent_ids), ("depends_on", depends_on)):
        if len(refs) > LINKS_MAX:
            raise ValidationFailed(f"{name} names {len(refs)} tasks; at most {LINKS_MAX}.")
    title_max = Task._meta.get_field("title").max_length
    if len(title) > title_max:
        raise ValidationFailed(f"title has {len(title)} characters; at most {title_max}.")
    if len(description) > DESCRIPTION_MAX_CHARS:
        raise ValidationFailed(f"description has {len(description)} characters; at most {DESCRIPTION_MAX_CHARS}.")
    if type == TaskType.BUG and not parent_ids:
        raise ValidationFailed("A bug must name the task(s) it was found in: parent_ids.", code="MISSING_PARENT")
    project_obj = Project.objects.filter(space=space, slug=project).first()
    if project_obj is None:
        raise NotFound(
            f"No project {project!r} in space {space.slug!r}. GET /api/v1/projects lists them; POST "
            '/api/v1/projects {"slug": ..., "name": ...} creates one.',
            code="PROJECT_NOT_FOUND",
        )
    parents = _resolve_refs(space=space, refs=parent_ids, what="parent_ids")
    dependencies = _resolve_refs(space=space, refs=depends_on, what="depends_on")
    dependencies_check(dependencies=dependencies)
    try:
        with transaction.atomic():
            task = Task.objects.create(
                space=space,
                project=project_obj,
                slug=slug,
                title=title,
                description=description,
                type=type,
                role=role,
                status=status,
                dna=dna,
                created_by=created_by,
            )
            task.parents.set(parents)
            task.depends_on.set(dependencies)
    except IntegrityError:
        raise Conflict(f"Task {slug!r} already exists in space {space.slug!r}.", code="TASK_EXISTS") from None
    return task


def task_update_dna(*, task: Task, patch: dict) -> Task:
    """Shallow-merge ``patch`` into the task's DNA under a row lock; a ``null`` value removes the key. The
    merged DNA, not only the patch, stays within DNA_MAX_CHARS (400 ``INVALID_DNA``, nothing changed)."""
    patch = dna_validate(patch=patch)
    with transaction.atomic():
        locked = Task.objects.select_for_update(of=("self",)).get(pk=task.pk)
        if locked.status == TaskStatus.CANCELLED or (
            locked.status == TaskStatus.COMPLETE and not set(patch) <= DNA_KEYS_OPEN_WHEN_COMPLETE
        ):
            hint = " (only rework_target_role may be set, to send it to rework)" if locked.status == "complete" else ""
            raise Conflict(f"Task {locked.slug} is {locked.status}; its DNA is closed{hint}.", code="TASK_CLOSED")
        dna = dict(locked.dna or {})
        for key, value in patch.items():
            if value is None:
                dna.pop(key, None)
            else:
                dna[key] = value
        dna_size_check(dna, hint="remove keys the task no longer needs (send them as null) or send less")
        locked.dna = dna
        locked.save(update_fields=["dna", "updated_at"])
    task.dna = locked.dna
    return task
