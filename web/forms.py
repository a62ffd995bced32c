"""Forms of the humans' pages: every post is validated here before a service sees it."""

from __future__ import annotations

import json

from django import forms

from api import paging
from api.parsers import json_loads_bounded, unstorable_text
from api.text import storable
from brain.choices import TOPIC_MAX_CHARS, topic_normal
from brain.inputs import PROMPT_MAX_CHARS
from brain.selectors.listing import THOUGHT_LIST_ORDER
from core.choices import AgentRole
from tasks.models import SUMMARY_MAX_CHARS


class StoredText(forms.CharField):
    """A text a human writes that Colony stores and agents read: stored as the API stores an agent's
    (``api.text.storable``: no invisible controls, a feedback marker defanged)."""

    def to_python(self, value):
        return storable(super().to_python(value))


class SpaceSwitchForm(forms.Form):
    space = forms.SlugField(max_length=64)
    next = forms.CharField(required=False, max_length=2000)


def form_error_text(form: forms.Form) -> str:
    """All of a form's errors as one sentence for a message."""
    parts = []
    for name, errors in form.errors.items():
        label = "" if name == "__all__" else f"{form.fields[name].label or name}: " if name in form.fields else ""
        parts.append(label + " ".join(str(e) for e in errors))
    return " ".join(parts)


# --- URL tokens -----------------------------------------------------------------------------------
class UrlTokenForm(forms.Form):
    """A new read-only URL token: for which agent of the space, how long, under what label. The
    service says which lifetimes it takes (core.services.url_token_create)."""

    agent = forms.CharField(max_length=100)
    days = forms.IntegerField(required=False)
    label = StoredText(required=False, max_length=100)

    def clean_days(self):
        days = self.cleaned_data["days"]
        return 30 if days is None else days


# --- board ----------------------------------------------------------------------------------------
class BoardFilterForm(forms.Form):
    """The board's filters; they live in the URL (GET) so a filtered board can be bookmarked and shared."""

    project = forms.ChoiceField(required=False)
    role = forms.ChoiceField(required=False, choices=[("", "any role"), *AgentRole.choices])
    type = forms.ChoiceField(required=False)

    def __init__(self, *args, projects=(), types=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["project"].choices = [("", "any project"), *((p.slug, p.name or p.slug) for p in projects)]
        self.fields["type"].choices = [("", "any type"), *types]

    def filters(self) -> dict:
        return {name: value for name, value in self.cleaned_data.items() if value}


class TransitionForm(forms.Form):
    to = forms.CharField(max_length=20)
    summary = StoredText(required=False, max_length=SUMMARY_MAX_CHARS)
    #: The digest of the DNA the page showed: a human's move is made on the task as they saw it.
    dna_digest = forms.RegexField(regex=r"^[0-9a-f]{64}$", max_length=64)
    next = forms.CharField(required=False, max_length=2000)


class ConfirmForm(forms.Form):
    to_status = forms.CharField(max_length=20)
    #: The digest of the DNA the page showed (tasks.models.dna_digest): what the human confirms.
    dna_digest = forms.RegexField(regex=r"^[0-9a-f]{64}$", max_length=64)
    next = forms.CharField(required=False, max_length=2000)


class DnaForm(forms.Form):
    """A human edits the task's DNA as one JSON object; the gate keys are not theirs to write.

    ``original`` is the editable DNA as the page showed it, so the patch sent to the service holds
    only what the human changed: a key an agent wrote meanwhile is neither removed nor overwritten.
    """

    dna = forms.CharField(widget=forms.Textarea, max_length=60_000, label="DNA")
    original = forms.CharField(widget=forms.HiddenInput, max_length=60_000, required=False)

    def __init__(self, *args, is_gate_key, **kwargs):
        super().__init__(*args, **kwargs)
        self.is_gate_key = is_gate_key

    @staticmethod
    def _object(text: str, what: str) -> dict:
        try:
            value = json_loads_bounded(text or "{}")
            found = unstorable_text(value)  # "\u0000" in the text is a NUL only once parsed: jsonb can't store it
        except json.JSONDecodeError as exc:  # JSONTooDeep included
            raise forms.ValidationError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
        if not isinstance(value, dict):
            raise forms.ValidationError(f"{what} must be a JSON object ({{...}}).")
        if found:
            raise forms.ValidationError(f"{what}: {found}")
        return value

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        edited = self._object(data["dna"], "The DNA")
        original = self._object(data.get("original") or "{}", "The original DNA")
        gate = sorted(key for key in {*edited, *original} if self.is_gate_key(key))
        if gate:
            raise forms.ValidationError(
                f"{', '.join(gate)}: gate keys are written by the workflow (memory gates by the agent's own "
                "brain activity, confirmations with the Confirm buttons), never by editing DNA. Nothing was changed."
            )
        patch = {key: value for key, value in edited.items() if original.get(key, object()) != value}
        patch.update({key: None for key in original if key not in edited})
        data["patch"] = patch
        return data


# --- brain ----------------------------------------------------------------------------------------
class BrainSearchForm(forms.Form):
    """The explorer's search: the memory endpoint's prompt and retrieval filters (SPEC 2.2 limits)."""

    q = forms.CharField(required=False, max_length=PROMPT_MAX_CHARS, label="Search")
    topic = forms.CharField(required=False, max_length=TOPIC_MAX_CHARS)
    category = forms.ChoiceField(required=False)
    #: Without a search, where the list of thoughts goes on: the "Older thoughts" link's cursor.
    cursor = forms.CharField(required=False, max_length=1000)

    def __init__(self, *args, categories=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["category"].choices = [("", "any category"), *categories]

    def clean_q(self) -> str:
        return self.cleaned_data["q"].strip()

    def clean_topic(self) -> str:
        return topic_normal(self.cleaned_data["topic"])

    def clean_cursor(self):
        text = self.cleaned_data["cursor"].strip()
        if not text:
            return None
        try:
            return paging.decode(text, THOUGHT_LIST_ORDER)
        except ValueError:
            raise forms.ValidationError("not a link the explorer gave.") from None


class CorrectionForm(forms.Form):
    """A human's correction of one thought: what is wrong, what is right (seeds/000 2a)."""

    correct_fact = StoredText(
        widget=forms.Textarea(attrs={"rows": 3}), max_length=PROMPT_MAX_CHARS, label="Correct fact"
    )
    corrected_fact = StoredText(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=PROMPT_MAX_CHARS,
        label="Wrong fact (what this thought says)",
    )
    topic = StoredText(max_length=TOPIC_MAX_CHARS)
    content = StoredText(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=PROMPT_MAX_CHARS,
        required=False,
        label="Correction text (optional; written from the facts when empty)",
    )


class SuggestionResolveForm(forms.Form):
    correct_fact = StoredText(required=False, max_length=PROMPT_MAX_CHARS)
    reason = StoredText(required=False, max_length=2000)


# --- quality --------------------------------------------------------------------------------------
class DashboardForm(forms.Form):
    agent = forms.ChoiceField(required=False)
    days = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=30,
        initial=30,
        choices=[(14, "14 days"), (30, "30 days"), (90, "90 days")],
    )

    def __init__(self, *args, agents=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [("", "whole space"), *((a, a) for a in agents)]
