"""Request and response schemas of the REST API (they are the OpenAPI document)."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from compaction.formats import FORMATS

from ..services.common import text_problem

MAX_ID = 2**63 - 1


def _storable(value: str | None) -> str | None:
    if value is not None:
        problem = text_problem(value)
        if problem:
            raise ValueError(problem)
    return value


Text = Annotated[str, AfterValidator(_storable)]
Format = Literal["openai", "openai_jsonl", "anthropic", "claude_code_jsonl", "langfuse", "phoenix", "langsmith", "otlp"]
assert set(Format.__args__) == set(FORMATS)  # type: ignore[attr-defined]


class Input(BaseModel):
    """Request bodies: unknown fields and loose types (0 for false, "1" for 1) are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Error(Schema):
    detail: Any = Field(description="What went wrong: a sentence, or a list of validation errors.")
    field: str | None = Field(None, description="Dotted path of the offending setting or field, when known.")
    fault: str | None = Field(None, description="Machine-readable fault code of an import error.")
    index: int | None = Field(None, description="Index of the offending message, when known.")
    line: int | None = Field(None, description="Line of the offending JSONL record, when known.")


# -- shared pieces ---------------------------------------------------------------------

class Tokens(Schema):
    system: int = 0
    tools: int = 0
    user: int = 0
    assistant: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    summary: int = 0
    total: int = 0


class TriggerOut(Schema):
    fired: bool
    reason: str
    detail: dict[str, Any]


# dashboard_url and metadata have defaults only so that an Idempotency-Key answer stored
# before they existed still replays; every answer made now carries them.
class RunRef(Schema):
    run_id: int
    status: str
    status_url: str
    created: bool = Field(description="True when this request queued the run; false when it reports a run already pending.")
    dashboard_url: str = Field("", description="The run's page on the dashboard.")
    inline: bool = Field(False, description="The run could not be enqueued (broker down, queue full) and executed "
                                            "synchronously in this request; `status` is then final.")


# -- sessions ----------------------------------------------------------------------------

class SessionImportIn(Input):
    messages: list[dict[str, Any]] | str = Field(
        description="The session: a list of messages (OpenAI chat, Anthropic Messages, or Claude Code records), "
                    "a trace export's records (Langfuse observations, Phoenix spans, LangSmith runs), or JSONL "
                    "text (one OpenAI message, Claude Code record or trace record per line).")
    tools: list[dict[str, Any]] | None = Field(None, description="Tool schemas (OpenAI or Anthropic shape).")
    system: str | list[dict[str, Any]] | None = Field(None, description="Anthropic system prompt.")
    title: Annotated[Text, Field(max_length=500)] | None = None
    external_id: Annotated[Text, Field(max_length=500)] | None = Field(
        None, description="Your id for the session; unique within the project.")
    model: Annotated[Text, Field(max_length=200)] | None = Field(
        None, description="The agent's model (sets the tokenizer and context window when the policy names none).")
    format: Format | None = Field(None, description="Input format; detected when omitted.")
    auto_compact: bool = Field(True, description="Check the trigger after import and queue a run when it fires.")
    filter_key: Annotated[Text, Field(max_length=255)] | None = Field(
        None, description="Branch filter key ('app/tool') of every message that carries none of its own "
                          "(a message may carry `filter_key` beside its fields).")
    pinned: list[int] | None = Field(
        None, max_length=100_000, description="Indexes of messages never evicted, truncated or cleared by a "
                                              "compaction (a message may instead carry `pinned: true` beside its "
                                              "fields). OpenAI-format messages only: they map one to one.")
    # The corpus file shape (a file of ../shared/corpus posted as is) and OpenAI's metadata:
    # kept as the session's metadata, shown on the dashboard, never sent to a model.
    id: Annotated[Text, Field(max_length=500)] | None = Field(
        None, description="A corpus file's session id: the external_id when `external_id` is not given.")
    source: Annotated[Text, Field(max_length=2000)] | None = Field(None, description="Where the session comes from.")
    license: Annotated[Text, Field(max_length=500)] | None = Field(None, description="The session's license.")
    meta: dict[str, Any] | None = Field(None, description="Anything else the file says about the session.")
    metadata: dict[str, Any] | None = Field(None, description="OpenAI-style request metadata (string pairs or any JSON).")


