from django.contrib import admin

from core.admin import ColonyModelAdmin
from quality.models import (
    TURN_ITEM_VERDICT_FIELDS,
    ConfidenceChange,
    JudgeValidation,
    QualityRollup,
    SessionOwner,
    TurnItem,
    TurnLog,
)


class _Recorded(ColonyModelAdmin):
    """What the quality loop records and computes (SPEC 4): listed and read, never added or edited in a form.
    A judge's validation is what ``manage.py validate_judge`` measured, and it decides whether the judge's
    verdicts move ranking (SPEC 4.2)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class TurnItemInline(admin.TabularInline):
    model = TurnItem
    fields = [
        "position",
        "thought",
        "score_at_injection",
        "in_injection",
        "explicit_used",
        "explicit_contradicted",
        *TURN_ITEM_VERDICT_FIELDS,
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(TurnLog)
class TurnLogAdmin(_Recorded):
    """Turns can be deleted (a prompt that held a secret); their items, verdicts and scores go with them."""

    list_display = ["created_at", "space", "agent_name", "session_id", "turn_id", "status", "judge_name"]
    list_filter = ["status", "injected_from", "judge_trusted", "space"]
    search_fields = ["session_id", "turn_id", "agent_name", "user_prompt"]
    readonly_fields = ["created_at", "scored_at", "query_log"]
    raw_id_fields = ["agent"]
    inlines = [TurnItemInline]
    date_hierarchy = "created_at"

    def has_delete_permission(self, request, obj=None):
        return admin.ModelAdmin.has_delete_permission(self, request, obj)


@admin.register(SessionOwner)
class SessionOwnerAdmin(_Recorded):
    list_display = ["claimed_at", "space", "session_id", "agent"]
    list_filter = ["space"]
    search_fields = ["session_id", "agent__name"]
    readonly_fields = ["claimed_at"]
    raw_id_fields = ["agent"]


@admin.register(TurnItem)
class TurnItemAdmin(_Recorded):
    list_display = ["turn", "position", "thought", "on_topic", "used", "contradicted", "verdict_source", "fed_ema"]
    list_filter = ["on_topic", "used", "contradicted", "verdict_source", "fed_ema"]
    search_fields = ["excerpt", "thought__id"]
    raw_id_fields = ["turn", "thought"]


@admin.register(ConfidenceChange)
class ConfidenceChangeAdmin(_Recorded):
    list_display = ["changed_at", "thought", "agent_name", "used", "contradicted", "old_confidence", "new_confidence"]
    list_filter = ["used", "contradicted", "space"]
    search_fields = ["thought__id", "agent_name"]
    raw_id_fields = ["thought", "turn"]
    date_hierarchy = "changed_at"


@admin.register(QualityRollup)
class QualityRollupAdmin(_Recorded):
    list_display = ["day", "space", "agent_name", "turns", "items", "on_topic", "used", "contradicted"]
    list_filter = ["space"]
    search_fields = ["agent_name"]
    date_hierarchy = "day"


@admin.register(JudgeValidation)
class JudgeValidationAdmin(_Recorded):
    list_display = [
        "created_at",
        "judge_name",
        "turns",
        "items",
        "on_topic_agreement",
        "used_agreement",
        "contradicted_agreement",
        "trusted",
    ]
    list_filter = ["judge_name", "trusted"]
    search_fields = ["judge_name", "source"]
