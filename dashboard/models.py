"""Data model of the service.

A session has two views of its conversation:
- ``Message`` rows: the full original history, one row per message, append-only, with
  the token count and content hash computed once when the row is written;
- ``SessionContext``: the live (compacted) context that the next model call gets, stored
  as JSON text written whole on import and when a compaction run commits (the compacted
  prefix replaced), plus ``ContextTail`` rows for the messages appended since (an append
  adds rows; it never reads or rewrites the texts).

Token totals per category for both views live on the ``Session`` row and are updated on
write, so trigger checks and listings never recount.

JSON columns holding user content are ``JSONTextField`` (JSON in a text column, ASCII-
escaped): it keeps key order, and PostgreSQL's jsonb cannot store the \\u0000 that tool
output sometimes contains.

A compaction run moves through its states only through the ``CompactionRun`` methods
below; the service decides when (dashboard.services.runs), the model says how each state
is written.
"""
from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from compaction import Outcome

from .services.common import delete_rows, insert_row, update_row
from .text_repair import repaired


def splice_json_list(text: str, more: list[str]) -> str:
    """'[a,b]' and ['c', 'd'] -> '[a,b,c,d]' without parsing any of it."""
    if not more:
        return text
    body = text.rstrip()[:-1].rstrip()
    return body + ("," if body != "[" else "") + ",".join(more) + "]"


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON values (anything unknown becomes its ``str``)."""
    return json.loads(json.dumps(value, default=str))


class JSONTextField(models.TextField):
    """JSON kept as text (``json.dumps`` with ASCII escapes); loads back to Python values."""

    # What the field takes and gives back, for django-stubs: any JSON value, not text.
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    description = "JSON stored as text"

    def from_db_value(self, value, expression, connection):
        if value is None:
            return None
        # Rows stored by older versions may hold lone surrogates (dashboard.text_repair).
        return repaired(value, json.loads(value))

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

# How a run that did not succeed ended (RunStatus values).
Unsuccessful = Literal["failed", "skipped"]

# Outcome figures a run keeps in ``CompactionRun.result`` (the others have columns).
RESULT_FIGURES = ("summarized", "extractive", "evicted_messages", "summary_tokens", "tokens_cleared",
                  "tokens_truncated", "reduction_events", "cut", "notes", "clipped")


class RequestMode(models.TextChoices):
    """How a run's summary request was built (blank: the run sent none)."""

    CACHE_SAFE = "cache_safe"
    STANDALONE = "standalone"


class ArchiveKind(models.TextChoices):
    """Why originals left the live context (compaction.archive.KINDS)."""

    EVICTED = "evicted"
    OFFLOADED = "offloaded"
    PREVIOUS_SUMMARY = "previous_summary"


class TriggerKind(models.TextChoices):
    AUTO = "auto"
    MANUAL = "manual"
    API = "api"


