from django import forms
from django.contrib import admin

from .models import (
    ApiKey,
    CompactionRun,
    ModelConnection,
    Project,
    Session,
    StoredArchiveEntry,
    StoredPolicy,
)
from .services import connections


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "active_policy", "created_at")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "project", "name", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "key_hash")


@admin.register(StoredPolicy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = ("name", "project", "version", "updated_at")


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "project", "message_count", "context_total", "compaction_count")
    exclude = ("tools", "open_tool_calls")


@admin.register(CompactionRun)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "session", "trigger", "status", "created_at", "duration_ms")
    list_filter = ("status", "trigger")
    exclude = ("prompt", "ledger", "policy_snapshot")


@admin.register(StoredArchiveEntry)
class ArchiveEntryAdmin(admin.ModelAdmin):
    list_display = ("entry_id", "session", "kind", "item_count", "created_at")


class ModelConnectionForm(forms.ModelForm):
    """Checks a connection as the service will use it: its shape, a name not taken by a
    connection declared in settings, and an address that is not private unless allowed."""

    class Meta:
        model = ModelConnection
        fields = ("name", "allowed_models", "api_base", "api_key_env", "allow_private_network", "description")

    def clean(self) -> dict:
        data = super().clean() or {}
        if self.errors:
            return data
        try:
            conn = connections.build(data.get("name"), data.get("allowed_models", ""), data.get("api_base") or None,
                                     data.get("api_key_env") or None, bool(data.get("allow_private_network")),
                                     source="admin")
            connections.check_address(conn.api_base, conn.allow_private_network)
        except connections.ConnectionInvalid as exc:
            field = {"models": "allowed_models"}.get(exc.field or "", exc.field)
            raise forms.ValidationError({field: str(exc)} if field in self.fields else str(exc)) from None
        if conn.name in connections.settings_connection_names():
            raise forms.ValidationError({"name": f"a connection named {conn.name!r} is declared in the settings, "
                                                 f"which win; choose another name"})
        return data


@admin.register(ModelConnection)
class ModelConnectionAdmin(admin.ModelAdmin):
    """Who may edit these may point summaries, and the key in any variable of the workers'
    environment, at any server: give the permission to operators only."""

    form = ModelConnectionForm
    list_display = ("name", "api_base", "api_key_env", "allow_private_network", "updated_at")
