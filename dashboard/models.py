"""Data model (DESIGN §3).

A session has two views of its conversation:
- ``Message`` rows: the full original history, one row per message, append-only, with
  the token count and content hash computed once when the row is written;
- ``SessionContext``: the live (compacted) context that the next model call gets, stored
  as one JSON document so reading it is a single row fetch. It changes on append (one
  item added) and when a compaction run commits (the compacted prefix replaced).

Token totals per category for both views live on the ``Session`` row and are updated on
write, so trigger checks and listings never recount.

JSON columns holding user content are ``JSONTextField`` (JSON in a text column, ASCII-
escaped): it keeps key order, and PostgreSQL's jsonb cannot store the \\u0000 that tool
output sometimes contains.
"""
from __future__ import annotations

import json

from django.db import models
from django.db.models import Q


class JSONTextField(models.TextField):
    """JSON kept as text (``json.dumps`` with ASCII escapes); loads back to Python values."""

    description = "JSON stored as text"

    def from_db_value(self, value, expression, connection):
        if value is None:
            return None
        return json.loads(value)

    def get_prep_value(self, value):
        if value is None:
            return None
        return json.dumps(value, separators=(",", ":"))

    def value_to_string(self, obj):
        return self.get_prep_value(self.value_from_object(obj))

    def to_python(self, value):
        return value


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"


FINAL_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED)


class TriggerKind(models.TextChoices):
    AUTO = "auto"
    MANUAL = "manual"
    API = "api"


class Project(models.Model):
    """A tenant: owns API keys, sessions and policies."""

    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    active_policy = models.ForeignKey("Policy", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    """A project API key. Only the SHA-256 of the key is stored; the key is shown once."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, help_text="First characters of the key, to recognise it in lists.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.project})"


class Policy(models.Model):
    """Compaction settings (JSON of compaction.policy.Policy). Every update bumps
    ``version`` and keeps the previous data in PolicyVersion; runs snapshot what they used."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="policies")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=1)
    data = JSONTextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="policy_name_unique_per_project")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class PolicyVersion(models.Model):
    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    data = JSONTextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["policy", "version"], name="policy_version_unique")]


class Session(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions")
    title = models.CharField(max_length=500, blank=True)
    external_id = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=200, blank=True, help_text="The agent's model, as imported.")
    source_format = models.CharField(max_length=50, blank=True)
    tools = JSONTextField(default=list)
    tools_tokens = models.PositiveIntegerField(default=0)
    policy = models.ForeignKey(Policy, null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions",
                               help_text="Per-session override of the project's active policy.")
    tokenizer = models.CharField(max_length=50, blank=True, help_text="Counter used for the stored token counts.")

    # original history
    message_count = models.PositiveIntegerField(default=0)
    history_tokens = JSONTextField(default=dict)
    history_total = models.PositiveBigIntegerField(default=0)

    # live context (the document itself is SessionContext)
    context_tokens = JSONTextField(default=dict)
    context_total = models.PositiveBigIntegerField(default=0)
    context_messages = models.PositiveIntegerField(default=0)
    context_version = models.PositiveIntegerField(default=0)
    tokens_since_summary = models.PositiveBigIntegerField(default=0)
    messages_since_summary = models.PositiveIntegerField(default=0)
    compaction_count = models.PositiveIntegerField(default=0)

    # tool calls still waiting for their result: {call id: position of the assistant message}
    open_tool_calls = JSONTextField(default=dict)

    # serialization of runs: the id of the run currently executing (claimed) on this session
    active_run_id = models.BigIntegerField(null=True, blank=True)

    last_message_at = models.DateTimeField(null=True, blank=True)
    last_compacted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["project", "-id"], name="session_project_recent")]
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], condition=~Q(external_id=""),
                                    name="session_external_id_unique_per_project"),
        ]

    def __str__(self) -> str:
        return self.title or f"session {self.pk}"