class Project(models.Model):
    """A tenant: owns API keys, sessions and policies."""

    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    active_policy = models.ForeignKey("StoredPolicy", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")

    def __str__(self) -> str:
        return self.name


class ProjectRole(models.TextChoices):
    """What a member may do in a project: an owner reads and writes (force, tune-save, delete,
    upload, API keys); a viewer only reads."""

    OWNER = "owner"
    VIEWER = "viewer"


class ProjectMembership(models.Model):
    """A user's role in a project. Pages show a user only the projects they are a member of
    (superusers see every project); dashboard.selectors.access applies it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="project_memberships")
    role = models.CharField(max_length=10, choices=ProjectRole.choices, default=ProjectRole.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user_and_project")]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.project}"


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


class StoredPolicy(models.Model):
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
    policy = models.ForeignKey(StoredPolicy, on_delete=models.CASCADE, related_name="versions")
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
    policy = models.ForeignKey(StoredPolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions",
                               help_text="Per-session override of the project's active policy.")
    tokenizer = models.CharField(max_length=50, blank=True, help_text="Counter used for the stored token counts.")
    metadata = JSONTextField(
        default=dict, help_text="What the import said about the session (a corpus file's id, source, license and meta; "
                                "OpenAI metadata): shown on the dashboard and filterable, never sent to a model.")

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
    rearm_at_total = models.PositiveBigIntegerField(
        default=0, help_text="A compaction that would have freed too little (landing.min_freed) skipped: no automatic "
                             "run is queued again until history_total reaches this (the overflow guard still runs).")

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

    def hold_run(self, run_id: int) -> None:
        """Take the session's run slot (the caller holds the session lock)."""
        self.active_run_id = run_id
        update_row(self, ["active_run_id"])  # a plain statement, sent with the claim's other writes

    def release_run(self, run_id: int) -> None:
        """Free the session's run slot if ``run_id`` holds it (the caller holds the lock)."""
        if self.active_run_id == run_id:
            self.active_run_id = None
            self.save(update_fields=["active_run_id"])

    @classmethod
    def release_stale_slot(cls, session_id: int, run_id: int) -> None:
        """Free the slot of a session still held by ``run_id`` (no lock needed)."""
        cls.objects.filter(pk=session_id, active_run_id=run_id).update(active_run_id=None)


class TraceSpan(models.Model):
    """A model-call span the OTLP receiver (``POST /v1/traces``) folded into a session. An
    exporter resends a batch it got no answer for; a span id stored here adds nothing the
    second time. Keeps the provider's token counts beside the session's own estimate."""
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="trace_spans")
    span_id = models.CharField(max_length=64)
    trace_id = models.CharField(max_length=64, blank=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="trace_spans")
    model = models.CharField(max_length=200, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, help_text="The provider's count (gen_ai.usage.input_tokens).")
    output_tokens = models.PositiveIntegerField(null=True, help_text="The provider's count (gen_ai.usage.output_tokens).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "span_id"], name="trace_span_unique")]


class StoredMessage(models.Model):
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
    """The live context, as two JSON texts written whole when a session is imported or a
    compaction commits (kept as text so a read is a row fetch, with no parse or
    re-serialisation): ``items``: compaction.messages.Message.to_dict() of each live message
    plus its token counts (``"tokens": {"total", "by_category"}``); ``rendered``: the message
    list to send. Messages appended since are ``ContextTail`` rows, so an append writes a few
    small rows whatever the session's length; the live context is the texts, then the tail.
    ``version`` is the context version the texts were written at; the current version is
    ``Session.context_version`` (an append bumps only that)."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, primary_key=True, related_name="context")
    version = models.PositiveIntegerField(default=0)
    items = models.TextField(default="[]")
    rendered = models.TextField(default="[]")
    # the message list the context endpoint last served (the prefix of the
    # agent's next model request), for cache-safe summary requests; and its version.
    # While the texts it was served from are current, it is kept by reference (a GET
    # writes two numbers, not the list): the texts, then the tail rows below ``served_upto``
    # (a history position); ``write_whole`` copies it out before it replaces the texts.
    served = models.TextField(blank=True, default="")
    served_version = models.PositiveIntegerField(null=True, blank=True)
    served_upto = models.PositiveIntegerField(null=True, blank=True)
    # branch summaries: compaction.branches.MemorySummaryStore.to_dict() plus
    # "position" (messages of the history the last refresh looked at).
    branch_summaries = JSONTextField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    def load_items(self) -> list[dict]:
        """Every live item: the stored texts' items, then the tail's."""
        tail = ContextTail.objects.filter(session_id=self.session_id).order_by("position").values_list("item", flat=True)
        return repaired(self.items, json.loads(self.items)) + [repaired(t, json.loads(t)) for t in tail]

    def served_messages(self) -> str:
        """The message list last served (JSON text), or "" when none was."""
        if self.served_upto is None:
            return self.served
        tail = (ContextTail.objects.filter(session_id=self.session_id, position__lt=self.served_upto)
                .order_by("position").values_list("rendered", flat=True))
        return splice_json_list(self.rendered, list(tail))

    def write_whole(self, items: str, rendered: str, version: int) -> None:
        """Replace the live context by these texts (the caller holds the session and this
        row's lock): the tail is folded in, so it is deleted; a served list kept by
        reference is copied out first."""
        fields = ["items", "rendered", "version", "updated_at"]
        if self.served_upto is not None:
            self.served, self.served_upto = self.served_messages(), None
            fields += ["served", "served_upto"]
        self.items, self.rendered, self.version = items, rendered, version
        # plain statements, so a run's commit sends them with its other writes (batched_writes)
        update_row(self, fields)
        delete_rows(ContextTail, "session_id", self.session_id)


class ContextTail(models.Model):
    """One message appended to the live context after its texts were last written whole:
    its item and its rendered message as JSON text (``SessionContext`` says what they hold).
    ``position`` is the message's history position, so the tail reads back in order."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="context_tail")
    position = models.PositiveIntegerField()
    item = models.TextField()
    rendered = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "position"], name="context_tail_position_unique")]


