"""Model -> response dicts (one place, so the API and tests agree on shapes)."""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from ..models import (
    ArchiveItem,
    CompactionRun,
    RunEvent,
    Session,
    StoredArchiveEntry,
    StoredMessage,
    StoredPolicy,
)
from ..selectors.policies import policy_warnings
from ..selectors.sessions import session_detail
from ..selectors.workers import waiting_note


def page_url(request: HttpRequest, name: str, pk: int) -> str:
    """The absolute address of a dashboard page, on the host the client called."""
    return request.build_absolute_uri(reverse(name, args=[pk]))


def session_out(s: Session, request: HttpRequest) -> dict:
    return {
        "id": s.pk, "title": s.title, "external_id": s.external_id, "model": s.model, "format": s.source_format,
        "message_count": s.message_count, "context_messages": s.context_messages,
        "context_tokens": s.context_total, "history_tokens": s.history_total,
        "compaction_count": s.compaction_count, "policy_id": s.policy_id, "created_at": s.created_at,
        "updated_at": s.updated_at, "last_message_at": s.last_message_at, "url": f"/api/sessions/{s.pk}",
        "metadata": s.metadata or {}, "dashboard_url": page_url(request, "pages:session", s.pk),
    }


def session_detail_out(s: Session, request: HttpRequest) -> dict:
    out = session_out(s, request)
    out.update({
        "tokenizer": s.tokenizer, "tools_tokens": s.tools_tokens, "history_by_category": s.history_tokens,
        "context_by_category": s.context_tokens, "context_version": s.context_version,
        "tokens_since_summary": s.tokens_since_summary, "messages_since_summary": s.messages_since_summary,
        "last_compacted_at": s.last_compacted_at, "active_run_id": s.active_run_id,
    })
    out.update(session_detail(s))
    return out


def trigger_out(result) -> dict | None:
    if result is None:
        return None
    return {"fired": result.fired, "reason": result.reason, "detail": result.to_dict()}


def run_ref(run: CompactionRun | None, created: bool, request: HttpRequest) -> dict[str, Any] | None:
    if run is None:
        return None
    # The run may have executed inline since it was created (sync fallback): read it again.
    fresh = CompactionRun.objects.filter(pk=run.pk).values("status", "inline").first()
    status, inline = (fresh["status"], fresh["inline"]) if fresh else (run.status, run.inline)
    return {"run_id": run.pk, "status": status, "status_url": f"/api/runs/{run.pk}",
            "created": created, "inline": bool(inline),
            "dashboard_url": page_url(request, "pages:run", run.pk)}


def message_out(m: StoredMessage) -> dict:
    return {"position": m.position, "role": m.role, "message": m.raw, "filter_key": m.filter_key, "tokens": m.tokens,
            "tokens_by_category": m.tokens_by_category, "content_hash": m.content_hash, "created_at": m.created_at}


def run_out(r: CompactionRun, request: HttpRequest) -> dict:
    return {
        "id": r.pk, "session_id": r.session_id, "trigger": r.trigger, "reason": r.reason, "force": r.force,
        "status": r.status,
        "progress": {"step": r.progress_step, "attempt": r.progress_attempt, "detail": r.progress_detail or {}},
        "created_at": r.created_at, "started_at": r.started_at, "finished_at": r.finished_at,
        "duration_ms": r.duration_ms, "deliveries": r.deliveries, "policy_id": r.policy_id,
        "policy_version": r.policy_version, "tokens_before": r.tokens_before, "tokens_after": r.tokens_after,
        "messages_before": r.messages_before, "messages_after": r.messages_after, "model": r.model,
        "error": r.error, "error_kind": r.error_kind, "archive_refs": r.archive_refs or [],
        "filter_key": r.filter_key or None, "inline": r.inline, "inline_reason": r.inline_reason,
        "request_mode": r.request_mode or None, "request_mode_reason": r.request_mode_reason,
        "waiting": waiting_note(r), "url": f"/api/runs/{r.pk}",
        "dashboard_url": page_url(request, "pages:run", r.pk),
    }


def event_out(e: RunEvent) -> dict:
    return {"kind": e.kind, "delivery": e.delivery, "data": e.data or {}, "created_at": e.created_at}


def run_detail_out(r: CompactionRun, events: list[RunEvent], request: HttpRequest) -> dict:
    out = run_out(r, request)
    out.update({
        "summary": r.summary, "prompt": r.prompt or [], "attempts": r.attempts or [], "ledger": r.ledger or [],
        "retention": r.retention, "compression": r.compression, "trigger_info": r.trigger_info,
        "result": r.result or {}, "policy_snapshot": r.policy_snapshot or {}, "overrides": r.overrides or {},
        "snapshot_messages": r.snapshot_messages, "appended_during_run": r.appended_during_run,
        "context_version_after": r.context_version_after, "events": [event_out(e) for e in events],
    })
    return out


def entry_out(e: StoredArchiveEntry) -> dict:
    return {"id": e.entry_id, "session_id": e.session_id, "run_id": e.run_id, "kind": e.kind, "note": e.note,
            "content_hash": e.content_hash, "item_count": e.item_count, "size_chars": e.size_chars,
            "created_at": e.created_at, "url": f"/api/archive/{e.entry_id}"}


def item_out(i: ArchiveItem) -> dict:
    return {"index": i.index, "message_id": i.message_id, "ordinal": i.ordinal,
            "tool_call_id": i.tool_call_id or None, "tool_name": i.tool_name or None, "message": i.raw}


def policy_out(p: StoredPolicy, active_id: int | None) -> dict:
    return {"id": p.pk, "name": p.name, "description": p.description, "version": p.version,
            "active": p.pk == active_id, "policy": p.data, "warnings": policy_warnings(p.data),
            "created_at": p.created_at, "updated_at": p.updated_at, "url": f"/api/policies/{p.pk}"}