class SessionOut(Schema):
    id: int
    title: str
    external_id: str
    model: str
    format: str
    message_count: int
    context_messages: int
    context_tokens: int
    history_tokens: int
    compaction_count: int
    policy_id: int | None
    created_at: datetime
    updated_at: datetime
    last_message_at: datetime | None
    url: str
    metadata: dict[str, Any] = Field(default_factory=dict, description="What the import said about the session (a corpus file's id, "
                                                 "source, license and meta; OpenAI metadata).")
    dashboard_url: str = Field("", description="The session's page on the dashboard.")


class PendingRun(Schema):
    run_id: int
    status: str
    status_url: str


class SessionDetailOut(SessionOut):
    tokenizer: str
    tools_tokens: int
    history_by_category: Tokens
    context_by_category: Tokens
    context_version: int
    tokens_since_summary: int
    messages_since_summary: int
    last_compacted_at: datetime | None
    window: int
    window_source: str
    policy_name: str
    trigger: TriggerOut
    pending_run: PendingRun | None
    active_run_id: int | None


class SessionPage(Schema):
    items: list[SessionOut]
    next_cursor: str | None


class ImportOut(Schema):
    session: SessionDetailOut
    trigger: TriggerOut | None
    compaction: RunRef | None


class AppendIn(Input):
    messages: list[dict[str, Any]] = Field(min_length=1, description="OpenAI chat messages, in order; each may "
                                                                      "carry a `filter_key` ('app/tool') beside its fields.")
    auto_compact: bool = Field(True, description="Check the trigger and queue a run when it fires.")
    filter_key: Annotated[Text, Field(max_length=255)] | None = Field(
        None, description="Branch filter key of every message that carries none of its own.")
    pinned: list[int] | None = Field(
        None, max_length=100_000, description="Indexes (in `messages`) of messages never evicted, truncated or "
                                              "cleared by a compaction (a message may instead carry "
                                              "`pinned: true` beside its fields).")


class ContextSummary(Schema):
    version: int
    tokens: Tokens
    messages: int


class AppendOut(Schema):
    session_id: int
    dashboard_url: str = Field("", description="The session's page on the dashboard.")
    appended: int
    positions: list[int]
    message_count: int
    context: ContextSummary
    trigger: TriggerOut | None
    compaction: RunRef | None = Field(description="The run this append queued (or the one already pending), or null.")


class MessageOut(Schema):
    position: int
    role: str
    message: dict[str, Any]
    filter_key: str | None = None
    tokens: int
    tokens_by_category: dict[str, int]
    content_hash: str
    created_at: datetime


class MessagePage(Schema):
    items: list[MessageOut]
    next_cursor: str | None


class ContextOut(Schema):
    session_id: int
    version: int
    tag: str = Field(description="Changes whenever the context changes (also sent as the ETag header).")
    tokens: Tokens
    message_count: int
    compactions: int
    messages: list[dict[str, Any]] = Field(description="The messages to send to the model, OpenAI chat format.")


class SessionPolicyIn(Input):
    policy_id: Annotated[int, Field(ge=1, le=MAX_ID)] | None = Field(
        None, description="A policy of this project, or null to follow the project's active policy.")


# -- runs ---------------------------------------------------------------------------------

class ForceIn(Input):
    reason: Annotated[Text, Field(max_length=2000)] = ""
    overrides: dict[str, Any] | None = Field(None, description='Dotted settings, e.g. {"cut.keep_messages": 4}.')
    policy: dict[str, Any] | None = Field(None, description="A whole policy to use instead of the session's.")
    preset: Annotated[Text, Field(max_length=100)] | None = Field(None, description="A preset name instead of the session's policy.")
    filter_key: Annotated[Text, Field(max_length=255)] | None = Field(None, description="Branch whose summary the run refreshes first.")


class Progress(Schema):
    step: str
    attempt: int
    detail: dict[str, Any]