class CompactionRun(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs")
    trigger = models.CharField(max_length=10, choices=TriggerKind.choices)
    reason = models.TextField(blank=True)
    force = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)

    policy = models.ForeignKey(StoredPolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
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
    # Messages in the session's history when the run took its snapshot: where the timeline
    # places it (a run after the last message included).
    snapshot_position = models.PositiveIntegerField(null=True, blank=True)
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
    request_mode = models.CharField(max_length=20, blank=True, choices=RequestMode.choices,
                                    help_text="Summary request: cache_safe or standalone.")
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

    # -- state transitions ------------------------------------------------------------------
    # The methods taking ``self`` write a row the caller has locked (SELECT ... FOR UPDATE,
    # session first); the classmethods are single conditional UPDATEs that do nothing when
    # the run has moved on (another claim, a recovery), so they need no lock.

    def holds_claim(self, token: str) -> bool:
        """Whether the execution holding ``token`` may still write this run's outcome."""
        return self.claim_token == token and self.status == RunStatus.RUNNING

    def heartbeat_fresh(self, stale_after: float) -> bool:
        """Whether the executing worker beat within the last ``stale_after`` seconds."""
        if self.heartbeat_at is None:
            return False
        return (timezone.now() - self.heartbeat_at).total_seconds() < stale_after

    def mark_running(self, *, snapshot_messages: int, snapshot_version: int, detail: dict[str, Any],
                     snapshot_position: int | None = None) -> str:
        """Claimed by a worker: a new claim token (returned), one more delivery, and the
        snapshot of the live context this execution compacts."""
        stamp = timezone.now()
        self.status = RunStatus.RUNNING
        self.claim_token = uuid.uuid4().hex
        self.started_at = self.started_at or stamp
        self.heartbeat_at = stamp
        self.deliveries += 1
        self.snapshot_messages = snapshot_messages
        self.snapshot_position = snapshot_position
        self.snapshot_version = snapshot_version
        self.progress_step = "started"
        self.progress_detail = detail
        # the fields set above, as a plain statement the claim sends with its other writes
        update_row(self, ("status", "claim_token", "started_at", "heartbeat_at", "deliveries", "snapshot_messages",
                          "snapshot_position", "snapshot_version", "progress_step", "progress_detail"))
        return self.claim_token

    SUCCEEDED_FIELDS = ("status", "finished_at", "duration_ms", "progress_step", "request_mode", "request_mode_reason",
                        "tokens_before", "tokens_after", "messages_before", "messages_after", "model", "prompt",
                        "summary", "attempts", "ledger", "compression", "trigger_info", "result",
                        "archive_refs", "appended_during_run", "context_version_after")

    def mark_succeeded(self, outcome: Outcome, *, finished_at: datetime, duration_ms: int, archive_refs: list[str],
                       appended: int, context_version: int, mode: tuple[str, str],
                       branches: dict[str, Any] | None = None) -> None:
        """The engine's Outcome committed: what the run keeps of it, and how it went. Its
        retention score is written after the commit (``record_retention``)."""
        self.status = RunStatus.SUCCEEDED
        self.finished_at = finished_at
        self.duration_ms = duration_ms
        self.progress_step = "done"
        self.request_mode, self.request_mode_reason = mode

        self.tokens_before = outcome.tokens_before
        self.tokens_after = outcome.tokens_after
        self.messages_before = outcome.messages_before
        self.messages_after = outcome.messages_after
        self.model = (outcome.model or "")[:200]
        self.summary = outcome.summary or ""
        self.compression = outcome.compression
        # the figures themselves: outcome.to_dict() would also turn every message into a dict
        result = {k: getattr(outcome, k) for k in RESULT_FIGURES}
        if branches is not None:
            result["branches"] = branches
        # Each JSON value is encoded once: the text stored is the one json_safe() parses
        # (the prompt and ledger are ~250 kB, encoded twice and parsed once before).
        # (None stays SQL NULL, as JSONTextField stores it.)
        texts = {name: None if value is None else json.dumps(value, default=str, separators=(",", ":"))
                 for name, value in (("prompt", outcome.prompt or []), ("attempts", outcome.attempts or []),
                                     ("ledger", outcome.ledger),
                                     ("trigger_info", outcome.trigger), ("result", result))}
        for name, text in texts.items():
            setattr(self, name, None if text is None else json.loads(text))

        self.archive_refs = archive_refs
        self.appended_during_run = appended
        self.context_version_after = context_version
        # The fields set above (the others are as the locked row has them), in one plain
        # statement, so a run's commit sends it with its other writes (batched_writes).
        update_row(self, self.SUCCEEDED_FIELDS, prepared=texts)

    @classmethod
    def record_retention(cls, run_id: int, retention: dict[str, Any] | None) -> None:
        cls.objects.filter(pk=run_id).update(retention=json_safe(retention) if retention is not None else None)

    def mark_finished(self, status: Unsuccessful, *, error: str, error_kind: str,
                      attempts: list[Any] | None = None, trigger: dict[str, Any] | None = None,
                      mode: tuple[str, str] | None = None, branches: dict[str, Any] | None = None) -> None:
        """Failed or skipped: ``error`` says why (for a skip, why nothing was compacted).
        ``None`` leaves a field as it is."""
        stamp = timezone.now()
        self.status = status
        self.finished_at = stamp
        if self.started_at:
            self.duration_ms = int((stamp - self.started_at).total_seconds() * 1000)
        self.error = error
        self.error_kind = error_kind[:100]
        if attempts is not None:
            self.attempts = attempts
        if trigger is not None:
            self.trigger_info = json_safe(trigger)
        if mode is not None:
            self.request_mode, self.request_mode_reason = mode
        if branches is not None:
            self.result = {**(self.result or {}), "branches": json_safe(branches)}
        self.progress_step = "done"
        self.save()

    def requeue(self) -> None:
        """Back to the queue after its worker was lost: the old claim is void, and a new task
        id goes with the new message."""
        self.status = RunStatus.QUEUED
        self.claim_token = ""
        self.progress_step = "requeued"
        self.task_id = uuid.uuid4().hex
        self.enqueued_at = timezone.now()
        self.save()

    def reissue(self) -> None:
        """A new task id and enqueue time for a queued run about to be sent again."""
        self.task_id = uuid.uuid4().hex
        self.enqueued_at = timezone.now()
        self.save(update_fields=["task_id", "enqueued_at"])

    def resend(self) -> bool:
        """Like :meth:`reissue` for a queued run read without a lock: only when it is still
        queued and nobody re-sent it since it was read (same ``enqueued_at``), so of several
        processes re-sending at once exactly one does. Returns whether this one did."""
        task_id, stamp = uuid.uuid4().hex, timezone.now()
        updated = CompactionRun.objects.filter(pk=self.pk, status=RunStatus.QUEUED,
                                               enqueued_at=self.enqueued_at).update(task_id=task_id, enqueued_at=stamp)
        if updated:
            self.task_id, self.enqueued_at = task_id, stamp
        return bool(updated)

    @classmethod
    def beat(cls, run_id: int, token: str) -> bool:
        """Heartbeat of the execution holding ``token``; False once it lost the claim."""
        return bool(cls.objects.filter(pk=run_id, claim_token=token, status=RunStatus.RUNNING)
                    .update(heartbeat_at=timezone.now()))

    @classmethod
    def mark_inline(cls, run_id: int, reason: str) -> None:
        """To be executed in the requesting process: the broker could not take it."""
        cls.objects.filter(pk=run_id).update(inline=True, inline_reason=reason)


class RunEvent(models.Model):
    run = models.ForeignKey(CompactionRun, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=50)
    delivery = models.PositiveIntegerField(default=0)
    data = JSONTextField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["run", "id"], name="runevent_run_order")]

    @classmethod
    def record(cls, run_id: int, kind: str, data: dict[str, Any] | None = None, delivery: int = 0) -> None:
        # a plain INSERT (nobody reads the new id), sent with the batch inside batched_writes
        insert_row(cls(run_id=run_id, kind=kind[:50], data=json_safe(data or {}), delivery=delivery))


