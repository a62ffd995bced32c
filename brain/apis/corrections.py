"""Agent API of knowledge evolution: correction suggestions and correcting a thought (SPEC 2.5, 4.5, 5).

Every id is looked up in the caller's space only, so another space's suggestion or thought is a 404
exactly like an unknown one. Failures change nothing (the services are all-or-nothing).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from api import fields as strict
from api import paging
from api.schema import error_responses
from brain.apis.idempotency import KEY_CONFLICT_RESPONSES, answered_once, idempotency_parameters, request_key
from brain.choices import TOPIC_MAX_CHARS, SuggestionStatus
from brain.inputs import PROMPT_MAX_CHARS, SourceRefSerializer, thought_ids_field
from brain.models import CorrectionSuggestion, Thought
from brain.services.corrections import correction_supersede_guidance, suggestion_accept, thought_correct_by_id
from brain.services.receipts import fields_fingerprint
from brain.services.suggestions import SUGGESTION_LIST_ORDER, suggestion_dismiss, suggestion_get, suggestions_list


class CorrectionThoughtOutputSerializer(serializers.ModelSerializer):
    thought_id = strict.UUIDField(source="id")
    contributor = strict.CharField(source="contributor_name")
    superseded_by = strict.UUIDField(source="superseded_by_id", allow_null=True)

    class Meta:
        model = Thought
        fields = [
            "thought_id",
            "content",
            "contributor",
            "created_at",
            "thought_category",
            "topic",
            "corrected_fact",
            "correct_fact",
            "supersedes",
            "source_ref",
            "quality_flags",
            "superseded",
            "superseded_by",
        ]


class SuggestionOutputSerializer(serializers.ModelSerializer):
    suggestion_id = strict.UUIDField(source="id")
    thought_id = strict.UUIDField()
    thought_preview = serializers.SerializerMethodField()
    contradicting_thought_id = strict.UUIDField(allow_null=True)
    agent = strict.CharField(source="agent.name", allow_null=True, default=None)
    correction_id = strict.UUIDField(allow_null=True)

    class Meta:
        model = CorrectionSuggestion
        fields = [
            "suggestion_id",
            "status",
            "thought_id",
            "thought_preview",
            "statement",
            "contradicting_thought_id",
            "origin",
            "confidence",
            "reason",
            "draft",
            "agent",
            "session_id",
            "created_at",
            "resolved_at",
            "resolved_by",
            "correction_id",
        ]

    def get_thought_preview(self, suggestion) -> str:
        return suggestion.thought.content[:80]


class CorrectionResultSerializer(serializers.Serializer):
    correction = CorrectionThoughtOutputSerializer(help_text="The correction thought just stored.")
    superseded_count = serializers.IntegerField(help_text="How many thoughts it superseded.")
    repeats_flagged = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="Live thoughts it did not name that repeat the wrong fact (similarity above 0.85 to "
        "corrected_fact), nearest first: flagged contradicts_correction, ranked below it. Name them in "
        "another correction's supersedes if they should be superseded.",
    )
    guidance = serializers.CharField()


class CorrectionAcceptOutputSerializer(CorrectionResultSerializer):
    suggestion = SuggestionOutputSerializer(help_text="The suggestion, now accepted.")


class CorrectionDismissOutputSerializer(serializers.Serializer):
    suggestion = SuggestionOutputSerializer(help_text="The suggestion, now dismissed.")


class SuggestionListOutputSerializer(serializers.Serializer):
    count = strict.IntegerField(help_text="How many suggestions match the filters (every page's).")
    next_cursor = strict.CharField(
        allow_null=True, help_text="Send it back as cursor for the next page; null on the last."
    )
    results = SuggestionOutputSerializer(many=True)


class CorrectionListApi(APIView):
    """Correction suggestions of the caller's space: the caller's own first, then newest first."""

    method_hints = {
        "POST": "Correct a thought with POST /api/v1/thoughts/<thought_id>/correct; this path lists the pending "
        "correction suggestions.",
    }

    class CorrectionListFilterSerializer(strict.Serializer):
        status = strict.ChoiceField(choices=[*SuggestionStatus.values, "all"], default=SuggestionStatus.PENDING)
        mine = strict.BooleanField(default=False, help_text="Only suggestions addressed to the caller.")
        limit = strict.IntegerField(min_value=1, max_value=200, default=50)
        cursor = paging.CursorField(order=SUGGESTION_LIST_ORDER)

    @extend_schema(
        parameters=[CorrectionListFilterSerializer],
        operation_id="v1_corrections_list",
        responses={200: SuggestionListOutputSerializer},
    )
    def get(self, request):
        filters = self.CorrectionListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        suggestions = suggestions_list(
            space=request.user.space,
            status=None if data["status"] == "all" else data["status"],
            agent=request.user,
            mine=data["mine"],
        )
        count = suggestions.count()
        page, next_cursor = paging.page_after(
            suggestions, order=SUGGESTION_LIST_ORDER, cursor=data.get("cursor"), limit=data["limit"]
        )
        return Response(
            {
                "count": count,
                "next_cursor": next_cursor,
                "results": SuggestionOutputSerializer(page, many=True).data,
            }
        )


class CorrectionAcceptApi(APIView):
    """Accept a pending suggestion: one call creates the correction and supersedes the old thought."""

    class CorrectionAcceptInputSerializer(strict.Serializer):
        correct_fact = strict.CharField(max_length=PROMPT_MAX_CHARS, required=False, allow_blank=True)
        content = strict.CharField(max_length=PROMPT_MAX_CHARS, required=False, allow_blank=True)

    @extend_schema(
        request=CorrectionAcceptInputSerializer,
        parameters=[OpenApiParameter("suggestion_id", str, OpenApiParameter.PATH)],
        responses={201: CorrectionAcceptOutputSerializer, **error_responses(409)},
    )
    def post(self, request, suggestion_id):
        body = self.CorrectionAcceptInputSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        suggestion = suggestion_get(space=request.user.space, suggestion_id=suggestion_id)
        correction = suggestion_accept(
            suggestion=suggestion,
            resolved_by=request.user.name,
            agent=request.user,
            correct_fact=body.validated_data.get("correct_fact"),
            content=body.validated_data.get("content"),
        )
        suggestion.refresh_from_db()
        count = len(correction.supersedes)
        return Response(
            {
                "suggestion": SuggestionOutputSerializer(suggestion).data,
                "correction": CorrectionThoughtOutputSerializer(correction).data,
                "superseded_count": count,
                "repeats_flagged": [str(pk) for pk in correction.repeats_flagged],
                "guidance": correction_supersede_guidance(count=count, repeats=correction.repeats_flagged),
            },
            status=201,
        )


class CorrectionDismissApi(APIView):
    """Dismiss a pending suggestion: the old thought stands, nothing else changes."""

    class CorrectionDismissInputSerializer(strict.Serializer):
        reason = strict.CharField(max_length=2000, required=False, allow_blank=True)

    @extend_schema(
        request=CorrectionDismissInputSerializer,
        parameters=[OpenApiParameter("suggestion_id", str, OpenApiParameter.PATH)],
        responses={
            200: CorrectionDismissOutputSerializer,
            **error_responses(403, 409, e403="`OWN_THOUGHT`: the suggestion contradicts a thought you contributed."),
        },
    )
    def post(self, request, suggestion_id):
        body = self.CorrectionDismissInputSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        suggestion = suggestion_get(space=request.user.space, suggestion_id=suggestion_id)
        dismissed = suggestion_dismiss(
            suggestion=suggestion,
            resolved_by=request.user.name,
            reason=body.validated_data.get("reason", ""),
            agent=request.user,
        )
        return Response({"suggestion": SuggestionOutputSerializer(dismissed).data})


class ThoughtCorrectApi(APIView):
    """Correct one thought: store a correction that supersedes it (and any ``supersedes`` given)."""

    class ThoughtCorrectInputSerializer(strict.Serializer):
        unknown_field_hints = {
            name: "The right fact goes in 'correct_fact' (the wrong one in 'corrected_fact', by default the "
            "thought's content)."
            for name in ("correction", "fact", "new_fact", "correct", "right_fact", "corrected_to", "fix")
        }

        correct_fact = strict.CharField(max_length=PROMPT_MAX_CHARS)
        corrected_fact = strict.CharField(
            max_length=PROMPT_MAX_CHARS,
            required=False,
            allow_blank=True,
            help_text="Default: the thought's content (a correction's: its correct_fact).",
        )
        content = strict.CharField(max_length=PROMPT_MAX_CHARS, required=False, allow_blank=True)
        prompt = strict.CharField(
            max_length=PROMPT_MAX_CHARS,
            required=False,
            allow_blank=True,
            help_text="Alias of content (memory wire name).",
        )
        topic = strict.CharField(
            max_length=TOPIC_MAX_CHARS, required=False, allow_blank=True, help_text="Default: the thought's topic."
        )
        supersedes = thought_ids_field()
        source_ref = SourceRefSerializer(required=False)

        def validate_correct_fact(self, value: str) -> str:
            if not value.strip():
                raise serializers.ValidationError("Say what the correct fact is.")
            return value

    @extend_schema(
        request=ThoughtCorrectInputSerializer,
        parameters=[
            OpenApiParameter("thought_id", str, OpenApiParameter.PATH),
            *idempotency_parameters(what="correction", success=201, replayed_skips="nothing was stored"),
        ],
        responses={201: CorrectionResultSerializer, **KEY_CONFLICT_RESPONSES},
    )
    def post(self, request, thought_id):
        key = request_key(request)
        body = self.ThoughtCorrectInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return answered_once(
            request,
            key=key,
            fingerprint=fields_fingerprint(f"POST /api/v1/thoughts/{thought_id}/correct", request.data),
            run=lambda: self._correct(request, thought_id, body.validated_data),
        )

    @staticmethod
    def _correct(request, thought_id, data: dict) -> tuple[int, dict]:
        correction, count = thought_correct_by_id(
            space=request.user.space,
            agent=request.user,
            thought_id=thought_id,
            correct_fact=data["correct_fact"],
            corrected_fact=data.get("corrected_fact"),
            content=data.get("content") or data.get("prompt"),
            topic=data.get("topic"),
            extra_supersedes=data.get("supersedes", []),
            source_ref=data.get("source_ref"),
        )
        return 201, {
            "correction": CorrectionThoughtOutputSerializer(correction).data,
            "superseded_count": count,
            "repeats_flagged": [str(pk) for pk in correction.repeats_flagged],
            "guidance": correction_supersede_guidance(count=count, repeats=correction.repeats_flagged),
        }
