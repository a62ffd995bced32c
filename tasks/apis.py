"""The agents' task API (SPEC 5). Each view validates, calls one service or selector, serializes.

The acting agent and its role always come from the token (``request.user``), never from the body.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from api import fields as strict
from api import paging
from api.schema import JSON_VALUE_REF, NO_NUL_PATTERN, error_responses
from core.choices import ROLE_SYNONYMS, AgentRole
from tasks import selectors, workflow
from tasks.choices import RESTORE, ApprovalMode, TaskStatus, TaskType
from tasks.models import DESCRIPTION_MAX_CHARS, LINKS_MAX, SUMMARY_MAX_CHARS
from tasks.outputs import ProjectOutputSerializer, TaskOutputSerializer, TransitionOutputSerializer, task_detail_output
from tasks.services import tasks as task_services
from tasks.services import transitions as transition_services

LIST_DEFAULT_LIMIT = 100
LIST_MAX_LIMIT = 500


def _key_not_prefixed(prefix: str) -> str:
    """A pattern for a key without NUL that does not start with ``prefix`` (no lookahead: the same in
    ECMA and Python regular expressions)."""
    branches = [f"[^{prefix[0]}\\u0000][^\\u0000]*"]
    for i in range(1, len(prefix)):
        branches.append(f"{prefix[:i]}(?:[^{prefix[i]}\\u0000][^\\u0000]*)?")
    return f"^(?:{'|'.join(branches)})?$"


def dna_schema(*, min_properties: int = 0) -> dict:
    """Task DNA as ``tasks.services.tasks.dna_validate`` accepts it: no protected key (those the engine
    or a human writes, any ``human_*``), typed values for the keys the engine reads, any NUL-free JSON
    elsewhere; ``null`` removes a key. The whole DNA is at most 100,000 characters of JSON (400 INVALID_DNA)."""
    (prefix,) = workflow.PROTECTED_DNA_PREFIXES
    properties = {
        key: {"not": {}, "description": "Protected: written by the engine."}
        for key in sorted(workflow.PROTECTED_DNA_KEYS)
    }
    properties |= {
        "rework_target_role": {"type": ["string", "null"], "enum": [*workflow.AGENT_ROLES, None]},
        "test_pass_count": {"type": ["integer", "null"], "minimum": 0, "maximum": task_services.DNA_TEST_COUNT_MAX},
        "test_total_count": {"type": ["integer", "null"], "minimum": 0, "maximum": task_services.DNA_TEST_COUNT_MAX},
        workflow.MQS: {"type": ["string", "null"], "maxLength": 100, "pattern": NO_NUL_PATTERN},
        workflow.MCI: {"type": ["string", "null"], "maxLength": 100, "pattern": NO_NUL_PATTERN},
        task_services.WRAPPED_DNA_KEY: {
            "type": "null",
            "description": "Refused unless null (400 INVALID_DNA): DNA fields go at the top level, not wrapped in dna.",
        },
    }
    schema = {
        "type": "object",
        "description": "Task DNA: protected keys refused, typed engine keys, any NUL-free JSON elsewhere; null "
        "removes a key; at most 100,000 characters of JSON (else 400 INVALID_DNA).",
        "properties": properties,
        "propertyNames": {"pattern": _key_not_prefixed(prefix)},
        "additionalProperties": JSON_VALUE_REF,
    }
    if min_properties:
        schema["minProperties"] = min_properties
    return schema


@extend_schema_field(dna_schema())
class DnaField(serializers.DictField):
    pass


@extend_schema_field({"type": "string", "enum": [*TaskStatus.values, RESTORE]})
class TransitionTargetField(strict.CharField):
    """Any string reaches the engine, which answers an unknown one with 400 UNKNOWN_STATUS."""


class TransitionOptionOutputSerializer(serializers.Serializer):
    to = strict.CharField()
    target_status = strict.CharField()
    rule = strict.CharField()
    allowed = strict.BooleanField()
    new_role = strict.CharField()
    human_confirmation_needed = strict.BooleanField()
    human_confirmed_by = strict.CharField(allow_null=True)
    reasons = serializers.ListField(child=serializers.DictField())


class TransitionOptionsOutputSerializer(serializers.Serializer):
    task = strict.CharField()
    status = strict.CharField()
    role = strict.CharField()
    actor = strict.CharField()
    allowed = serializers.ListField(child=strict.CharField())
    transitions = TransitionOptionOutputSerializer(many=True)


class InFlightTaskOutputSerializer(TaskOutputSerializer):
    last_markers = TransitionOutputSerializer(many=True)


class InFlightOutputSerializer(serializers.Serializer):
    role = strict.CharField()
    count = strict.IntegerField(help_text="All in-flight tasks of the role (tasks is one page).")
    next_cursor = strict.CharField(
        allow_null=True,
        help_text="Send it as cursor for the next page (null on the last). A task that changes meanwhile moves "
        "before the cursor: start again without cursor to see the latest changes.",
    )
    tasks = InFlightTaskOutputSerializer(
        many=True,
        help_text="Your own tasks first (you moved them last), then the role's active tasks, then its blocked "
        "ones; the newest change first within each.",
    )


class ProjectListOutputSerializer(serializers.Serializer):
    count = strict.IntegerField(help_text="All projects of the space (results is one page).")
    next_cursor = strict.CharField(allow_null=True, help_text="Send it as cursor for the next page (null on the last).")
    results = ProjectOutputSerializer(many=True)


class TaskListOutputSerializer(serializers.Serializer):
    count = strict.IntegerField(help_text="All tasks matching the filters (results is one page).")
    next_cursor = strict.CharField(
        allow_null=True,
        help_text="Send it as cursor for the next page (null on the last): unlike offset, it neither repeats nor "
        "skips tasks that change between the pages. A task that changes meanwhile moves to the front, before the "
        "cursor: start again without cursor to see the latest changes.",
    )
    results = TaskOutputSerializer(many=True)


class TaskDetailOutputSerializer(TaskOutputSerializer):
    transitions = TransitionOutputSerializer(many=True, help_text="The last transitions, newest first.")


class TransitionResultOutputSerializer(serializers.Serializer):
    task = TaskOutputSerializer()
    transition = TransitionOutputSerializer()


class ProjectListCreateApi(APIView):
    class ProjectListQuerySerializer(strict.Serializer):
        limit = strict.IntegerField(min_value=1, max_value=LIST_MAX_LIMIT, default=LIST_DEFAULT_LIMIT)
        cursor = paging.CursorField(order=selectors.PROJECT_LIST_ORDER)

    class ProjectCreateInputSerializer(strict.Serializer):
        slug = strict.SlugField(max_length=100)
        name = strict.CharField(max_length=200, required=False, default="")
        approval_mode = strict.ChoiceField(choices=ApprovalMode.values, default=ApprovalMode.MANUAL)

    @extend_schema(
        operation_id="v1_projects_list",
        parameters=[ProjectListQuerySerializer],
        responses={200: ProjectListOutputSerializer},
    )
    def get(self, request):
        """The space's projects by slug, one page at a time."""
        query = self.ProjectListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        qs = selectors.project_list(space=request.user.space)
        page, next_cursor = paging.page_after(
            qs,
            order=selectors.PROJECT_LIST_ORDER,
            cursor=query.validated_data.get("cursor"),
            limit=query.validated_data["limit"],
        )
        return Response(
            {"count": qs.count(), "next_cursor": next_cursor, "results": ProjectOutputSerializer(page, many=True).data}
        )

    @extend_schema(
        request=ProjectCreateInputSerializer, responses={201: ProjectOutputSerializer, **error_responses(403, 409)}
    )
    def post(self, request):
        data = self.ProjectCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project = task_services.project_create(space=request.user.space, agent=request.user, **data.validated_data)
        return Response(ProjectOutputSerializer(project).data, status=201)