class StoredArchiveEntry(models.Model):
    """Originals a compaction removed from the live context (compaction.archive.ArchiveEntry)."""

    entry_id = models.CharField(max_length=64, unique=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="archive_entries")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="archive_entries")
    run = models.ForeignKey(CompactionRun, null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="archive_entries")
    kind = models.CharField(max_length=20, choices=ArchiveKind.choices)
    note = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    item_count = models.PositiveIntegerField(default=0)
    size_chars = models.PositiveBigIntegerField(default=0)
    engine_created_at = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["session", "id"], name="archive_session_order")]


class ArchiveItem(models.Model):
    entry = models.ForeignKey(StoredArchiveEntry, on_delete=models.CASCADE, related_name="items")
    index = models.PositiveIntegerField()
    message_id = models.CharField(max_length=64)
    ordinal = models.PositiveIntegerField(null=True, blank=True)
    raw = JSONTextField()
    text = models.TextField(blank=True, help_text="Plain text of the message, for search.")
    tool_call_id = models.CharField(max_length=255, blank=True)
    tool_name = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["entry", "index"], name="archive_item_order")]


class ModelConnection(models.Model):
    """A summarizer endpoint declared by an operator in the admin; policies name it in
    ``summarizer.connection`` and never see its address or key variable. Connections
    declared in settings (COMPACTION_CONNECTIONS) work the same and win on a name clash."""

    name = models.CharField(max_length=100, unique=True,
                            help_text="What policies write in summarizer.connection (letters, digits, . _ -).")
    allowed_models = models.TextField(
        help_text="litellm model strings a policy may use through this connection, one per line; a line "
                  "ending in * allows every model that starts with the text before it (openai/*).")
    api_base = models.CharField(
        max_length=500, blank=True,
        help_text="Base URL of the server (empty: the provider's own endpoint). Loopback, private and "
                  "link-local addresses are refused unless private networks are allowed below.")
    api_key_env = models.CharField(
        max_length=200, blank=True,
        help_text="Name of the environment variable of the worker holding the key (empty: litellm's "
                  "usual provider variables, or no key at all when a server address is set).")
    allow_private_network = models.BooleanField(
        default=False, help_text="Allow a loopback, private or link-local server address (a local llama.cpp).")
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def model_list(self) -> list[str]:
        return [line.strip() for line in self.allowed_models.splitlines() if line.strip()]