class Message(models.Model):
    """One original message; ``raw`` is the exact OpenAI dict (content, tool calls...)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=20)
    raw = JSONTextField()
    tool_call_id = models.CharField(max_length=255, blank=True)
    tool_names = models.CharField(max_length=1000, blank=True, help_text="Comma-separated names of the tools called.")
    tokens = models.PositiveIntegerField()
    tokens_by_category = JSONTextField(default=dict)
    content_hash = models.CharField(max_length=64)
    filter_key = models.CharField(max_length=255, null=True, blank=True, db_index=True,
                                  help_text="Branch filter key ('app/tool/...'), or null for the whole session only.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "position"], name="message_position_unique")]
        indexes = [models.Index(fields=["session", "tool_call_id"], name="message_tool_result",
                                condition=~Q(tool_call_id=""))]

    @property
    def content(self):
        return self.raw.get("content")

    @property
    def tool_calls(self):
        return self.raw.get("tool_calls") or []


class SessionContext(models.Model):
    """The live context, as two JSON texts (kept as text so an append is a string
    concatenation and a read is a row fetch, with no parse or re-serialisation):
    ``items``: compaction.messages.Message.to_dict() of each live message plus its token
    counts (``"tokens": {"total", "by_category"}``); ``rendered``: the message list to send."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, primary_key=True, related_name="context")
    version = models.PositiveIntegerField(default=0)
    items = models.TextField(default="[]")
    rendered = models.TextField(default="[]")
    # the message list the context endpoint last served (the prefix of the
    # agent's next model request), for cache-safe summary requests; and its version.
    served = models.TextField(blank=True, default="")
    served_version = models.PositiveIntegerField(null=True, blank=True)
    # branch summaries: compaction.branches.MemorySummaryStore.to_dict() plus
    # "position" (messages of the history the last refresh looked at).
    branch_summaries = JSONTextField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    def load_items(self) -> list[dict]:
        return json.loads(self.items)


class CompactionRun(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs")
    trigger = models.CharField(max_length=10, choices=TriggerKind.choices)
    reason = models.TextField(blank=True)
    force = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)

    policy = models.ForeignKey(Policy, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    policy_snapshot = JSONTextField(default=dict)
    overrides = JSONTextField(default=dict)

    task_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    deliveries = models.PositiveIntegerField(default=0, help_text="How many times a worker started executing it.")
    claim_token = models.CharField(max_length=64, blank=True)

    snapshot_messages = models.PositiveIntegerField(null=True, blank=True)
    snapshot_version = models.PositiveIntegerField(null=True, blank=True)
    appended_during_run = models.PositiveIntegerField(null=True, blank=True)
    context_version_after = models.PositiveIntegerField(null=True, blank=True)

    progress_step = models.CharField(max_length=50, blank=True)
    progress_attempt = models.PositiveIntegerField(default=0)
    progress_detail = JSONTextField(default=dict)

    tokens_before = JSONTextField(null=True, blank=True)
    tokens_after = JSONTextField(null=True, blank=True)
    messages_before = models.PositiveIntegerField(null=True, blank=True)
    messages_after = models.PositiveIntegerField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)
    prompt = JSONTextField(default=list)
    summary = models.TextField(blank=True)
    attempts = JSONTextField(default=list)
    ledger = JSONTextField(default=list)
    retention = JSONTextField(null=True, blank=True)
    compression = models.FloatField(null=True, blank=True)
    archive_refs = JSONTextField(default=list)
    trigger_info = JSONTextField(null=True, blank=True)
    result = JSONTextField(default=dict, help_text="Other outcome figures: cut, notes, reduction counts.")
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=100, blank=True)

    # branch summaries and sync fallback
    filter_key = models.CharField(max_length=255, blank=True, help_text="Filter key whose messages triggered the run.")
    inline = models.BooleanField(default=False, help_text="Executed synchronously in the request (not enqueued).")
    inline_reason = models.TextField(blank=True)
    request_mode = models.CharField(max_length=20, blank=True, help_text="Summary request: cache_safe or standalone.")
    request_mode_reason = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["session", "status"], name="run_session_status"),
            models.Index(fields=["status", "heartbeat_at"], name="run_status_heartbeat"),
            models.Index(fields=["project", "-id"], name="run_project_recent"),
            models.Index(fields=["session", "-id"], name="run_session_recent"),
        ]

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES


class RunEvent(models.Model):
    run = models.ForeignKey(CompactionRun, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=50)
    delivery = models.PositiveIntegerField(default=0)
    data = JSONTextField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["run", "id"], name="runevent_run_order")]


class ArchiveEntry(models.Model):
    """Originals a compaction removed from the live context (compaction.archive.ArchiveEntry)."""

    entry_id = models.CharField(max_length=64, unique=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="archive_entries")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="archive_entries")
    run = models.ForeignKey(CompactionRun, null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="archive_entries")
    kind = models.CharField(max_length=20)
    note = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    item_count = models.PositiveIntegerField(default=0)
    size_chars = models.PositiveBigIntegerField(default=0)
    engine_created_at = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["session", "id"], name="archive_session_order")]


class ArchiveItem(models.Model):
    entry = models.ForeignKey(ArchiveEntry, on_delete=models.CASCADE, related_name="items")
    index = models.PositiveIntegerField()
    message_id = models.CharField(max_length=64)
    ordinal = models.PositiveIntegerField(null=True, blank=True)
    raw = JSONTextField()
    text = models.TextField(blank=True, help_text="Plain text of the message, for search.")
    tool_call_id = models.CharField(max_length=255, blank=True)
    tool_name = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entry", "index"], name="archive_item_order")]