class TaskListCreateApi(APIView):
    class TaskFilterInputSerializer(strict.Serializer):
        status = strict.ChoiceField(choices=TaskStatus.values, required=False)
        role = strict.ChoiceField(choices=AgentRole.values, required=False, synonyms=ROLE_SYNONYMS)
        project = strict.SlugField(required=False)
        type = strict.ChoiceField(choices=TaskType.values, required=False)
        limit = strict.IntegerField(min_value=1, max_value=LIST_MAX_LIMIT, default=LIST_DEFAULT_LIMIT)
        offset = paging.OffsetField()
        cursor = paging.CursorField(order=selectors.TASK_LIST_ORDER)

        def validate(self, attrs):
            return paging.no_cursor_with_offset(attrs, self.initial_data)

    class TaskCreateInputSerializer(strict.Serializer):
        project = strict.SlugField(max_length=100)
        slug = strict.SlugField(max_length=150)
        title = strict.CharField(max_length=300)
        description = strict.CharField(
            max_length=DESCRIPTION_MAX_CHARS, required=False, default="", allow_blank=True, trim_whitespace=False
        )
        type = strict.ChoiceField(choices=TaskType.values, default=TaskType.TASK)
        role = strict.ChoiceField(choices=AgentRole.values, required=False, default="", synonyms=ROLE_SYNONYMS)
        status = strict.ChoiceField(
            choices=[TaskStatus.BACKLOG, TaskStatus.PENDING],
            default=TaskStatus.BACKLOG,
            help_text="pending only for a role that may move a task backlog->pending (else 403 ACTOR_NOT_ALLOWED).",
        )
        dna = DnaField(required=False, default=dict)
        parent_ids = serializers.ListField(
            child=strict.CharField(max_length=150), required=False, default=list, max_length=LINKS_MAX
        )
        depends_on = serializers.ListField(
            child=strict.CharField(max_length=150), required=False, default=list, max_length=LINKS_MAX
        )

    @extend_schema(
        operation_id="v1_tasks_list", parameters=[TaskFilterInputSerializer], responses={200: TaskListOutputSerializer}
    )
    def get(self, request):
        filters = self.TaskFilterInputSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        params = dict(filters.validated_data)
        limit, offset, cursor = params.pop("limit"), params.pop("offset"), params.pop("cursor", None)
        qs = selectors.task_list(space=request.user.space, **params)
        page, next_cursor = paging.page_after(
            qs,
            order=selectors.TASK_LIST_ORDER,
            cursor=cursor,
            limit=limit,
            offset=offset,
            budget=selectors.PAGE_BUDGET,
        )
        return Response(
            {"count": qs.count(), "next_cursor": next_cursor, "results": TaskOutputSerializer(page, many=True).data}
        )

    @extend_schema(
        request=TaskCreateInputSerializer, responses={201: TaskOutputSerializer, **error_responses(403, 404, 409)}
    )
    def post(self, request):
        data = self.TaskCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        task = task_services.task_create(space=request.user.space, created_by=request.user, **data.validated_data)
        task = selectors.task_get(space=request.user.space, id_or_slug=str(task.id))
        return Response(TaskOutputSerializer(task).data, status=201)


