from django import forms
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.postgres.forms import SimpleArrayField
from django.db import DataError, models, transaction

from api.parsers import JSONTooDeep, NumberCheckedDecoder, unstorable_text
from api.text import json_storable, storable
from core.models import Agent, AgentToken, Space, UrlToken


class StorableJSONFormField(forms.JSONField):
    """The admin's JSON field: "\\u0000" in the text is a NUL once parsed, which jsonb can't store,
    "\\ud800" a lone surrogate, which isn't text, and a nesting past MAX_JSON_DEPTH runs into Python's
    recursion limit, and an integer of more than 4,300 digits is more than Python converts: each is a
    form error, not a 500. What it keeps is stored as the API stores JSON (``api.text.json_storable``: every
    key and string)."""

    def __init__(self, *args, **kwargs):
        if kwargs.get("decoder") is None:
            kwargs["decoder"] = NumberCheckedDecoder
        super().__init__(*args, **kwargs)

    def to_python(self, value):
        too_deep = forms.ValidationError(f"Enter valid JSON: {JSONTooDeep().msg}.")
        try:
            parsed = super().to_python(value)
            found = unstorable_text(parsed)  # one walk: the text, the numbers, the depth
        except (RecursionError, JSONTooDeep):
            raise too_deep from None
        if found:
            raise forms.ValidationError(found)
        return json_storable(parsed)


class StorableText:
    """A text form field's mixin: the text as the API stores it (``api.text.storable``: no invisible
    controls, a feedback marker defanged), before the field's own checks, so its ``max_length`` bounds
    what is stored."""

    def to_python(self, value):
        return super().to_python(storable(value) if isinstance(value, str) else value)


_STORABLE_CLASSES: dict[type, type] = {}


def storable_formfield(field: forms.Field | None) -> forms.Field | None:
    """``field`` storing its text as the API stores it: a text field (a CharField of any kind) gets
    :class:`StorableText` mixed into its own class (a SlugField still checks a slug), an array field
    each of its items (its base field parses them). Any other field is returned as it is."""
    if isinstance(field, SimpleArrayField):
        storable_formfield(field.base_field)
    elif isinstance(field, forms.CharField) and not isinstance(field, StorableText):
        kind = type(field)
        if kind not in _STORABLE_CLASSES:
            _STORABLE_CLASSES[kind] = type(kind.__name__, (StorableText, kind), {})
        field.__class__ = _STORABLE_CLASSES[kind]
    return field


class StoredTextFields:
    """An admin (a page or an inline) whose forms store every text as the API stores an agent's: each text
    field and each array field's items (:func:`storable_formfield`), each JSON field
    (:class:`StorableJSONFormField`). Agents read what the admin saves (task titles, project and agent
    names, thoughts and their tags), as they read what the pages and the API save."""

    formfield_overrides = {models.JSONField: {"form_class": StorableJSONFormField}}

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        return storable_formfield(super().formfield_for_dbfield(db_field, request, **kwargs))


class _ChangeList(ChangeList):
    """Django's list, with a filter of the query string that Python or PostgreSQL can't run (a year of 20
    digits or below 1, the day after 9999-12-31, an array value that is no list of ids) answered as any
    bad filter is (the list again, "?e=1"), not as a 500."""

    def get_filters(self, request):
        try:
            return super().get_filters(request)
        except (OverflowError, ValueError) as exc:
            raise IncorrectLookupParameters(exc) from exc

    def get_results(self, request):
        try:
            with transaction.atomic():  # a failed query must not leave the request's transaction broken
                super().get_results(request)
        except (OverflowError, ValueError, DataError) as exc:
            raise IncorrectLookupParameters(exc) from exc


class _Lists:
    """What every admin list of Colony's does: its bad filters are bad filters (:class:`_ChangeList`), and a
    regular expression from the query string is refused (400): PostgreSQL would run it on every row."""

    def get_changelist(self, request, **kwargs):
        return _ChangeList

    def lookup_allowed(self, lookup, value, request=None):
        if lookup.endswith(("__regex", "__iregex")):
            return False
        return super().lookup_allowed(lookup, value, request)


