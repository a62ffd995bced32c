"""The agents' task API (SPEC 5). Each view validates, calls one service or selector, serializes.

The acting agent and its role always come from the token (``request.user``), never from the body.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.choices import AgentRole
from tasks import selectors, workflow
from tasks.choices import ApprovalMode, TaskStatus, TaskType
from tasks.outputs import ProjectOutputSerializer, TaskOutputSerializer, TransitionOutputSerializer, task_detail_output
from tasks.services import tasks as task_services
from tasks.services import transitions as transition_services

LIST_DEFAULT_LIMIT = 100
LIST_MAX_LIMIT = 500


class TransitionOptionOutputSerializer(serializers.Serializer):
    to = serializers.CharField()
    target_status = serializers.CharField()
    rule = serializers.CharField()
    allowed = serializers.BooleanField()
    new_role = serializers.CharField()
    human_confirmation_needed = serializers.BooleanField()
    human_confirmed_by = serializers.CharField(allow_null=True)
    reasons = serializers.ListField(child=serializers.DictField())


class TransitionOptionsOutputSerializer(serializers.Serializer):
    task = serializers.CharField()
    status = serializers.CharField()
    role = serializers.CharField()
    actor = serializers.CharField()
    allowed = serializers.ListField(child=serializers.CharField())
    transitions = TransitionOptionOutputSerializer(many=True)


class InFlightTaskOutputSerializer(TaskOutputSerializer):
    last_markers = TransitionOutputSerializer(many=True)


class InFlightOutputSerializer(serializers.Serializer):
    role = serializers.CharField()
    tasks = InFlightTaskOutputSerializer(many=True)


class ProjectListCreateApi(APIView):
    class ProjectCreateInputSerializer(serializers.Serializer):
        slug = serializers.SlugField(max_length=100)
        name = serializers.CharField(max_length=200, required=False, default="")
        approval_mode = serializers.ChoiceField(choices=ApprovalMode.values, default=ApprovalMode.MANUAL)

    @extend_schema(responses=ProjectOutputSerializer(many=True))
    def get(self, request):
        return Response(
            {"results": ProjectOutputSerializer(selectors.project_list(space=request.user.space), many=True).data}
        )

    @extend_schema(request=ProjectCreateInputSerializer, responses={201: ProjectOutputSerializer})
    def post(self, request):
        data = self.ProjectCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        project = task_services.project_create(space=request.user.space, agent=request.user, **data.validated_data)
        return Response(ProjectOutputSerializer(project).data, status=201)


class TaskListCreateApi(APIView):
    class TaskFilterInputSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=TaskStatus.values, required=False)
        role = serializers.ChoiceField(choices=AgentRole.values, required=False)
        project = serializers.SlugField(required=False)
        type = serializers.ChoiceField(choices=TaskType.values, required=False)
        limit = serializers.IntegerField(min_value=1, max_value=LIST_MAX_LIMIT, default=LIST_DEFAULT_LIMIT)
        offset = serializers.IntegerField(min_value=0, default=0)

    class TaskCreateInputSerializer(serializers.Serializer):
        project = serializers.SlugField(max_length=100)
        slug = serializers.SlugField(max_length=150)
        title = serializers.CharField(max_length=300)
        description = serializers.CharField(required=False, default="", allow_blank=True)
        type = serializers.ChoiceField(choices=TaskType.values, default=TaskType.TASK)
        role = serializers.ChoiceField(choices=AgentRole.values, required=False, default="")
        status = serializers.ChoiceField(choices=[TaskStatus.BACKLOG, TaskStatus.PENDING], default=TaskStatus.BACKLOG)
        dna = serializers.DictField(required=False, default=dict)
        parent_ids = serializers.ListField(child=serializers.CharField(max_length=150), required=False, default=list)
        depends_on = serializers.ListField(child=serializers.CharField(max_length=150), required=False, default=list)

    @extend_schema(parameters=[TaskFilterInputSerializer], responses=TaskOutputSerializer(many=True))
    def get(self, request):
        filters = self.TaskFilterInputSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        params = dict(filters.validated_data)
        limit, offset = params.pop("limit"), params.pop("offset")
        qs = selectors.task_list(space=request.user.space, **params)
        page = list(qs[offset : offset + limit])
        return Response({"count": qs.count(), "results": TaskOutputSerializer(page, many=True).data})

    @extend_schema(request=TaskCreateInputSerializer, responses={201: TaskOutputSerializer})
    def post(self, request):
        data = self.TaskCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        task = task_services.task_create(space=request.user.space, created_by=request.user, **data.validated_data)
        task = selectors.task_get(space=request.user.space, id_or_slug=str(task.id))
        return Response(TaskOutputSerializer(task).data, status=201)


class TaskDetailApi(APIView):
    @extend_schema(responses=TaskOutputSerializer)
    def get(self, request, id_or_slug: str):
        task = selectors.task_get(space=request.user.space, id_or_slug=id_or_slug)
        return Response(task_detail_output(task))


class TaskDnaApi(APIView):
    """Shallow-merge the JSON object in the body into the task's DNA; ``null`` removes a key."""

    @extend_schema(request={"application/json": OpenApiTypes.OBJECT}, responses=TaskOutputSerializer)
    def patch(self, request, id_or_slug: str):
        if not isinstance(request.data, dict) or not request.data:
            raise serializers.ValidationError({"dna": ["Send a non-empty JSON object of DNA fields to merge."]})
        task = selectors.task_get(space=request.user.space, id_or_slug=id_or_slug)
        task_services.task_update_dna(task=task, patch=dict(request.data))
        return Response(TaskOutputSerializer(task).data)


class TaskTransitionApi(APIView):
    class TransitionInputSerializer(serializers.Serializer):
        to = serializers.CharField(max_length=20)
        summary = serializers.CharField(max_length=1000, required=False, default="", allow_blank=True)

    @extend_schema(request=TransitionInputSerializer, responses=TransitionOutputSerializer)
    def post(self, request, id_or_slug: str):
        data = self.TransitionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        task = selectors.task_get(space=request.user.space, id_or_slug=id_or_slug)
        log = transition_services.task_transition(task=task, agent=request.user, **data.validated_data)
        return Response({"task": TaskOutputSerializer(task).data, "transition": TransitionOutputSerializer(log).data})


class TaskTransitionsApi(APIView):
    """What the calling agent may do with this task now, and why each other rule refuses."""

    @extend_schema(responses=TransitionOptionsOutputSerializer)
    def get(self, request, id_or_slug: str):
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


class WorkflowApi(APIView):
    """The transition table as data: the same table the engine enforces."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        return Response(workflow.workflow_as_data())


class InFlightApi(APIView):
    """Recovery: the active and blocked tasks of a role in the caller's space, with their last markers."""

    @extend_schema(
        parameters=[OpenApiParameter("markers", int, description="markers per task (1-20, default 3)")],
        responses=InFlightOutputSerializer,
    )
    def get(self, request, role: str):
        try:
            per_task = min(20, max(1, int(request.query_params.get("markers", 3))))
        except ValueError:
            raise serializers.ValidationError({"markers": ["A whole number."]}) from None
        rows = selectors.task_in_flight(space=request.user.space, role=role, markers_per_task=per_task)
        return Response(
            {
                "role": role,
                "tasks": [
                    {
                        **TaskOutputSerializer(task).data,
                        "last_markers": TransitionOutputSerializer(logs, many=True).data,
                    }
                    for task, logs in rows
                ],
            }
        )