class TaskDetailApi(APIView):
    method_hints = {
        **dict.fromkeys(
            ("PUT", "PATCH", "POST"),
            'A task moves with POST {path}/transition ({{"to": "<status>"}}); its DNA changes with PATCH {path}/dna.',
        ),
        "DELETE": 'Tasks are not deleted: POST {path}/transition with {{"to": "cancelled"}} (GET /api/v1/workflow '
        "lists the moves).",
    }

    @extend_schema(responses={200: TaskDetailOutputSerializer})
    def get(self, request, id_or_slug: str):
        strict.query_none(request)
        task = selectors.task_get(space=request.user.space, id_or_slug=id_or_slug)
        return Response(task_detail_output(task))


class TaskDnaApi(APIView):
    """Shallow-merge the JSON object in the body into the task's DNA; ``null`` removes a key."""

    @extend_schema(
        request={"application/json": dna_schema(min_properties=1)},
        responses={200: TaskOutputSerializer, **error_responses(403, 409)},
    )
    def patch(self, request, id_or_slug: str):
        if not isinstance(request.data, dict) or not request.data:
            raise serializers.ValidationError({"dna": ["Send a non-empty JSON object of DNA fields to merge."]})
        task = selectors.task_get(space=request.user.space, id_or_slug=id_or_slug)
        task_services.task_update_dna(task=task, patch=dict(request.data))
        return Response(TaskOutputSerializer(task).data)