class IdempotencyKey(models.Model):
    """The answer given to a request that carried an ``Idempotency-Key`` header: the same
    key from the same project, with the same request, gets this answer again instead of a
    second run. Keys expire after a day (pruned when new keys are stored)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="idempotency_keys")
    key = models.CharField(max_length=255)
    request_digest = models.CharField(max_length=64, help_text="SHA-256 of method, path and canonical JSON body.")
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="idempotency_key_per_project")]


class RateWindow(models.Model):
    """How many requests of one kind a project made in one fixed window (per-project rate
    limits, FORCE_RATE_LIMIT / IMPORT_RATE_LIMIT); windows before the current one are deleted."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="rate_windows")
    action = models.CharField(max_length=20)
    window_start = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "action", "window_start"],
                                               name="rate_window_per_project_action")]


class GatewaySession(models.Model):
    """How the OpenAI-compatible gateway recognises a session from one request to the next.

    ``identity`` is what the client said (``X-Session-Id``, ``metadata.session_id``,
    ``user``) or, when it said nothing, a digest of its leading messages. Several sessions
    can share one identity: a client that edits or truncates its history gets a new session
    (``forked_from`` the one it diverged from) instead of a rewrite of the stored one.
    ``chain`` is a running digest over the wire form of the ``stored_count`` messages the
    gateway stored, so a request is checked against the stored history without reading it.

    ``raw_*`` remember the last request's message list as the client sent it: the first
    ``raw_count`` messages, ``raw_length`` characters of the JSON array from its ``[``, had the
    SHA-256 ``raw_digest`` and the running digest ``raw_chain``. A client resends its history
    byte for byte, so a request whose array starts with the same text continues that history
    without re-validating or re-digesting those messages (see ``gateway.identity``)."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="gateway")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="gateway_sessions")
    identity = models.CharField(max_length=600)
    stored_count = models.PositiveIntegerField(default=0)
    chain = models.CharField(max_length=64)
    raw_count = models.PositiveIntegerField(default=0)
    raw_length = models.PositiveBigIntegerField(default=0)
    raw_digest = models.CharField(max_length=64, blank=True, default="")
    raw_chain = models.CharField(max_length=64, blank=True, default="")
    # the running digest of the first ``stored_count - 1`` messages: a request that resends the
    # history without its last message (a retry or "regenerate" after the reply was stored)
    # is recognised without reading the history
    prev_chain = models.CharField(max_length=64, blank=True, default="")
    forked_from = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # A fork: the position of the first message that differs from ``forked_from``'s history,
    # what changed there ("message #12 was edited"), and the session its fork tree started
    # from (the sessions list groups a tree under it).
    forked_at = models.PositiveIntegerField(null=True, blank=True)
    fork_reason = models.CharField(max_length=300, blank=True, default="")
    fork_root = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="fork_tree")
    # what the identity came from ("X-Session-Id", "metadata.session_id", "user", "leading
    # messages") and the request's ``user``, shown beside the session's title
    identity_source = models.CharField(max_length=40, blank=True, default="")
    client_user = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["project", "identity", "-id"], name="gateway_identity")]


class GatewayIdentity(models.Model):
    """One identity of the gateway's clients in one project (``GatewaySession.identity``),
    one row each (a unique constraint): the row every request of that identity locks before
    it reads the identity's sessions, so two requests of one conversation, even its very
    first ones, are placed one after the other (see ``gateway.identity``)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    identity = models.CharField(max_length=600)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "identity"], name="gateway_identity_unique")]


