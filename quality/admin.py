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
class TurnLogAdmin(ColonyModelAdmin):
    list_display = ["created_at", "space", "agent_name", "session_id", "turn_id", "status", "judge_name"]
    list_filter = ["status", "injected_from", "judge_trusted", "space"]
    search_fields = ["session_id", "turn_id", "agent_name", "user_prompt"]
    readonly_fields = ["created_at", "scored_at", "query_log"]
    raw_id_fields = ["agent"]
    inlines = [TurnItemInline]
    date_hierarchy = "created_at"


@admin.register(SessionOwner)
class SessionOwnerAdmin(ColonyModelAdmin):
    list_display = ["claimed_at", "space", "session_id", "agent"]
    list_filter = ["space"]
    search_fields = ["session_id", "agent__name"]
    readonly_fields = ["claimed_at"]
    raw_id_fields = ["agent"]


@admin.register(TurnItem)
class TurnItemAdmin(ColonyModelAdmin):
    list_display = ["turn", "position", "thought", "on_topic", "used", "contradicted", "verdict_source", "fed_ema"]
    list_filter = ["on_topic", "used", "contradicted", "verdict_source", "fed_ema"]
    search_fields = ["excerpt", "thought__id"]
    raw_id_fields = ["turn", "thought"]


@admin.register(ConfidenceChange)
class ConfidenceChangeAdmin(ColonyModelAdmin):
    list_display = ["changed_at", "thought", "agent_name", "used", "contradicted", "old_confidence", "new_confidence"]
    list_filter = ["used", "contradicted", "space"]
    search_fields = ["thought__id", "agent_name"]
    raw_id_fields = ["thought", "turn"]
    date_hierarchy = "changed_at"


@admin.register(QualityRollup)
class QualityRollupAdmin(ColonyModelAdmin):
    list_display = ["day", "space", "agent_name", "turns", "items", "on_topic", "used", "contradicted"]
    list_filter = ["space"]
    search_fields = ["agent_name"]
    date_hierarchy = "day"


@admin.register(JudgeValidation)
class JudgeValidationAdmin(ColonyModelAdmin):
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
