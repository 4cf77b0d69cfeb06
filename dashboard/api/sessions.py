"""Sessions: import, list, detail, delete, append, history, context, force, runs, simulate."""
from __future__ import annotations

from typing import Annotated

from django.http import HttpResponse
from ninja import Router
from ninja.params import functions as param
from pydantic import Field

from compaction import CompactionError, simulate
from compaction.formats import METADATA_KEYS, model_name, session_metadata

from ..models import StoredMessage, StoredPolicy, TriggerKind
from ..selectors import sessions as sel
from ..selectors.policies import get_policy
from ..selectors.runs import list_runs
from ..services import Invalid, NotFound, rate_limits
from ..services import runs as run_service
from ..services import sessions as service
from ..services.branches import retrieve_for, split_filter_keys
from ..services.pins import split_pins
from ..services.policies import (
    apply_service_defaults,
    build_policy,
    effective_policy,
    runnable_policy,
    set_session_policy,
)
from . import convert
from .errors import ERROR_CODES
from .idempotency import Answer, once_per_key
from .schemas import (
    MAX_ID,
    AppendIn,
    AppendOut,
    BranchSummariesOut,
    ContextOut,
    Error,
    ForceIn,
    ImportOut,
    MessagePage,
    RunPage,
    RunRef,
    SessionDetailOut,
    SessionImportIn,
    SessionPage,
    SessionPolicyIn,
    SimulateIn,
    SimulateOut,
)

router = Router(tags=["sessions"])

SessionId = Annotated[int, param.Path(ge=1, le=MAX_ID, description="Session id.")]
Cursor = Annotated[str | None, param.Query(None, max_length=200, description="next_cursor of the previous page.")]
Limit = Annotated[int | None, param.Query(None, ge=1, le=500, description="Page size (default 50).")]
ERR = {code: Error for code in ERROR_CODES}


def _session(request, session_id: int):
    return sel.get_session(request.auth.pk, session_id)


@router.post("/sessions", response={201: ImportOut, 429: Error, **ERR}, summary="Import a session")
def import_session(request, body: SessionImportIn):
    """Import one session (OpenAI chat JSON or JSONL, Anthropic Messages, Claude Code JSONL).
    Atomic: an invalid session writes nothing and the error names the index or line and the fault.
    OpenAI-format messages may carry a `filter_key` and `pinned` beside them (branch summaries,
    pinned messages).

    With an `Idempotency-Key` header, a repeat of the same request within 24 hours returns
    the first answer (the same session) and imports nothing; the same key with another body
    is refused (422 naming the header). Over the project's IMPORT_RATE_LIMIT: 429 with
    `Retry-After` (a replayed answer does not count)."""

    def work() -> Answer:
        rate_limits.check(request.auth, "import")
        metadata = session_metadata(body.model_dump(include=set(METADATA_KEYS)))
        model = body.model or model_name((body.meta or {}).get("model"))
        result = service.import_request(request.auth, body.messages, filter_key=body.filter_key, pinned=body.pinned,
                                        tools=body.tools, system=body.system, format=body.format, title=body.title,
                                        external_id=body.external_id or body.id, model=model,
                                        auto_compact=body.auto_compact, metadata=metadata)
        session = sel.get_session(request.auth.pk, result.session.pk)
        return 201, {"session": convert.session_detail_out(session, request),
                     "trigger": convert.trigger_out(result.trigger),
                     "compaction": convert.run_ref(result.run, result.run_created, request)}

    return once_per_key(request, work)


@router.get("/sessions", response={200: SessionPage, **ERR}, summary="List sessions (newest first)")
def list_sessions(request, cursor: Cursor = None, limit: Limit = None):
    items, nxt = sel.list_sessions(request.auth.pk, cursor, limit)
    return {"items": [convert.session_out(s, request) for s in items], "next_cursor": nxt}