class RunOut(Schema):
    id: int
    session_id: int
    trigger: str
    reason: str
    force: bool
    status: str
    progress: Progress
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    deliveries: int
    policy_id: int | None
    policy_version: int | None
    tokens_before: dict[str, int] | None
    tokens_after: dict[str, int] | None
    messages_before: int | None
    messages_after: int | None
    model: str
    error: str
    error_kind: str
    archive_refs: list[str]
    filter_key: str | None = Field(None, description="Filter key whose messages triggered the run.")
    inline: bool = Field(False, description="Executed synchronously in the request that needed it (sync fallback).")
    inline_reason: str = Field("", description="Why it could not be enqueued.")
    request_mode: str | None = Field(None, description="Summary request: cache_safe or standalone (null: none sent).")
    request_mode_reason: str = Field("", description="Why that request mode.")
    waiting: str | None = Field(None, description=(
        "Set while the run is queued and no worker is alive: \"waiting for a worker (none seen for N s)\" and "
        "what happens next (RUN_NO_WORKER_WAIT, RUN_NO_WORKER_FALLBACK)."))
    url: str
    dashboard_url: str = Field("", description="The run's page on the dashboard.")


class RunEventOut(Schema):
    kind: str
    delivery: int
    data: dict[str, Any]
    created_at: datetime


class RunDetailOut(RunOut):
    summary: str
    prompt: list[Any]
    attempts: list[Any]
    ledger: list[Any]
    retention: dict[str, Any] | None
    compression: float | None
    trigger_info: dict[str, Any] | None
    result: dict[str, Any]
    policy_snapshot: dict[str, Any]
    overrides: dict[str, Any]
    snapshot_messages: int | None
    appended_during_run: int | None
    context_version_after: int | None
    events: list[RunEventOut]


class RunPage(Schema):
    items: list[RunOut]
    next_cursor: str | None


# -- branch summaries ---------------------------------------------------------------------------

class BranchSummaryOut(Schema):
    key: str = Field(description="Filter key; empty for the whole-session summary.")
    text: str
    covered: int
    messages: int
    model: str | None = None
    extractive: bool = False
    updated_at: float
    version: int
    run_id: str | None = None


class BranchKeyOut(Schema):
    key: str
    version: int
    messages: int
    covered: int
    updated_at: float
    run_id: str | None = None
    model: str | None = None


class BranchSummariesOut(Schema):
    session_id: int
    requested: str = Field(description="The key asked for (normalised; empty: the whole session).")
    used: str | None = Field(description="The key whose summary is served; null when there is none.")
    fallback: Literal["exact", "whole_session", "any", "none"]
    summary: BranchSummaryOut | None
    keys: list[BranchKeyOut]
    position: int = Field(description="Messages of the history the last refresh looked at.")


# -- archive -------------------------------------------------------------------------------

class ArchiveEntryOut(Schema):
    id: str
    session_id: int
    run_id: int | None
    kind: str
    note: str
    content_hash: str
    item_count: int
    size_chars: int
    created_at: datetime
    url: str


class ArchiveEntryPage(Schema):
    items: list[ArchiveEntryOut]
    next_cursor: str | None


class ArchiveItemOut(Schema):
    index: int
    message_id: str
    ordinal: int | None
    tool_call_id: str | None
    tool_name: str | None
    message: dict[str, Any]


class ArchiveEntryDetailOut(ArchiveEntryOut):
    offset: int
    limit: int
    next_offset: int | None
    items: list[ArchiveItemOut]


class SearchHit(Schema):
    entry_id: str
    entry_kind: str
    index: int
    message_id: str
    ordinal: int | None
    role: str
    tool_name: str | None
    snippet: str
    url: str


class ToolCallIn(Schema):
    name: str = Field(max_length=100, description="The tool the agent called: session_load or session_search.")
    arguments: dict[str, Any] | str = Field(
        default_factory=dict, description="The call's arguments, as an object or as the JSON text the model wrote.")


class SearchPage(Schema):
    query: str
    items: list[SearchHit]
    next_cursor: str | None


