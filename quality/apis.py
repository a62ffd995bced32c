"""The quality loop's agent API: log a turn, read the metrics (SPEC 4.1, 4.3)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from api import fields as strict
from api.schema import error_responses, json_value_schema
from quality.selectors import quality_metrics
from quality.services.turns import MAX_ITEMS, turn_log_create


@extend_schema_field({"anyOf": [s for s in json_value_schema()["anyOf"] if s != {"type": "null"}]})
class ToolCallField(serializers.JSONField):
    """One tool call: any NUL-free JSON value but null."""


class TurnCreateInputSerializer(strict.Serializer):
    unknown_field_hints = {
        "prompt": "The turn's prompt goes in 'user_prompt'.",
        "response": "The turn's answer goes in 'assistant_response'.",
    }

    session_id = strict.CharField(max_length=100)
    turn_id = strict.VisibleAsciiField(max_length=200)
    user_prompt = strict.CharField(allow_blank=True, trim_whitespace=False)
    assistant_response = strict.CharField(allow_blank=True, trim_whitespace=False)
    tool_calls = serializers.ListField(child=ToolCallField(), required=False, default=list, max_length=1000)
    injected_ids = serializers.ListField(
        child=strict.UUIDField(),
        required=False,
        max_length=MAX_ITEMS,
        help_text="Default: the sources of this session's last memory call. Only thoughts your memory calls "
        "in this session returned.",
    )
    used_ids = serializers.ListField(child=strict.UUIDField(), required=False, default=list, max_length=MAX_ITEMS)
    contradicted_ids = serializers.ListField(
        child=strict.UUIDField(), required=False, default=list, max_length=MAX_ITEMS
    )


class TurnCreateOutputSerializer(serializers.Serializer):
    turn_log_id = strict.UUIDField(source="turn.id")
    session_id = strict.CharField(source="turn.session_id")
    turn_id = strict.CharField(source="turn.turn_id")
    status = strict.CharField(source="turn.status")
    injected_from = strict.CharField(source="turn.injected_from")
    items = strict.IntegerField()
    duplicate = serializers.SerializerMethodField()

    def get_duplicate(self, logged) -> bool:
        return not logged.created


class QualityMetricsOutputSerializer(serializers.Serializer):
    """The metrics payload (quality.selectors.quality_metrics); nested parts are described per key there."""

    space = serializers.CharField()
    agent = serializers.CharField(allow_null=True)
    window_days = serializers.IntegerField()
    days = serializers.IntegerField()
    as_of = serializers.DateTimeField()
    rolled_up_at = serializers.DateTimeField(allow_null=True)
    turns = serializers.IntegerField()
    turns_pending = serializers.IntegerField()
    items = serializers.IntegerField()
    metrics = serializers.DictField(
        child=serializers.DictField(), help_text="Per metric: value, target, comparison, meets_target, counts."
    )
    judge = serializers.DictField(help_text="The judge, whether it is trusted, and its last validation.")
    ranking_enabled = serializers.BooleanField()
    history = serializers.ListField(
        child=serializers.DictField(), help_text="Per day, oldest first: day, counts, daily and rolling rates."
    )


class QualityMetricsQuerySerializer(strict.Serializer):
    days = strict.IntegerField(min_value=1, max_value=365, default=30)
    agent = strict.CharField(max_length=100, required=False)


class TurnCreateApi(APIView):
    """Log one agent turn for the quality loop; scoring runs in the background (202)."""

    @extend_schema(
        request=TurnCreateInputSerializer, responses={202: TurnCreateOutputSerializer, **error_responses(404, 409)}
    )
    def post(self, request):
        serializer = TurnCreateInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        logged = turn_log_create(agent=request.user, **serializer.validated_data)
        return Response(TurnCreateOutputSerializer(logged).data, status=status.HTTP_202_ACCEPTED)


class QualityMetricsApi(APIView):
    """The four metrics (rolling 7 days) with targets and daily history, for the caller's space."""

    @extend_schema(
        parameters=[QualityMetricsQuerySerializer],
        responses={
            200: QualityMetricsOutputSerializer,
            **error_responses(404, e404="No agent of that name in the space."),
        },
    )
    def get(self, request):
        serializer = QualityMetricsQuerySerializer(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        body = quality_metrics(
            space=request.user.space,
            agent_name=serializer.validated_data.get("agent"),
            days=serializer.validated_data["days"],
        )
        return Response(body)
