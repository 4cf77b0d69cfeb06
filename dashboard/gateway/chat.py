"""One chat completion through the gateway: check the body, store the client's new messages,
compact when due, forward the live context, store the reply, answer in OpenAI's shape.

The client's messages are stored before anything is forwarded, so an upstream failure loses
none of them (the client's retry then adds nothing new and is forwarded again)."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from compaction import Policy

from ..models import CompactionRun, Project, Session
from ..services.call_bodies import CallBody, SentBody
from ..services.gateway_calls import record_quietly
from ..services.policies import apply_service_defaults, project_policy
from . import upstream
from .body import ChatBody
from .compact import before_call
from .errors import GatewayError, project_gone
from .identity import Placement, place, store_reply
from .live import Forwarded, forwarded

log = logging.getLogger("dashboard.gateway")


# The client's API of each endpoint, as the call inspector names it (``CallBody.format``).
_FORMATS = {"messages": "anthropic", "responses": "responses"}


@dataclass
class Prepared:
    body: ChatBody
    up: upstream.Upstream
    placement: Placement
    session: Session
    run: CompactionRun | None
    messages_text: str  # the live context's wire list, as the JSON text sent upstream
    headers: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    endpoint: str = "chat/completions"
    # what is left to do once the answer has been sent (see ``complete``); the view hands it
    # to the response (``sent.AnswerThen``)
    after: Callable[[], None] | None = None
    # when the answer was ready (the end of the call's overhead): set by ``complete``, and
    # later by an endpoint that has more to do before its answer is (``responses_create``)
    answered: float | None = None
    # for the call's inspector page (``call_body``): the client's fields as sent when the
    # endpoint has them (else read back from ``body``), the body sent upstream, the reply
    request_fields: dict[str, Any] | None = None
    sent: SentBody | None = None
    reply: Any = None
    # the Responses reasoning items kept on the live context's messages, by index in
    # ``messages_text`` (``live.Forwarded.reasoning``: only an upstream serving Responses gets them)
    reasoning: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def record(self, status: int, usage: dict[str, int] | None = None, upstream_s: float | None = None,
               answered: float | None = None, error: GatewayError | None = None) -> None:
        """The call's ``GatewayCall`` row: our estimate of what was sent beside the provider's usage.
        Its overhead is the time spent here, less the upstream's, until the answer was ready
        (``answered``; else now)."""
        elapsed = (answered or time.perf_counter()) - self.started
        record_quietly(self.session.pk, endpoint=self.endpoint, model=self.body.model, status_code=status,
                       run=self.run, estimated_prompt_tokens=self.session.context_total, usage=usage,
                       upstream_ms=upstream_s * 1000 if upstream_s is not None else None,
                       overhead_ms=(elapsed - (upstream_s or 0.0)) * 1000, body=self.call_body(error))

    def keep_sent(self, sent: SentBody) -> None:
        self.sent = sent

    def call_body(self, error: GatewayError | None = None) -> CallBody:
        """What the call's inspector page shows (``services/call_bodies``)."""
        body = self.body
        fields = self.request_fields
        if fields is None:
            fields = {"model": body.model, **body.params, "stream": body.stream}
            if body.stream:
                fields["stream_options"] = {"include_usage": body.include_usage}
            fields.update({k: v for k, v in (("tools", body.tools), ("metadata", body.metadata), ("user", body.user))
                           if v})
        reply = {"error": error.error_object()} if error is not None else self.reply
        return CallBody(format=_FORMATS.get(self.endpoint, "chat"), fields=fields,
                        messages=body.count, added=self.placement.added, upto=self.placement.gateway.stored_count,
                        sent=self.sent, reply=reply)


def policy_for(project: Project, model: str) -> Policy:
    try:
        base, _row = project_policy(project)  # the first read of the project's fields (views._project)
    except Project.DoesNotExist:
        raise project_gone() from None
    return apply_service_defaults(base, Session(project=project, model=model))