class GatewayResponse(models.Model):
    """A response of ``POST /v1/responses``, kept so a later request can continue it by
    ``previous_response_id``: the history it answered is the session's first ``position``
    stored messages, and ``reply`` is its answer (the assistant message as stored). The
    reply is kept here because the session stores it only after the answer has been sent,
    and the client's next request may come first."""

    id = models.CharField(max_length=64, primary_key=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="responses")
    position = models.PositiveIntegerField()
    reply = JSONTextField()
    created_at = models.DateTimeField(auto_now_add=True)


class WorkerBeat(models.Model):
    """A Celery worker that is (or was) alive: its main process writes ``seen_at`` every
    WORKER_HEARTBEAT_INTERVAL seconds and deletes its row on a clean shutdown. The web side
    reads it to tell a run that waits for a worker from one that waits its turn."""

    name = models.CharField(max_length=255, unique=True, help_text="Celery node name (worker@host).")
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    seen_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return self.name


class GatewayCall(models.Model):
    """One request the gateway served for a session, written once when it ends: what we
    estimated the prompt at beside what the provider billed, the price, and where the time
    went. ``cost_usd`` is null when litellm's price table does not know the model (no price
    is not a price of zero); the provider's token columns are null when it reported none."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="gateway_calls")
    run = models.ForeignKey(CompactionRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    endpoint = models.CharField(max_length=60)
    model = models.CharField(max_length=200)
    status_code = models.PositiveSmallIntegerField()
    estimated_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    provider_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    provider_completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    upstream_ms = models.PositiveIntegerField(null=True, blank=True)
    overhead_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["session", "-id"], name="gateway_call_recent")]


class GatewayPiece(models.Model):
    """One text a gateway call sent upstream, kept once per session whatever the number of
    calls that sent it: a message of the forwarded list, or the request's other fields.
    Found again by its SHA-256 (``digest``); ``GatewayCallBody`` lists pieces by id."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    digest = models.CharField(max_length=64)
    text = models.TextField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "digest"], name="gateway_piece_unique")]


