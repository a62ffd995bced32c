"""Admin for the brain: thoughts with their lineage, the query log and correction suggestions."""

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.selectors.lineage import thought_lineage_of
from brain.services.pipeline import thought_content_changed
from core.admin import ColonyModelAdmin


@admin.register(Thought)
class ThoughtAdmin(ColonyModelAdmin):
    list_display = ["short_content", "space", "thought_category", "topic", "thought_type", "superseded",
                    "pheromone_weight", "access_count", "created_at"]  # fmt: skip
    list_filter = ["space", "thought_category", "thought_type", "superseded"]
    search_fields = ["content", "topic", "contributor_id", "contributor_name"]
    date_hierarchy = "created_at"
    exclude = ["embedding", "corrected_fact_embedding"]
    raw_id_fields = ["agent", "refined_by", "superseded_by", "contradicted_by", "related_thoughts"]
    readonly_fields = ["id", "created_at", "embedding_model", "has_embedding", "lineage", "access_count",
                       "last_accessed", "accessed_by", "co_retrieved_with"]  # fmt: skip

    @admin.display(description="content")
    def short_content(self, thought: Thought) -> str:
        return thought.content[:80]

    @admin.display(boolean=True)
    def has_embedding(self, thought: Thought) -> bool:
        return thought.embedding is not None

    @admin.display(description="lineage (depth 10)")
    def lineage(self, thought: Thought) -> str:
        if thought.pk is None:
            return "-"
        chain = thought_lineage_of(space=thought.space, root=thought)["chain"]
        return format_html(
            "<ol>{}</ol>",
            format_html_join(
                "",
                '<li>{} <a href="../../{}/change/">{}</a> {}: {}</li>',
                (
                    (f"{n['depth']:+d}", n["thought_id"], n["thought_id"][:8], n["thought_type"], n["content_preview"])
                    for n in chain
                ),
            ),
        )

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change or "content" in form.changed_data:
            thought_content_changed(thought_id=str(obj.pk))


@admin.register(QueryLog)
class QueryLogAdmin(ColonyModelAdmin):
    list_display = ["created_at", "space", "agent", "agent_ref", "session_id", "query_text"]
    list_filter = ["space"]
    search_fields = ["query_text", "session_id", "agent_ref"]
    readonly_fields = [f.name for f in QueryLog._meta.fields]

    def has_add_permission(self, request):
        return False


@admin.register(CorrectionSuggestion)
class CorrectionSuggestionAdmin(ColonyModelAdmin):
    list_display = ["created_at", "space", "status", "origin", "statement"]
    list_filter = ["space", "status", "origin"]
    search_fields = ["statement", "reason"]
    raw_id_fields = ["thought", "contradicting_thought", "agent", "correction"]
