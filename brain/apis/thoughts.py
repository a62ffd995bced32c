"""``GET /api/v1/thoughts/{id}`` and ``GET /api/v1/thoughts/{id}/lineage`` (SPEC 2.1, 2.4)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from api import fields as strict
from api import paging
from api.schema import error_responses
from brain.choices import TOPIC_MAX_CHARS, ThoughtCategory, topic_normal
from brain.models import THOUGHT_BULKY_FIELDS, Thought
from brain.selectors.lineage import (
    DEFAULT_MAX_DEPTH,
    DETAIL_CORRECTIONS_MAX,
    DETAIL_RELATED_MAX,
    MAX_MAX_DEPTH,
    PREVIEW_CHARS,
    thought_detail,
    thought_lineage,
)
from brain.selectors.listing import THOUGHT_LIST_ORDER, thought_list
from brain.services.retraction import REASON_MAX_CHARS, retraction_guidance, thought_retract


class CorrectedBySerializer(serializers.Serializer):
    thought_id = strict.UUIDField(source="id")
    correct_fact = strict.CharField()
    corrected_fact = strict.CharField()
    contributor = strict.CharField(help_text="The contributing agent's registered name (a human's name otherwise).")
    created_at = serializers.DateTimeField()


class CorrectsSerializer(serializers.Serializer):
    thought_id = strict.UUIDField(source="id")
    content_preview = serializers.SerializerMethodField()
    superseded = strict.BooleanField()
    superseded_by = strict.UUIDField(source="superseded_by_id", allow_null=True)

    def get_content_preview(self, thought: Thought) -> str:
        return thought.content[:PREVIEW_CHARS]


class ThoughtOutputSerializer(serializers.ModelSerializer):
    space = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    agent = serializers.SlugRelatedField(slug_field="name", read_only=True)
    related_thoughts = serializers.ListField(
        child=serializers.UUIDField(),
        source="related_ids",
        read_only=True,
        help_text=f"The newest {DETAIL_RELATED_MAX} (related_thoughts_count counts all).",
    )
    related_thoughts_count = serializers.IntegerField(read_only=True)
    has_embedding = serializers.SerializerMethodField()
    corrected_by = CorrectedBySerializer(
        many=True,
        read_only=True,
        help_text=f"The newest {DETAIL_CORRECTIONS_MAX} corrections that supersede it (corrected_by_count counts all).",
    )
    corrected_by_count = serializers.IntegerField(read_only=True)
    corrects = CorrectsSerializer(many=True, read_only=True, help_text="For a correction: what it superseded.")
    accessed_by = serializers.ListField(
        child=serializers.CharField(),
        source="accessed_by_names",
        read_only=True,
        help_text="The agents that retrieved it, each once, by the names they have now.",
    )

    class Meta:
        model = Thought
        exclude = list(THOUGHT_BULKY_FIELDS)

    def get_has_embedding(self, thought: Thought) -> bool:
        known = getattr(thought, "has_embedding", None)  # annotated by thought_get (the vector stays deferred)
        return thought.embedding is not None if known is None else known


class ThoughtDetailApi(APIView):
    """One thought of the caller's space with every field (the vector itself is left out), its related
    thoughts (both ways) and its correction history: ``corrected_by`` and, for a correction, ``corrects``."""

    method_hints = {
        "DELETE": "Thoughts are not deleted: retract your own with POST {path}/retract, or correct a wrong one "
        "with POST {path}/correct.",
        **dict.fromkeys(
            ("PUT", "PATCH", "POST"),
            "Thoughts are not edited in place: contribute the new version with POST /api/v1/memory and refines "
            "set to this id, or correct a wrong fact with POST {path}/correct.",
        ),
    }

    @extend_schema(responses={200: ThoughtOutputSerializer})
    def get(self, request, thought_id: str):
        strict.query_none(request)
        thought = thought_detail(space=request.user.space, thought_id=thought_id)
        return Response(ThoughtOutputSerializer(thought).data)


class LineageQuerySerializer(strict.Serializer):
    max_depth = strict.IntegerField(min_value=0, max_value=MAX_MAX_DEPTH, default=DEFAULT_MAX_DEPTH)


class LineageNodeSerializer(serializers.Serializer):
    thought_id = serializers.UUIDField()
    thought_type = serializers.CharField()
    content_preview = serializers.CharField(help_text="The first 80 characters.")
    contributor = serializers.CharField()
    created_at = serializers.DateTimeField()
    source_ids = serializers.ListField(child=serializers.UUIDField())
    depth = serializers.IntegerField(help_text="Negative: an ancestor; 0: the thought itself; positive: a descendant.")
    superseded = serializers.BooleanField()
    refined_by = serializers.UUIDField(allow_null=True)


class LineageOutputSerializer(serializers.Serializer):
    thought_id = serializers.UUIDField()
    chain = LineageNodeSerializer(many=True, help_text="By depth, then by creation time.")
    truncated = serializers.BooleanField(help_text="The chain goes on beyond max_depth in some direction.")


class ThoughtLineageApi(APIView):
    """The lineage chain: ancestors at negative depth, descendants at positive depth, ``truncated``."""

    @extend_schema(parameters=[LineageQuerySerializer], responses={200: LineageOutputSerializer})
    def get(self, request, thought_id: str):
        query = LineageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        lineage = thought_lineage(
            space=request.user.space, thought_id=thought_id, max_depth=query.validated_data["max_depth"]
        )
        return Response(lineage)


# --- list and retract (SPEC 5) -------------------------------------------------------------------

LIST_DEFAULT_LIMIT = 50
LIST_MAX_LIMIT = 200


class ThoughtListItemSerializer(serializers.Serializer):
    thought_id = strict.UUIDField(source="id")
    content = strict.CharField()
    contributor = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    thought_type = strict.CharField()
    thought_category = strict.CharField()
    topic = strict.CharField()
    temporal_scope = strict.DateField(allow_null=True)
    tags = serializers.ListField(child=strict.CharField())
    quality_flags = serializers.ListField(child=strict.CharField())
    superseded = strict.BooleanField()
    superseded_by = strict.UUIDField(source="superseded_by_id", allow_null=True)
    refined_by = strict.UUIDField(source="refined_by_id", allow_null=True)
    retraction = serializers.SerializerMethodField()

    def get_contributor(self, thought: Thought) -> str:
        return thought.contributor

    def get_retraction(self, thought: Thought) -> dict | None:
        return (thought.context_metadata or {}).get("retraction")


class ThoughtListPageSerializer(serializers.Serializer):
    count = strict.IntegerField(help_text="Thoughts matching the filters, all pages.")
    limit = strict.IntegerField()
    offset = strict.IntegerField()
    next_offset = strict.IntegerField(allow_null=True, help_text="Offset of the next page; null on the last.")
    next_cursor = strict.CharField(
        allow_null=True,
        help_text="Send it as cursor for the next page (null on the last): unlike next_offset, it neither repeats "
        "nor skips thoughts contributed or superseded between the pages.",
    )
    results = ThoughtListItemSerializer(many=True)


class ThoughtListQuerySerializer(strict.Serializer):
    topic = strict.CharField(max_length=TOPIC_MAX_CHARS, required=False, help_text="A topic, whatever its case.")
    category = strict.ChoiceField(choices=ThoughtCategory.values, required=False)
    contributor = strict.CharField(max_length=200, required=False, help_text="The agent's registered name.")
    since = strict.DateTimeField(required=False, help_text="ISO date or date-time; created at or after it.")
    superseded = strict.BooleanField(
        required=False, allow_null=True, default=None, help_text="true: superseded or retracted only; false: live."
    )
    limit = strict.IntegerField(min_value=1, max_value=LIST_MAX_LIMIT, default=LIST_DEFAULT_LIMIT)
    offset = paging.OffsetField()
    cursor = paging.CursorField(order=THOUGHT_LIST_ORDER)

    def validate_topic(self, value: str) -> str:
        return topic_normal(value)  # topics are stored lower-cased

    def validate(self, attrs):
        return paging.no_cursor_with_offset(attrs, self.initial_data)


class ThoughtListApi(APIView):
    """The thoughts of the caller's space, newest first, with filters and cursor (or offset) paging."""

    method_hints = {
        "POST": "Contribute a thought with POST /api/v1/memory (the statement in prompt); import many with "
        "POST /api/v1/thoughts/import.",
    }

    @extend_schema(
        operation_id="v1_thoughts_list",
        parameters=[ThoughtListQuerySerializer],
        responses={200: ThoughtListPageSerializer},
    )
    def get(self, request):
        query = ThoughtListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = dict(query.validated_data)
        limit, offset, cursor = params.pop("limit"), params.pop("offset"), params.pop("cursor", None)
        qs = thought_list(space=request.user.space, **params)
        count = qs.count()
        page, next_cursor = paging.page_after(qs, order=THOUGHT_LIST_ORDER, cursor=cursor, limit=limit, offset=offset)
        next_offset = offset + limit if next_cursor is not None and cursor is None else None
        return Response(
            {
                "count": count,
                "limit": limit,
                "offset": offset,
                "next_offset": next_offset,
                "next_cursor": next_cursor,
                "results": ThoughtListItemSerializer(page, many=True).data,
            }
        )