class TaskTransitionApi(APIView):
    method_hints = {
        "GET": "GET {parent}/transitions lists the moves you may make now (and why the others are refused); GET "
        "/api/v1/workflow lists every status and move."
    }

    class TransitionInputSerializer(strict.Serializer):
        unknown_field_hints = {
            name: 'The status to move to goes in \'to\' (e.g. {"to": "active"}).'
            for name in ("status", "to_status", "state", "target", "new_status")
        }

        to = TransitionTargetField(max_length=20)
        summary = strict.CharField(max_length=SUMMARY_MAX_CHARS, required=False, default="", allow_blank=True)
        agent_id = strict.CharField(
            max_length=100, required=False, allow_blank=True, help_text="Wire compatibility only: ignored."
        )
        agent_name = strict.CharField(
            max_length=200,
            required=False,
            allow_blank=True,
            help_text="Wire compatibility only: ignored. The actor is always the token's agent.",
        )

    @extend_schema(
        request=TransitionInputSerializer,
        responses={
            200: TransitionResultOutputSerializer,
            **error_responses(
                403,
                409,
                503,
                e403="The caller may not make this transition (`ACTOR_NOT_ALLOWED`, `ROLE_MISMATCH`, "
                "`HUMAN_CONFIRMATION_REQUIRED`); `error.reasons` lists every reason.",
                e409="The task's current state refuses it: no rule from its status (`TRANSITION_NOT_ALLOWED`; "
                "`ALREADY_IN_STATUS` when it is in that status already, saying who moved it there and when), "
                "DNA it lacks or that doesn't check out (`MISSING_DNA`, `INVALID_DNA`, `MEMORY_NOT_VERIFIED`, "
                "`TESTS_NOT_PASSING`), open dependencies (`DEPENDENCIES_INCOMPLETE`), no parent (`MISSING_PARENT`), "
                "nothing to restore (`RESTORE_UNKNOWN`), or another change in progress (`CONFLICT`). "
                "`error.reasons` lists every reason.",
                e503="The brain marker could not be written (`MARKER_FAILED`); nothing changed.",
            ),
        },
    )
    def post(self, request, id_or_slug: str):
        data = self.TransitionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        task = selectors.task_get(space=request.user.space, id_or_slug=id_or_slug)
        log = transition_services.task_transition(
            task=task, agent=request.user, to=data.validated_data["to"], summary=data.validated_data["summary"]
        )
        return Response({"task": TaskOutputSerializer(task).data, "transition": TransitionOutputSerializer(log).data})


class TaskTransitionsApi(APIView):
    """What the calling agent may do with this task now, and why each other rule refuses."""

    method_hints = {"POST": "Did you mean POST {parent}/transition? That one moves the task."}

    @extend_schema(responses=TransitionOptionsOutputSerializer)
    def get(self, request, id_or_slug: str):
        strict.query_none(request)
        task = selectors.task_get(space=request.user.space, id_or_slug=id_or_slug)
        options = transition_services.task_transition_options(task=task, agent=request.user)
        return Response(
            {
                "task": task.slug,
                "status": task.status,
                "role": task.role,
                "actor": request.user.role,
                "allowed": [o["to"] for o in options if o["allowed"]],
                "transitions": options,
            }
        )


