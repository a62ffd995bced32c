"""Admin for the brain: thoughts with their lineage, the query log and correction suggestions."""

from django import forms
from django.contrib import admin
from django.utils.html import format_html, format_html_join
from rest_framework import serializers

from brain.choices import QualityFlag, ThoughtCategory, topic_normal
from brain.inputs import PROMPT_MAX_CHARS, temporal_scope_checked
from brain.models import CorrectionSuggestion, QueryLog, Thought
from brain.selectors.activity import accessed_by_named, agent_names_by_id
from brain.selectors.lineage import thought_lineage_of
from brain.services.pipeline import thought_content_changed
from brain.services.suggestions import draft_problem
from core.admin import ColonyModelAdmin

#: A thought's links, each to a thought of the same space (SPEC 6: no lineage walk crosses a space).
LINK_FIELDS = ("refined_by", "superseded_by", "contradicted_by")


class ThoughtForm(forms.ModelForm):
    """A thought as the admin edits it (ThoughtAdmin gives the model and the fields): its content is held to
    PROMPT_MAX_CHARS, its links stay in its space, and only a task transition writes a transition marker
    (SPEC 3.3), so the category can't be changed to one."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        category = self.fields.get("thought_category")
        if category is not None:
            category.choices = [c for c in category.choices if c[0] != ThoughtCategory.TRANSITION_MARKER]

    def clean_content(self):
        value = self.cleaned_data.get("content") or ""
        if len(value) > PROMPT_MAX_CHARS:  # the bound of every other door (memory calls, imports, the pages)
            raise forms.ValidationError(
                f"A thought is at most {PROMPT_MAX_CHARS} characters; this one has {len(value)}. Keep the part "
                "agents need, or split it into several thoughts."
            )
        return value

    def clean_context_metadata(self):
        value = self.cleaned_data.get("context_metadata")
        if not isinstance(value, dict):
            raise forms.ValidationError("Context metadata must be a JSON object ({...}); {} for none.")
        return value

    def clean_source_ref(self):
        value = self.cleaned_data.get("source_ref")
        if value is not None and not isinstance(value, dict):
            raise forms.ValidationError('A source reference is a JSON object ({"type": ..., "value": ...}) or null.')
        return value

    def clean_quality_flags(self):
        value = self.cleaned_data.get("quality_flags")
        unknown = [flag for flag in value or [] if flag not in QualityFlag.values]
        if not isinstance(value, list) or unknown:
            raise forms.ValidationError(f"Quality flags are a list of {', '.join(QualityFlag.values)}.")
        return value

    def clean_temporal_scope(self):
        try:  # the rule every door (memory calls, imports, the export's restore) holds
            return temporal_scope_checked(self.cleaned_data.get("temporal_scope"))
        except serializers.ValidationError as exc:
            raise forms.ValidationError(exc.detail) from None

    def clean_topic(self):
        return topic_normal(self.cleaned_data.get("topic"))

    def clean(self):
        data = super().clean()
        space = data.get("space") or getattr(self.instance, "space", None)
        if space is None:
            return data
        for name in LINK_FIELDS:
            linked = data.get(name)
            if linked is not None and linked.space_id != space.pk:
                self.add_error(name, "A thought of another space: links stay within the thought's space.")
        related = data.get("related_thoughts")
        if related is not None and related.exclude(space=space).exists():
            self.add_error("related_thoughts", "A thought of another space: links stay within the thought's space.")
        for name in ("source_ids", "supersedes"):
            ids = data.get(name) or []
            if ids and Thought.objects.filter(pk__in=ids).exclude(space=space).exists():
                self.add_error(name, "A thought of another space: links stay within the thought's space.")
        return data


@admin.register(Thought)
class ThoughtAdmin(ColonyModelAdmin):
    list_display = ["short_content", "space", "thought_category", "topic", "thought_type", "superseded",
                    "pheromone_weight", "access_count", "created_at"]  # fmt: skip
    list_filter = ["space", "thought_category", "thought_type", "superseded"]
    search_fields = ["content", "topic", "contributor_id", "contributor_name"]
    date_hierarchy = "created_at"
    exclude = ["embedding", "corrected_fact_embedding", "accessed_by"]  # accessed_by: shown by name, below
    raw_id_fields = ["agent", "refined_by", "superseded_by", "contradicted_by", "related_thoughts"]
    form = ThoughtForm
    #: Reinforcement and the quality loop's numbers come from their formulas (SPEC 2.6, 4.4), not from a form.
    readonly_fields = ["id", "created_at", "embedding_model", "has_embedding", "lineage", "access_count",
                       "last_accessed", "accessed_by_names", "co_retrieved_with", "pheromone_weight", "usage_score",
                       "contradiction_score", "effective_confidence"]  # fmt: skip

    @staticmethod
    def _is_marker(thought: Thought | None) -> bool:
        return thought is not None and thought.thought_category == ThoughtCategory.TRANSITION_MARKER

    def get_readonly_fields(self, request, obj=None):
        """A transition marker is the audit trail (SPEC 6): every field of it is read-only. A thought's space
        is set when it is stored: the links other thoughts hold to it stay in that space."""
        if self._is_marker(obj):
            return [*self.readonly_fields, *(f.name for f in Thought._meta.get_fields() if f.concrete and f.editable)]
        return [*self.readonly_fields, "space"] if obj is not None else self.readonly_fields

    def has_delete_permission(self, request, obj=None):
        return not self._is_marker(obj) and super().has_delete_permission(request, obj)

    @admin.display(description="content")
    def short_content(self, thought: Thought) -> str:
        return thought.content[:80]

    @admin.display(description="accessed by")
    def accessed_by_names(self, thought: Thought) -> str:
        """The agents that retrieved it, by their names now (``accessed_by`` holds their ids)."""
        names = agent_names_by_id(space_id=thought.space_id, entries=thought.accessed_by)
        return ", ".join(accessed_by_named(thought.accessed_by, names)) or "-"

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

    #: The fields a thought's vectors are computed from: ``embedding`` from ``content``, a correction's
    #: ``corrected_fact_embedding`` (the re-contamination guard's, SPEC 2.5) from ``corrected_fact``.
    EMBEDDED_FIELDS = ("content", "corrected_fact", "thought_category")

    def save_model(self, request, obj, form, change):
        """Save, and when a text a vector describes was edited, drop the vectors and queue the re-embedding
        (``thought_content_changed``; the job, ``thoughts_embed_batch``, recomputes both). A vector always
        describes the text stored beside it: the guard never compares contributions with a wrong fact the
        correction does not state, and ``embed_missing`` re-embeds it if the job is lost (``embedding``
        is null until then)."""
        super().save_model(request, obj, form, change)
        changed = set(form.changed_data)
        if change and changed.isdisjoint(self.EMBEDDED_FIELDS):
            return
        if changed & {"corrected_fact", "thought_category"}:
            Thought.objects.filter(pk=obj.pk).update(corrected_fact_embedding=None)
        thought_content_changed(thought_id=str(obj.pk))


@admin.register(QueryLog)
class QueryLogAdmin(ColonyModelAdmin):
    list_display = ["created_at", "space", "agent", "agent_ref", "session_id", "query_text"]
    list_filter = ["space"]
    search_fields = ["query_text", "session_id", "agent_ref"]
    readonly_fields = [f.name for f in QueryLog._meta.fields]

    def has_add_permission(self, request):
        return False


class CorrectionSuggestionForm(forms.ModelForm):
    """A suggestion as the admin edits it: its wording, reason and draft (which accepting reads); what it
    is about, who raised it and its status are the workflow's (CorrectionSuggestionAdmin)."""

    def clean_draft(self):
        value = self.cleaned_data.get("draft")
        problem = draft_problem(value)
        if problem:
            raise forms.ValidationError(f"The draft {problem}.")
        return value


@admin.register(CorrectionSuggestion)
class CorrectionSuggestionAdmin(ColonyModelAdmin):
    list_display = ["created_at", "space", "status", "origin", "statement"]
    list_filter = ["space", "status", "origin"]
    search_fields = ["statement", "reason"]
    raw_id_fields = ["thought", "contradicting_thought", "agent", "correction"]
    form = CorrectionSuggestionForm
    #: Raised by the judges, the contradiction detector and agents, resolved by accepting or dismissing it
    #: (the corrections pages and API): the thought it is about, its space and its status aren't a form's.
    readonly_fields = ["space", "thought", "contradicting_thought", "origin", "confidence", "agent", "session_id",
                       "status", "created_at", "resolved_at", "resolved_by", "correction"]  # fmt: skip

    def has_add_permission(self, request):
        return False