class ThoughtRetractInputSerializer(strict.Serializer):
    reason = strict.CharField(max_length=REASON_MAX_CHARS, help_text="Why it is withdrawn.")
    redact = strict.BooleanField(
        required=False,
        default=False,
        help_text="true: also erase its text (a leaked secret, personal data): the thought's content, facts and "
        "metadata, the query-log entry of the call that stored it, suggestions and turn excerpts quoting it. "
        "Who retracted it, when and why are kept. Default false: the text stays for audit.",
    )


class ThoughtRetractOutputSerializer(serializers.Serializer):
    thought = ThoughtListItemSerializer()
    live_again = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="The thoughts it had superseded (as a refinement, consolidation or correction) that nothing "
        "else supersedes: live again, ranked as before it was contributed.",
    )
    guidance = strict.CharField()


class ThoughtRetractApi(APIView):
    """Retract a thought you contributed: superseded without a replacement, flagged ``retracted``,
    kept for audit (never deleted); memory calls don't return it."""

    @extend_schema(
        request=ThoughtRetractInputSerializer,
        responses={
            200: ThoughtRetractOutputSerializer,
            **error_responses(
                403,
                409,
                e403="Not the thought's contributor (`NOT_CONTRIBUTOR`; correct it instead) or a transition marker "
                "(`MARKER_NOT_RETRACTABLE`).",
                e409="Already retracted (`ALREADY_RETRACTED`): without redact, or with redact once its text is erased.",
            ),
        },
    )
    def post(self, request, thought_id: str):
        body = ThoughtRetractInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        thought = thought_retract(
            space=request.user.space,
            thought_id=thought_id,
            reason=body.validated_data["reason"],
            agent=request.user,
            redact=body.validated_data["redact"],
        )
        return Response(
            {
                "thought": ThoughtListItemSerializer(thought).data,
                "live_again": [str(pk) for pk in thought.live_again],
                "guidance": retraction_guidance(thought),
            }
        )