def prepare(project: Project, body: ChatBody, session_header: str | None,
            overrides: dict[str, Any] | None = None, endpoint: str = "chat/completions",
            started: float | None = None, request_fields: dict[str, Any] | None = None) -> Prepared:
    """Store the request's new messages and compact when due (``overrides``: the request's
    own changes to the session's policy, see ``compact``; ``endpoint``: the label of the
    call's row; ``started``: when the call's overhead starts, if before this;
    ``request_fields``: the client's fields other than its messages, as sent, for the call's
    inspector page)."""
    started = started if started is not None else time.perf_counter()
    up = upstream.resolve(body.model)
    if not upstream.relayed(up):  # (an OpenAI-compatible upstream fetches images itself)
        upstream.refuse_remote_images(up, body.messages)
    upstream.check_window(body.model, lambda: policy_for(project, body.model).context_window)
    placement = place(project, body, session_header)
    if placement.resent is not None:
        # a resend of an earlier point of the history (identity): nothing new was stored,
        # so nothing is due, and the upstream is sent the live context as it was there
        session, run = placement.session, None
        live: Forwarded | None = placement.resent
    else:
        try:
            session, run = before_call(placement.session, placement.policy, overrides)
        except GatewayError as exc:  # e.g. still over the window: the session has the messages, and the call its row
            Prepared(body, up, placement, placement.session, None, "[]", started=started,
                     endpoint=endpoint, request_fields=request_fields).record(exc.status, error=exc)
            raise
        # The live context is the stored texts plus the tail rows appended since (read in one
        # statement, so a commit in between cannot tear it): the texts alone would miss the
        # newest messages.
        live = forwarded(session.pk)
    if live is None:
        raise GatewayError(500, f"session {session.pk} has no live context", type="server_error")
    if live.broken:
        refusal = GatewayError(500, f"the gateway refused to send a context with a broken tool-call pair "
                                    f"({live.broken}); the client's messages are stored in session {session.pk}",
                               type="server_error")
        Prepared(body, up, placement, session, run, live.text, started=started, endpoint=endpoint,
                 request_fields=request_fields).record(refusal.status, error=refusal)
        raise refusal
    headers = {"X-Compaction-Session": str(session.pk), "X-Context-Tokens": str(session.context_total)}
    if run is not None:
        headers["X-Compaction-Run"] = str(run.pk)
    if placement.created and placement.forked_from is not None:
        headers["X-Compaction-Forked-From"] = str(placement.forked_from)
        headers["X-Compaction-Notice"] = (f"this history does not continue session {placement.forked_from} "
                                          f"({placement.fork_reason}); it started session {session.pk}")
    return Prepared(body, up, placement, session, run, live.text, headers, started, endpoint,
                    request_fields=request_fields, reasoning=live.reasoning)


def _reply(message: Any) -> dict[str, Any]:
    """The assistant message to store and answer with, from litellm's message object."""
    out: dict[str, Any] = {"role": "assistant", "content": getattr(message, "content", None)}
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.function.name, "arguments": c.function.arguments or ""}}
                             for c in calls]
    if out["content"] is None and not calls:
        out["content"] = ""
    return out


