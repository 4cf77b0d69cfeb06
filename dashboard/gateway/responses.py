"""``POST /v1/responses/compact``: OpenAI's standalone compaction, done with the project's
policy.

The request's items become chat messages (``items``) and are stored like a chat request's
(``identity``: the same session when the history continues one, a new session otherwise);
then a forced run compacts the live context through the run machinery (``compact``), and
the answer is that context as Responses output items: the messages kept, and one readable
``compaction`` item for the summary, with the archive handle of what it replaced.
``usage`` is what the summarizer's provider reported for the run (zero when no model was
called, e.g. with the offline extractive summarizer or when there was nothing to compact)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from ..models import CompactionRun, Project, RunStatus, Session, SessionContext
from ..services.call_bodies import CallBody
from ..services.gateway_calls import record_quietly
from . import chat, upstream
from .body import ChatBody, check_messages, json_object, model_name
from .compact import compact_now
from .errors import GatewayError, bad_request
from .identity import place
from .items import to_output
from .responses_history import history

ENDPOINT = "responses/compact"
# Fields of OpenAI's compact request that change nothing here (prompt caching and service
# tiers belong to OpenAI's own servers); they are accepted so an unchanged client works.
IGNORED = frozenset({"prompt_cache_key", "prompt_cache_retention", "prompt_cache_options", "service_tier"})
KNOWN = IGNORED | {"model", "input", "instructions", "previous_response_id"}


@dataclass
class CompactBody:
    model: str
    input: Any
    instructions: str | None
    previous_response_id: str | None
    fields: dict[str, Any]  # the body's fields other than its input, as sent (the call's inspector page)


def parse(data: bytes) -> CompactBody:
    """The checked body (its items are read by ``responses_history``); a GatewayError (400)
    naming the field otherwise."""
    body = json_object(data)
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        raise bad_request(f"Unrecognized request argument supplied: {unknown[0]}", param=unknown[0])
    model = model_name(body)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("instructions: give a string", param="instructions")
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous or len(previous) > 64):
        raise bad_request("previous_response_id: give a response id", param="previous_response_id")
    if "input" not in body and previous is None:
        raise bad_request("input: give a string or a list of items", param="input")
    return CompactBody(model, body.get("input", []), instructions or None, previous,
                       {k: v for k, v in body.items() if k != "input"})


def _usage(run: CompactionRun) -> dict[str, int]:
    """The summarizer's provider usage over the run's attempts (failed ones were billed too)."""
    prompt = completion = 0
    for attempt in run.attempts or []:
        usage = (attempt or {}).get("usage") or {}
        prompt += int(usage.get("prompt_tokens") or 0)
        completion += int(usage.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def _answer(session: Session, run: CompactionRun, body: CompactBody, usage: dict[str, int],
            stored: int) -> dict[str, Any]:
    live = SessionContext.objects.get(session_id=session.pk).load_items()
    first = live[0] if live else {}
    # The instructions are sent again with the client's next request: not part of the window.
    skip_first = bool(body.instructions) and first.get("provenance") == "original" and first.get("ordinal") == 0
    # The handle: the archive entries the summary replaced, each readable through the API
    # with the project's key (the summary text names them too, for an agent's archive tools).
    archive = {"session": session.pk, "run": run.pk,
               "entries": [{"id": ref, "url": f"/api/archive/{ref}"} for ref in run.archive_refs or []]}
    finished = run.finished_at or timezone.now()
    return {"id": f"resp_cs_{session.pk}_{run.pk}", "object": "response.compaction",
            "created_at": int(finished.timestamp()),
            "output": to_output(live, archive=archive, prefix=f"cs_{run.pk}", run=run.pk, stored=stored,
                                skip_first=skip_first),
            "usage": {"input_tokens": usage["prompt_tokens"],
                      "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens": usage["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}}


def compact(project: Project, data: bytes, session_header: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """(the ``response.compaction`` object, the gateway's headers)."""
    started = time.perf_counter()
    body = parse(data)
    messages = history(project.pk, body.input, body.instructions, body.previous_response_id)
    upstream.check_window(body.model, lambda: chat.policy_for(project, body.model).context_window)
    chat_body = ChatBody(model=body.model, messages=messages, checked=0)
    check_messages(chat_body)
    placement = place(project, chat_body, session_header)
    before = placement.session.context_total
    compaction_started = time.perf_counter()
    session, run = compact_now(placement.session, f"gateway: POST /v1/{ENDPOINT}")
    compaction_s = time.perf_counter() - compaction_started
    usage = _usage(run)

    def record(status: int, reply: Any) -> None:
        # nothing is sent upstream but the summarizer's request, which the run page shows
        inspected = CallBody(format="compact", fields=body.fields, messages=len(messages), added=placement.added,
                             upto=placement.gateway.stored_count, reply=reply)
        record_quietly(session.pk, endpoint=ENDPOINT, model=body.model, status_code=status, run=run.pk,
                       estimated_prompt_tokens=before, usage=usage, price_model=run.model or None,
                       upstream_ms=compaction_s * 1000,
                       overhead_ms=(time.perf_counter() - started - compaction_s) * 1000, body=inspected)

    if run.status not in (RunStatus.SUCCEEDED, RunStatus.SKIPPED):
        failure = GatewayError(502, f"the compaction did not succeed (run {run.pk}, {run.status}): "
                                    f"{run.error or 'see the run page'}; the items are stored in session {session.pk}",
                               type="server_error")
        record(failure.status, {"error": failure.error_object()})
        raise failure
    answer = _answer(session, run, body, usage, placement.gateway.stored_count)
    # the output's messages are the live context, which the session page shows: the record
    # keeps the compaction items and how many items there were, not a copy of the context
    record(200, dict({k: v for k, v in answer.items() if k != "output"}, output_items=len(answer["output"]),
                     output=[item for item in answer["output"] if item.get("type") == "compaction"]))
    headers = {"X-Compaction-Session": str(session.pk), "X-Compaction-Run": str(run.pk),
               "X-Context-Tokens": str(session.context_total)}
    return answer, headers