@router.get("/sessions/{session_id}", response={200: SessionDetailOut, **ERR}, summary="Session detail")
def get_session(request, session_id: SessionId):
    """Token totals per category (history and live context), context size, compaction count,
    the trigger as it stands and any pending run."""
    return convert.session_detail_out(_session(request, session_id), request)


@router.delete("/sessions/{session_id}", response={204: None, **ERR}, summary="Delete a session")
def delete_session(request, session_id: SessionId):
    service.delete_session(_session(request, session_id))
    return 204, None


@router.put("/sessions/{session_id}/policy", response={200: SessionDetailOut, **ERR},
            summary="Set or clear the session's policy override")
def put_session_policy(request, session_id: SessionId, body: SessionPolicyIn):
    session = _session(request, session_id)
    row = get_policy(request.auth.pk, body.policy_id) if body.policy_id is not None else None
    set_session_policy(session, row)
    return convert.session_detail_out(_session(request, session_id), request)


@router.post("/sessions/{session_id}/messages", response={201: AppendOut, **ERR}, summary="Append messages")
def append_messages(request, session_id: SessionId, body: AppendIn):
    """Append messages to the history and the live context. The trigger is checked on the
    stored totals; when it fires a run is queued and `compaction` says which. When the run
    cannot be enqueued (broker down, queue full) it runs inline before this answers:
    `compaction.inline` is true and `compaction.status` final. Each message may carry a
    `filter_key` beside it (`app/tool`), else the body's `filter_key` applies, and
    `pinned: true` (or its index in the body's `pinned` list) to keep it through every compaction."""
    session = _session(request, session_id)
    messages, pinned = split_pins(body.messages, body.pinned)
    messages, keys = split_filter_keys(messages, body.filter_key)
    result = service.append_messages(session, messages, auto_compact=body.auto_compact, filter_keys=keys,
                                     pinned=pinned)
    s = result.session
    return 201, {
        "session_id": s.pk, "dashboard_url": convert.page_url(request, "pages:session", s.pk),
        "appended": len(result.positions), "positions": result.positions,
        "message_count": s.message_count,
        "context": {"version": s.context_version, "tokens": s.context_tokens, "messages": s.context_messages},
        "trigger": convert.trigger_out(result.trigger), "compaction": convert.run_ref(result.run, result.run_created, request),
    }


@router.get("/sessions/{session_id}/messages", response={200: MessagePage, **ERR},
            summary="The full original history")
def list_messages(request, session_id: SessionId, cursor: Cursor = None, limit: Limit = None):
    items, nxt = sel.list_messages(_session(request, session_id), cursor, limit)
    return {"items": [convert.message_out(m) for m in items], "next_cursor": nxt}


@router.get("/sessions/{session_id}/context", response={200: ContextOut, 304: None, **ERR},
            summary="The compacted context for the next model call")
def get_context(request, session_id: SessionId):
    """Messages to send, their tokens per category and a version tag (also the ETag:
    send it back in If-None-Match to get 304 when nothing changed)."""
    current = sel.context_version(request.auth.pk, session_id)
    if current is None:
        raise NotFound(f"session {session_id} not found")
    version, stamp = current
    etag = f'"{sel.context_tag(session_id, version)}"'
    if request.headers.get("If-None-Match") == etag and service.served_already(session_id, stamp):
        # the client holds this version and it is on record as served: no body is read
        response = HttpResponse(status=304)
        response["ETag"] = etag
        return response
    found = sel.context_json(request.auth.pk, session_id, stamp)
    if found is None:
        raise NotFound(f"session {session_id} not found")
    etag = f'"{sel.context_tag(session_id, found.version)}"'
    # what was served is the prefix of the agent's next model request
    service.record_served(session_id, found.version, found.upto, found.stamp)
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(found.body, content_type="application/json")
    response["ETag"] = etag
    return response


@router.post("/sessions/{session_id}/compactions", response={200: RunRef, 202: RunRef, 429: Error, **ERR},
             summary="Force a compaction")