def _usage(usage: Any) -> dict[str, int] | None:
    if usage is None:
        return None
    out = {k: int(getattr(usage, k, 0) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return out if any(out.values()) else None


def _stored(reply: dict[str, Any], usage: dict[str, int] | None) -> dict[str, Any]:
    # The provider's usage rides on the stored message: the engine's usage-based counting
    # reads it there; it is never forwarded (wire_form keeps only OpenAI's message fields).
    return dict(reply, usage=usage) if usage else dict(reply)


def complete(prep: Prepared) -> dict[str, Any]:
    """Non-streaming: the completion object. Storing the reply is left in ``prep.after``, to
    run once the answer has been sent: the client does not wait for that write, and loses
    nothing if it fails, since its next request carries the reply in its history (stored
    then, by position: see ``identity.store_reply``)."""
    sent = time.perf_counter()
    try:
        response = upstream.call(prep.up, prep.messages_text, prep.body.tools, prep.body.params, stream=False,
                                 keep=prep.keep_sent)
        if not getattr(response, "choices", None):
            raise GatewayError(502, "the upstream answered without a choice", type="server_error")
    except GatewayError as exc:
        prep.record(exc.status, upstream_s=time.perf_counter() - sent, error=exc)
        raise
    upstream_s = time.perf_counter() - sent
    choice = response.choices[0]
    reply = _reply(choice.message)
    usage = _usage(getattr(response, "usage", None))
    message = dict(reply, refusal=None)
    prep.answered = time.perf_counter()
    prep.reply = {"message": reply, "finish_reason": choice.finish_reason or "stop", "usage": usage}
    prep.after = lambda: store_call_reply(prep, reply, usage, upstream_s)
    return {"id": response.id or f"chatcmpl-gw-{prep.session.pk}", "object": "chat.completion",
            "created": int(getattr(response, "created", 0) or time.time()), "model": prep.body.model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": choice.finish_reason or "stop"}],
            "usage": usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def store_call_reply(prep: Prepared, reply: dict[str, Any], usage: dict[str, int] | None, upstream_s: float) -> None:
    """The reply and the call's row, in one transaction, where the request left the history
    (the call's overhead ends when the answer was ready, ``prep.answered``, else now)."""
    store_reply(prep.placement.gateway.pk, _stored(reply, usage), prep.placement.policy,
                at=prep.placement.at, then=lambda: prep.record(200, usage, upstream_s, prep.answered))


def store_after_sent(prep: Prepared) -> None:
    """``prep.after`` for a response already sent: a failure is logged, never raised (the
    client has its answer, and its next request brings the reply back)."""
    if prep.after is None:
        return
    try:
        prep.after()
    except Exception:  # noqa: BLE001 - see above
        log.exception("could not store the reply of session %s; the client's next request will", prep.session.pk)


def stream(prep: Prepared) -> Iterator[dict[str, Any]]:
    """Streaming: the chunk objects to send (OpenAI's ``chat.completion.chunk``); the reply,
    assembled from them, is stored once the upstream's stream ends. An upstream failure
    before the first chunk raises GatewayError (the view answers with its status); after
    it, it ends the stream with an error event."""
    sent = time.perf_counter()
    try:
        chunks = upstream.call(prep.up, prep.messages_text, prep.body.tools, prep.body.params, stream=True,
                               keep=prep.keep_sent)
    except GatewayError as exc:
        prep.record(exc.status, upstream_s=time.perf_counter() - sent, error=exc)
        raise
    return _relay(prep, chunks, sent)


def _relay(prep: Prepared, chunks: Any, sent: float) -> Iterator[dict[str, Any]]:
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: dict[str, int] | None = None
    finish: str | None = None
    cid, created = f"chatcmpl-gw-{prep.session.pk}", int(time.time())
    try:
        for chunk in chunks:
            cid = getattr(chunk, "id", None) or cid
            usage = _usage(getattr(chunk, "usage", None)) or usage
            for choice in getattr(chunk, "choices", None) or []:
                delta = choice.delta
                out_delta: dict[str, Any] = {}
                if getattr(delta, "role", None):
                    out_delta["role"] = delta.role
                if getattr(delta, "content", None):
                    content.append(delta.content)
                    out_delta["content"] = delta.content
                for tc in getattr(delta, "tool_calls", None) or []:
                    index = tc.index if tc.index is not None else 0
                    slot = calls.setdefault(index, {"id": "", "type": "function",
                                                    "function": {"name": "", "arguments": ""}})
                    item: dict[str, Any] = {"index": index}
                    if tc.id:
                        slot["id"] = tc.id
                        item["id"] = tc.id
                        item["type"] = "function"
                    fn = tc.function
                    if fn is not None:
                        item["function"] = {}
                        if fn.name:
                            slot["function"]["name"] += fn.name
                            item["function"]["name"] = fn.name
                        if fn.arguments:
                            slot["function"]["arguments"] += fn.arguments
                            item["function"]["arguments"] = fn.arguments
                    out_delta.setdefault("tool_calls", []).append(item)
                if choice.finish_reason:
                    finish = choice.finish_reason
                if out_delta or choice.finish_reason:
                    yield {"id": cid, "object": "chat.completion.chunk", "created": created, "model": prep.body.model,
                           "choices": [{"index": 0, "delta": out_delta, "logprobs": None,
                                        "finish_reason": choice.finish_reason}]}
    except GatewayError as exc:
        prep.record(exc.status, usage, time.perf_counter() - sent, error=exc)
        raise
    except Exception as exc:  # noqa: BLE001 - the upstream failing mid-stream
        failure = upstream.upstream_error(exc)
        prep.record(failure.status, usage, time.perf_counter() - sent, error=failure)
        raise failure from None
    upstream_s = time.perf_counter() - sent
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        reply["tool_calls"] = [calls[i] for i in sorted(calls)]
    if reply["content"] is None and not calls:
        reply["content"] = ""
    prep.reply = {"message": reply, "finish_reason": finish or "stop", "usage": usage, "streamed": True}
    # stored before the stream's last events: a streaming client has been reading all along,
    # so the write is not what it waits for
    store_call_reply(prep, reply, usage, upstream_s)
    if finish is None:
        yield {"id": cid, "object": "chat.completion.chunk", "created": created, "model": prep.body.model,
               "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]}
    if prep.body.include_usage:
        yield {"id": cid, "object": "chat.completion.chunk", "created": created, "model": prep.body.model,
               "choices": [], "usage": usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