def _space_path(model, depth: int = 0) -> str | None:
    """The lookup from ``model`` to the members of the space its rows belong to ("space__members",
    "task__space__members"; "members" for a space), or None for a model of no space (a user, a judge's
    validation)."""
    if model is Space:
        return "members"
    names = {field.name: field for field in model._meta.get_fields() if field.many_to_one}
    if "space" in names:
        return "space__members"
    for via in ("task", "turn", "agent", "thought"):
        if via in names and depth < 2:
            path = _space_path(names[via].related_model, depth + 1)
            if path is not None:
                return f"{via}__{path}"
    return None


def in_members_spaces(queryset, user):
    """``queryset`` as ``user`` may see it in the admin: a superuser all of it, any other staff user the
    rows of the spaces it is a member of (as on the web pages: membership decides)."""
    path = _space_path(queryset.model)
    if user.is_superuser or path is None:
        return queryset
    return queryset.filter(**{path: user})


class ColonyModelAdmin(StoredTextFields, _Lists, admin.ModelAdmin):
    """Every Colony model's admin: its forms store text as the API does and refuse JSON PostgreSQL can't
    store (:class:`StoredTextFields`), and its list holds (:class:`_Lists`). A staff user who is not a
    superuser sees, edits and picks only the rows of its own spaces (:func:`in_members_spaces`): its lists,
    the rows it opens, a form's choices and a list's filters."""

    def get_queryset(self, request):
        return in_members_spaces(super().get_queryset(request), request.user)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        related = kwargs.get("queryset", db_field.related_model._default_manager.all())
        kwargs["queryset"] = in_members_spaces(related, request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        related = kwargs.get("queryset", db_field.related_model._default_manager.all())
        kwargs["queryset"] = in_members_spaces(related, request.user)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_list_filter(self, request):
        """A filter on a relation lists the values of the rows the user may see, not every row of the model."""
        return [
            (name, admin.RelatedOnlyFieldListFilter)
            if isinstance(name, str) and _is_relation(self.model, name)
            else name
            for name in super().get_list_filter(request)
        ]


def _is_relation(model, path: str) -> bool:
    try:
        field = model._meta.get_field(path.split("__")[0])
    except Exception:  # noqa: BLE001 - a filter of another kind (a callable's name, a lookup path)
        return False
    return bool(field.is_relation) and "__" not in path


admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class ColonyUserAdmin(_Lists, UserAdmin):
    """Django's user admin, with Colony's lists. A user the audit trail names (a transition, a
    confirmation) can't be deleted: deactivate it."""


@admin.register(Space)
class SpaceAdmin(ColonyModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["members"]


class AgentTokenForm(forms.ModelForm):
    class Meta:
        model = AgentToken
        fields = ["label", "revoked_at"]

    def clean_revoked_at(self):
        value = self.cleaned_data["revoked_at"]
        if self.instance.revoked_at is not None and value != self.instance.revoked_at:
            raise forms.ValidationError(
                "A revoked token stays revoked: make a new one with manage.py agent token (or agent create)."
            )
        return value


class AgentTokenInline(StoredTextFields, admin.TabularInline):
    model = AgentToken
    form = AgentTokenForm
    fields = ["prefix", "label", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False  # tokens are created with `manage.py agent create|token` so they are shown once


@admin.register(Agent)
class AgentAdmin(ColonyModelAdmin):
    list_display = ["name", "role", "space", "active", "created_at"]
    list_filter = ["role", "active", "space"]
    search_fields = ["name"]
    inlines = [AgentTokenInline]
    # An agent the transition log names can't be deleted (TransitionLog.agent is PROTECT): deactivate it.

    def get_readonly_fields(self, request, obj=None):
        """An agent's space (its thoughts, sessions and token's reach are there) is set when it is created."""
        return [*self.readonly_fields, "space"] if obj is not None else self.readonly_fields


@admin.register(UrlToken)
class UrlTokenAdmin(ColonyModelAdmin):
    """Read-only URL tokens are made on the tokens page or with ``manage.py agent url-token``, so the token
    is shown once; here they are listed and can be revoked (a revoked one stays revoked)."""

    list_display = ["prefix", "agent", "label", "created_by", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["agent__space"]
    search_fields = ["prefix", "label", "agent__name"]
    list_select_related = ["agent"]
    fields = ["prefix", "agent", "label", "created_by", "created_at", "expires_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "agent", "created_by", "created_at", "expires_at", "last_used_at"]

    def has_add_permission(self, request):
        return False

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.revoked_at is not None:
            return [*self.readonly_fields, "revoked_at"]
        return self.readonly_fields