def force_compaction(request, session_id: SessionId, body: ForceIn | None = None):
    """Queue a run that compacts whatever the trigger says. Returns at once (202) with the
    run id; poll `status_url`. When the run cannot be enqueued (broker down, queue full) it
    executes inline in this request: 200 with `inline: true` and the final status. The body
    is optional: none (or `{}`) forces with the session's own policy.

    While a forced run of the session is queued or running, a force with the same policy,
    overrides and filter_key returns that run (202, `created: false`) instead of queueing
    another; one that asks for different settings is refused (409 naming the pending run).

    With an `Idempotency-Key` header, a repeat of the same request within 24 hours returns
    the first answer (same run, same status) and does nothing; the same key with another
    request is refused (422 naming the header). Over the project's FORCE_RATE_LIMIT: 429 with
    `Retry-After` (a replayed answer does not count)."""
    session = _session(request, session_id)
    body = body or ForceIn()

    def force() -> Answer:
        rate_limits.check(request.auth, "force")
        run, created = run_service.force_run(session, trigger=TriggerKind.API, reason=body.reason,
                                             overrides=body.overrides, policy=body.policy, preset=body.preset,
                                             filter_key=body.filter_key)
        ref = convert.run_ref(run, created, request)
        assert ref is not None  # a forced request always returns its run
        return (200 if ref["inline"] else 202), ref

    return once_per_key(request, force)


@router.get("/sessions/{session_id}/summaries", response={200: BranchSummariesOut, **ERR},
            summary="Branch summaries: the one served for a filter key")
def branch_summaries(request, session_id: SessionId,
                     key: Annotated[str | None, param.Query(None, max_length=255,
                                                               description="Filter key, e.g. app/tool; "
                                                                           "empty: the whole session.")] = None):
    """The summary an agent asking for `key` gets: that key's summary, else the whole-session
    summary, else the newest of any key. `used` names the key served and `fallback` how
    (`exact`, `whole_session`, `any`, `none`); `keys` lists every stored summary."""
    return retrieve_for(_session(request, session_id), key)


@router.get("/sessions/{session_id}/runs", response={200: RunPage, **ERR}, summary="Runs of a session (newest first)")
def session_runs(request, session_id: SessionId, cursor: Cursor = None, limit: Limit = None):
    items, nxt = list_runs(_session(request, session_id), cursor, limit)
    return {"items": [convert.run_out(r, request) for r in items], "next_cursor": nxt}


@router.post("/sessions/{session_id}/simulate", response={200: SimulateOut, **ERR},
             summary="Replay this session through a policy (dry run)")
def simulate_session(request, session_id: SessionId, body: SimulateIn):
    """The replay engine over the stored history with the given policy, preset or stored
    policy (default: the session's), as `python -m compaction replay --json` reports it.
    Nothing is written."""


    session = _session(request, session_id)
    if body.policy_id is not None:
        row: StoredPolicy = get_policy(request.auth.pk, body.policy_id)
        policy = apply_service_defaults(build_policy(row.data, None, body.overrides), session)
    elif body.policy is not None or body.preset:
        policy = apply_service_defaults(build_policy(body.policy, body.preset, body.overrides), session)
    else:
        policy, _ = effective_policy(session)
        if body.overrides:
            policy = build_policy(policy.to_json(), None, body.overrides)
    raws = list(StoredMessage.objects.filter(session_id=session.pk).order_by("position").values_list("raw", flat=True))
    try:
        # one replay id for every session (as the tuning preview's): archive entry ids hash it and
        # summaries quote them, so the session's key would change the report's token counts
        report = simulate(raws, runnable_policy(policy), tools=session.tools or None, session_id="simulate")
    except CompactionError as exc:
        raise Invalid(f"simulation failed: {exc}") from None
    return {"session_id": session.pk, "policy": policy.to_json(), "report": report}


__all__ = ["router", "Field"]
