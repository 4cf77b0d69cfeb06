from django.contrib import admin

from .models import ApiKey, ArchiveEntry, CompactionRun, Policy, Project, Session


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "active_policy", "created_at")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "project", "name", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "key_hash")


@admin.register(Policy)
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


@admin.register(ArchiveEntry)
class ArchiveEntryAdmin(admin.ModelAdmin):
    list_display = ("entry_id", "session", "kind", "item_count", "created_at")
