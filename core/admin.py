from django.contrib import admin

from core.models import Agent, AgentToken, Space


@admin.register(Space)
class SpaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["members"]


class AgentTokenInline(admin.TabularInline):
    model = AgentToken
    fields = ["prefix", "label", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False  # tokens are created with `manage.py agent create|token` so they are shown once


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "role", "space", "active", "created_at"]
    list_filter = ["role", "active", "space"]
    search_fields = ["name"]
    inlines = [AgentTokenInline]