class GatewayCallBody(models.Model):
    """What the call inspector shows of a call beyond its figures (``services/call_bodies``):
    what the client sent (its fields as sent; its messages as the positions of the session's
    history they are stored at), the body sent upstream as pieces (``GatewayPiece`` ids, in
    runs) between the literal text before and after them, and the reply. ``sent_sha256`` and
    ``sent_bytes`` are those of the exact bytes sent, so a rebuild proves itself. Deleted
    after ``GATEWAY_CALL_BODY_DAYS``."""

    call = models.OneToOneField(GatewayCall, on_delete=models.CASCADE, primary_key=True, related_name="body")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    client = JSONTextField(default=dict)
    client_piece = models.BigIntegerField(null=True, blank=True)
    sent_head = models.BigIntegerField(null=True, blank=True)
    sent_runs = JSONTextField(null=True, blank=True)
    sent_tail = models.TextField(blank=True, default="")
    sent_sha256 = models.CharField(max_length=64, blank=True, default="")
    sent_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    sent_exact = models.BooleanField(default=True)
    sent_to = models.CharField(max_length=300, blank=True, default="")
    reply = JSONTextField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)


class SweepStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class TuningSweep(models.Model):
    """One "which threshold?" sweep: a policy replayed with its trigger set to each of
    ``values`` over one session (``scope=session``) or every session of the project, by a
    Celery task (``dashboard.services.tuning_sweeps``). ``points`` holds one figure set per
    value, in the order of ``values``; ``current`` is the policy's own setting (marked)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sweeps")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="sweeps")
    scope = models.CharField(max_length=10, default="session")
    parameter = models.CharField(max_length=40, help_text="The trigger kind swept (window_fraction or tokens).")
    values = JSONTextField(default=list)
    current = models.FloatField(null=True, blank=True)
    policy = JSONTextField(default=dict, help_text="The swept policy, before its trigger is replaced.")
    status = models.CharField(max_length=10, choices=SweepStatus.choices, default=SweepStatus.QUEUED)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    points = JSONTextField(default=list)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written by the executing task (services/job_heartbeat); a sweep left running by a lost
    # worker is queued again by the recovery loop (services/runs/recover.recover_tuning_jobs).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Executions started (the claim).")

    @property
    def finished(self) -> bool:
        return self.status in (SweepStatus.DONE, SweepStatus.FAILED)

    def __str__(self) -> str:
        return f"sweep {self.pk} of {self.parameter} ({self.status})"


class GridStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TuningGrid(models.Model):
    """One two-dimensional tuning grid: a policy replayed at every pair of a trigger setting
    (``x_param``: window_fraction or tokens, ``x_values``) and a second setting (``y_param``:
    the kept tail or the tool-output clearing threshold, ``y_values``) over the sessions of a
    project (or one session), split into ``TuningGridChunk`` rows run in parallel by the
    workers (``dashboard.services.tuning_grids``). ``cells`` holds one figure set per pair,
    row by row (``y`` major), once every chunk has finished; ``done`` counts replays."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="grids")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="grids")
    scope = models.CharField(max_length=10, default="project")
    x_param = models.CharField(max_length=40)
    y_param = models.CharField(max_length=40)
    x_values = JSONTextField(default=list)
    y_values = JSONTextField(default=list)
    current_x = models.FloatField(null=True, blank=True)
    current_y = models.FloatField(null=True, blank=True)
    policy = JSONTextField(default=dict, help_text="The policy, before its two swept settings are replaced.")
    status = models.CharField(max_length=10, choices=GridStatus.choices, default=GridStatus.QUEUED)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    chunks_total = models.PositiveIntegerField(default=0)
    chunks_done = models.PositiveIntegerField(default=0)
    cells = JSONTextField(default=list)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    @property
    def finished(self) -> bool:
        return self.status in (GridStatus.DONE, GridStatus.FAILED, GridStatus.CANCELLED)

    def __str__(self) -> str:
        return f"grid {self.pk} of {self.x_param} × {self.y_param} ({self.status})"


