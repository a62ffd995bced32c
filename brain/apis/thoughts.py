"""``GET /api/v1/thoughts/{id}`` and ``GET /api/v1/thoughts/{id}/lineage`` (SPEC 2.1, 2.4)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from brain.models import Thought
from brain.selectors.lineage import DEFAULT_MAX_DEPTH, MAX_MAX_DEPTH, PREVIEW_CHARS, thought_detail, thought_lineage
from core import fields as strict


class CorrectedBySerializer(serializers.Serializer):
    thought_id = strict.UUIDField(source="id")
    correct_fact = strict.CharField()
    corrected_fact = strict.CharField()
    contributor = strict.CharField(source="contributor_name")
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
    related_thoughts = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    has_embedding = serializers.SerializerMethodField()
    corrected_by = CorrectedBySerializer(many=True, read_only=True, help_text="Corrections that supersede it.")
    corrects = CorrectsSerializer(many=True, read_only=True, help_text="For a correction: what it superseded.")

    class Meta:
        model = Thought
        exclude = ["embedding", "corrected_fact_embedding", "search_vector"]

    def get_has_embedding(self, thought: Thought) -> bool:
        return thought.embedding is not None


class ThoughtDetailApi(APIView):
    """One thought of the caller's space with every field (the vector itself is left out), its related
    thoughts (both ways) and its correction history: ``corrected_by`` and, for a correction, ``corrects``."""

    @extend_schema(responses={200: ThoughtOutputSerializer})
    def get(self, request, thought_id: str):
        thought = thought_detail(space=request.user.space, thought_id=thought_id)
        return Response(ThoughtOutputSerializer(thought).data)


class LineageQuerySerializer(serializers.Serializer):
    max_depth = strict.IntegerField(min_value=0, max_value=MAX_MAX_DEPTH, default=DEFAULT_MAX_DEPTH)


class ThoughtLineageApi(APIView):
    """The lineage chain: ancestors at negative depth, descendants at positive depth, ``truncated``."""

    @extend_schema(parameters=[LineageQuerySerializer], responses={200: dict})
    def get(self, request, thought_id: str):
        query = LineageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        lineage = thought_lineage(
            space=request.user.space, thought_id=thought_id, max_depth=query.validated_data["max_depth"]
        )
        return Response(lineage)