class WorkflowOutputSerializer(serializers.Serializer):
    """``tasks.workflow.workflow_as_data``: the transition table the engine enforces."""

    lookup_order = serializers.ListField(child=serializers.CharField())
    any_excludes_from = serializers.ListField(child=serializers.CharField())
    statuses = serializers.ListField(child=serializers.CharField())
    restore = serializers.CharField()
    actors = serializers.ListField(child=serializers.CharField())
    types = serializers.DictField(child=serializers.DictField(), help_text="Per task type: its transition rules.")
    approval_modes = serializers.DictField(help_text='Per mode: the waived confirmations ("all" or a list).')
    protected_dna_keys = serializers.ListField(child=serializers.CharField())
    protected_dna_prefixes = serializers.ListField(child=serializers.CharField())
    memory_gates = serializers.DictField(child=serializers.CharField())
    special_roles = serializers.DictField(child=serializers.CharField())


class WorkflowApi(APIView):
    """The transition table as data: the same table the engine enforces."""

    @extend_schema(responses={200: WorkflowOutputSerializer})
    def get(self, request):
        strict.query_none(request)
        return Response(workflow.workflow_as_data())


class InFlightApi(APIView):
    """Recovery: the active and blocked tasks of a role in the caller's space, with their last markers,
    one page at a time (any agent may block a task for another role, so the list is bounded)."""

    class InFlightQuerySerializer(strict.Serializer):
        markers = strict.IntegerField(min_value=1, max_value=20, default=3, help_text="markers per task")
        limit = strict.IntegerField(
            min_value=1, max_value=LIST_MAX_LIMIT, default=LIST_DEFAULT_LIMIT, help_text="tasks per page"
        )
        cursor = paging.CursorField(order=selectors.IN_FLIGHT_ORDER)

    @extend_schema(
        parameters=[
            InFlightQuerySerializer,
            OpenApiParameter("role", str, OpenApiParameter.PATH, enum=list(AgentRole.values)),
        ],
        responses={
            200: InFlightOutputSerializer,
            **error_responses(400, e400="Unknown role, bad markers, limit or cursor, or an unknown parameter."),
        },
    )
    def get(self, request, role: str):
        query = self.InFlightQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        qs = selectors.task_in_flight(space=request.user.space, role=role, agent=request.user)
        page, next_cursor = paging.page_after(
            qs,
            order=selectors.IN_FLIGHT_ORDER,
            cursor=params.get("cursor"),
            limit=params["limit"],
            budget=selectors.PAGE_BUDGET,
        )
        recent = selectors.transitions_recent(task_ids=[task.id for task in page], per_task=params["markers"])
        return Response(
            {
                "role": role,
                "count": qs.count(),
                "next_cursor": next_cursor,
                "tasks": [
                    {
                        **TaskOutputSerializer(task).data,
                        "last_markers": TransitionOutputSerializer(recent.get(task.id, []), many=True).data,
                    }
                    for task in page
                ],
            }
        )


def task_schema_rules(result, generator, request, public):
    """POSTPROCESSING_HOOKS entry: a bug names the task(s) it was found in (400 MISSING_PARENT); the DNA
    patch needs its body."""
    schema = result.get("components", {}).get("schemas", {}).get("TaskCreateInputRequest")
    if schema is not None:
        others = [t for t in TaskType.values if t != TaskType.BUG]
        schema["anyOf"] = [
            {"properties": {"type": {"enum": others}}},
            {"required": ["parent_ids"], "properties": {"parent_ids": {"type": "array", "minItems": 1}}},
        ]
    patch = result.get("paths", {}).get("/api/v1/tasks/{id_or_slug}/dna", {}).get("patch")
    if patch is not None and "requestBody" in patch:
        patch["requestBody"]["required"] = True  # an empty body is refused (400)
    return result