class TuningGridChunk(models.Model):
    """A share of a grid's replays, run by one worker task: ``work`` lists
    ``[session id, cell index]`` pairs; ``results`` the figures of each, in the same order."""

    grid = models.ForeignKey(TuningGrid, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=GridStatus.choices, default=GridStatus.QUEUED)
    work = JSONTextField(default=list)
    results = JSONTextField(default=list)
    # as on TuningSweep: the executing task's heartbeat, and executions started
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Executions started (the claim).")
    done = models.PositiveIntegerField(default=0, help_text="Replays of this chunk counted in the grid's progress "
                                                            "(an execution after a lost one counts only past them).")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["grid", "index"], name="grid_chunk_index")]

    def __str__(self) -> str:
        return f"chunk {self.index} of grid {self.grid_id} ({self.status})"


class AutoApply(models.TextChoices):
    """What continuous tuning did to the project's policy on its own (TUNING_AUTO_APPLY)."""

    NONE = "", "nothing"
    APPLIED = "applied", "applied a step"
    HELD = "held", "held (no step within the guardrails)"
    ROLLED_BACK = "rolled_back", "rolled back an earlier step"


class ContinuousTuning(models.Model):
    """One pass of continuous tuning over a project (``dashboard.services.continuous_tuning``,
    sent by Celery beat on ``TUNING_SCHEDULE``): the project's policy swept over its recent
    sessions, the sample those were (``session_ids``, most recent first, chosen by the time
    budget), and the recommendation. ``sweep`` holds the points (a ``TuningSweep`` with
    ``scope="recent"``), so the one-click apply and undo of the tuning page work on it.

    With ``TUNING_AUTO_APPLY`` on, ``auto`` says what the pass did to the project's policy:
    ``applied_policy`` replaced ``previous_policy`` (None: the service default), or an
    earlier step was rolled back because ``live_recall`` fell below the floor."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tunings")
    sweep = models.ForeignKey(TuningSweep, null=True, blank=True, on_delete=models.SET_NULL, related_name="tunings")
    status = models.CharField(max_length=10, choices=SweepStatus.choices, default=SweepStatus.RUNNING)
    window_days = models.FloatField()
    budget_seconds = models.FloatField()
    estimated_seconds = models.FloatField(default=0)
    elapsed_seconds = models.FloatField(null=True, blank=True)
    session_ids = JSONTextField(default=list, help_text="The sessions replayed, most recent first.")
    recent_sessions = models.PositiveIntegerField(default=0, help_text="Sessions active in the window, sampled or not.")
    recall_target = models.FloatField()
    recommended = models.FloatField(null=True, blank=True)
    current = models.FloatField(null=True, blank=True)
    tokens_saving = models.FloatField(null=True, blank=True, help_text="Share of tokens sent the recommendation saves.")
    recall = models.FloatField(null=True, blank=True)
    sentence = models.TextField(blank=True)
    error = models.TextField(blank=True)
    auto = models.CharField(max_length=12, choices=AutoApply.choices, default=AutoApply.NONE, blank=True)
    auto_note = models.TextField(blank=True)
    previous_policy = models.ForeignKey(StoredPolicy, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")
    applied_policy = models.ForeignKey(StoredPolicy, null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="+")
    applied_value = models.FloatField(null=True, blank=True)
    live_recall = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "-created_at"], name="tuning_project_recent")]

    def __str__(self) -> str:
        return f"continuous tuning {self.pk} of project {self.project_id} ({self.status})"