class ProjectSearchHit(Schema):
    kind: str = Field(description="'message' (stored history) or 'archive' (an archived original).")
    session_id: int
    session_title: str
    position: int | None = Field(description="Where the message sits in its session's timeline.")
    message_id: str
    role: str
    score: float = Field(description="Relevance; higher first. Comparable within one answer only.")
    snippet: str
    entry_id: str | None
    url: str = Field(description="The session page scrolled to the message.")


class ProjectSearchPage(Schema):
    query: str
    scope: str
    items: list[ProjectSearchHit]


class ReplayOut(Schema):
    session_id: int
    count: int
    matches_history: bool = Field(description="The rebuilt sequence equals the stored history, message for message.")
    content_hash: str
    messages: list[dict[str, Any]]


# -- simulate and policies --------------------------------------------------------------------

class SimulateIn(Input):
    policy: dict[str, Any] | None = Field(None, description="A whole policy; default: the session's policy.")
    preset: Annotated[Text, Field(max_length=100)] | None = None
    policy_id: Annotated[int, Field(ge=1, le=MAX_ID)] | None = None
    overrides: dict[str, Any] | None = None


class SimulateOut(Schema):
    session_id: int
    policy: dict[str, Any]
    report: dict[str, Any] = Field(description="Same report as `python -m compaction replay --json`.")


class PolicyIn(Input):
    name: Annotated[Text, Field(min_length=1, max_length=200)]
    description: Annotated[Text, Field(max_length=5000)] = ""
    policy: dict[str, Any] | None = Field(None, description="The settings (compaction.policy.Policy as JSON).")
    preset: Annotated[Text, Field(max_length=100)] | None = Field(None, description="Start from a preset instead.")
    overrides: dict[str, Any] | None = Field(None, description="Dotted settings applied on top.")
    activate: bool = Field(False, description="Make it the project's active policy.")


class PolicyUpdateIn(Input):
    name: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    description: Annotated[Text, Field(max_length=5000)] | None = None
    policy: dict[str, Any] | None = Field(None, description="Replace the settings with this policy.")
    preset: Annotated[Text, Field(max_length=100)] | None = Field(None, description="Replace the settings with this preset.")
    overrides: dict[str, Any] | None = Field(None, description="Dotted settings applied on top of the current (or new) settings.")


class PolicyOut(Schema):
    id: int
    name: str
    description: str
    version: int
    active: bool
    policy: dict[str, Any]
    warnings: list[str] = Field(description="Settings that cannot work as written at the policy's window "
                                            "(e.g. a trigger threshold above the usable window, which the "
                                            "overflow guard pre-empts).")
    created_at: datetime
    updated_at: datetime
    url: str


class PolicyCheckIn(Input):
    policy: dict[str, Any] | None = Field(None, description="The settings (compaction.policy.Policy as JSON).")
    preset: Annotated[Text, Field(max_length=100)] | None = Field(None, description="Start from a preset instead.")
    overrides: dict[str, Any] | None = Field(None, description="Dotted settings applied on top.")


class PolicyCheckOut(Schema):
    valid: bool
    policy: dict[str, Any] = Field(description="The validated policy with every default filled in.")
    warnings: list[str]


class PolicyPage(Schema):
    items: list[PolicyOut]
    next_cursor: str | None


class PolicyVersionOut(Schema):
    version: int
    policy: dict[str, Any]
    created_at: datetime


class ActivePolicyIn(Input):
    policy_id: Annotated[int, Field(ge=1, le=MAX_ID)] | None = Field(None, description="null: use the default policy.")


class ActivePolicyOut(Schema):
    project: str
    policy: PolicyOut | None
    effective: dict[str, Any] = Field(description="The settings new runs get (the active policy or the service default).")
    source: Literal["policy", "default"]


class HookOut(Schema):
    kind: str
    name: str
    description: str
    builtin: bool


class LanguageOut(Schema):
    code: str
    name: str


class HooksOut(Schema):
    kinds: list[str]
    hooks: list[HookOut]
    languages: list[LanguageOut]


class PresetOut(Schema):
    name: str
    description: str
    policy: dict[str, Any]
