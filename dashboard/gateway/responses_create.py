"""One ``POST /v1/responses`` through the gateway (OpenAI's Responses API).

The body is checked (``responses_body``), its whole history put together (``responses_history``:
a ``previous_response_id`` or a compaction item of this gateway stands for what the client
did not resend), and from there the request goes the way of a chat completion (``chat``):
the same session identity and storage, the same compaction before the call, the same
upstream in chat-completions form. The answer is a ``response`` object or its event stream
(``responses_wire``); the response is kept (``services.gateway_responses``) before its
last byte is out, so a next request may name it at once.

Server-side compaction with OpenAI's contract: a ``context_management`` compaction entry
makes its ``compact_threshold`` the policy's trigger for this request, and when a
compaction ran before the call the output starts with a ``compaction`` item (a readable
summary, the archive entries it replaced, and an id that says which stored messages it
stands for). Without the entry, the project's policy decides as on the other endpoints,
and the output carries no compaction item (a client that did not ask may not know one)."""
from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..models import Project
from ..services.gateway_responses import keep_response, new_response_id
from ..services.policies import project_policy
from . import chat, responses_input, upstream
from . import responses_passthrough as passthrough
from . import responses_wire as wire
from .body import ChatBody
from .errors import GatewayError, bad_request, project_gone
from .items import compaction_item
from .responses_body import ResponsesRequest
from .responses_history import history

ENDPOINT = "responses"
_MESSAGE = re.compile(r"^messages\[(\d+)\]\.?")


@dataclass
class Answer:
    """What the view sends: a response object, or the events of one."""

    prep: chat.Prepared
    response: dict[str, Any] | None = None
    events: Iterator[dict[str, Any]] | None = None


def _leading(prep: chat.Prepared, req: ResponsesRequest) -> list[dict[str, Any]]:
    """The compaction item of a run before this call, when the request asked for compaction."""
    run = prep.run
    if not req.compaction or run is None or not run.summary:
        return []
    archive = {"session": prep.session.pk, "run": run.pk,
               "entries": [{"id": ref, "url": f"/api/archive/{ref}"} for ref in run.archive_refs or []]}
    return [compaction_item(run.summary, session=prep.session.pk, end=prep.placement.gateway.stored_count,
                            run=run.pk, archive=archive)]


def _keep(prep: chat.Prepared, response_id: str, project: Project, reply: dict[str, Any]) -> None:
    keep_response(response_id, project_id=project.pk, session_id=prep.session.pk,
                  position=prep.placement.gateway.stored_count, reply=reply)


def _chat_body(req: ResponsesRequest, converted: responses_input.Converted) -> ChatBody:
    """The request as the chat path takes it. Its messages go with a text of their own (their
    JSON array), which the session's identity compares to the last request's as it compares
    a chat request's body text: the part a stored history vouches for is neither validated
    nor digested again (a Responses client resends its whole input each turn, as a chat
    client does). The messages are validated there (``checked=0``), the rest as they are
    placed. Messages converted from new items only come after the kept text of the others,
    which stay undecoded unless the identity reads them (``body.Skipped``)."""
    return ChatBody(model=req.model, messages=converted.messages, stream=req.stream, include_usage=True,
                    tools=req.tools, metadata=req.metadata, params=req.params, user=req.user,
                    raw=responses_input.chat_raw(converted), checked=0, skipped=converted.skipped)


def _prepare(project: Project, req: ResponsesRequest, converted: responses_input.Converted,
             session_header: str | None, overrides: dict[str, Any] | None, started: float) -> chat.Prepared:
    """``chat.prepare`` (the one way this endpoint reaches the session identity), with a bad
    message named as part of the input."""
    try:
        return chat.prepare(project, _chat_body(req, converted), session_header, overrides, endpoint=ENDPOINT,
                            started=started, request_fields=req.fields)
    except GatewayError as exc:
        if exc.status != 400 or not exc.message.startswith("messages["):
            raise
        where, _, detail = exc.message.partition(": ")
        if not (exc.param or "").startswith("messages["):  # a check of the stored history: it names the position
            raise bad_request(f"input: {detail}", param="input") from None
        found = _MESSAGE.match(where)
        index, field = (found.group(1), where[found.end():]) if found else ("?", "")
        raise bad_request(f"input: message {index} of the history (after instructions and what the request "
                          f"continues, counting each assistant turn's function calls as one message)"
                          f"{', field ' + field if field else ''}: {detail}", param="input") from None


def _converted(project: Project, req: ResponsesRequest, session_header: str | None) -> responses_input.Converted:
    """The request's whole history as chat messages: from its new items only when it resends
    the identity's last input (``responses_input``), else from all of it (``history``)."""
    converted = responses_input.resume(project.pk, session_header, req)
    if converted is not None:
        return converted
    return responses_input.whole(history(project.pk, req.input, req.instructions, req.previous_response_id))


def answer(project: Project, req: ResponsesRequest, session_header: str | None,
           started: float | None = None) -> Answer:
    """Run the request; a GatewayError before anything is sent (the view shapes it).
    ``started``: when the view began (the call's overhead counts from there: reading the
    items and putting the history together is work of this endpoint)."""
    started = started if started is not None else time.perf_counter()
    if req.passthrough_only and not upstream.resolve(req.model).responses:
        req.check_translatable()  # before anything is stored
    converted = _converted(project, req, session_header)
    overrides = None
    if req.compact_threshold is not None:
        try:
            base, _row = project_policy(project)
        except Project.DoesNotExist:
            raise project_gone() from None
        overrides = req.overrides(base)
    prep = _prepare(project, req, converted, session_header, overrides, started)

    def remember() -> None:
        responses_input.remember(project.pk, session_header, req, converted)

    if req.stream:
        remember()  # (a stream's events go out as the upstream's come: nothing waits for this)
        return _call(project, req, prep)
    try:
        out = _call(project, req, prep)
    except GatewayError:
        remember()  # the client's retry resends this input
        raise
    # Only the identity's next request reads what this input became: it is kept once the
    # answer is out, before the reply is stored (``prep.after``), off the client's clock as
    # the chat endpoint's storing of its reply is.
    store = prep.after

    def after() -> None:
        try:
            remember()
        finally:
            if store is not None:
                store()

    prep.after = after
    return out


def _call(project: Project, req: ResponsesRequest, prep: chat.Prepared) -> Answer:
    """The call upstream, translated or passed through, and the answer made of it."""
    leading = _leading(prep, req)
    response_id = new_response_id()
    created = int(time.time())
    if prep.up.responses:  # the operator's upstream serves the Responses API itself
        def keep(reply: dict[str, Any]) -> None:
            _keep(prep, response_id, project, reply)

        if not req.stream:
            return Answer(prep, response=passthrough.complete(prep, req, response_id, leading, keep))
        events = passthrough.stream(prep, req, response_id, leading, keep)
        first = next(events, None)  # as below: an upstream failing at once answers with its status
        return Answer(prep, events=itertools.chain([first] if first is not None else [], events))
    if not req.stream:
        completion = chat.complete(prep)
        choice = completion["choices"][0]
        reply = {k: v for k, v in choice["message"].items() if k in ("role", "content", "tool_calls")}
        _keep(prep, response_id, project, reply)
        output = leading + wire.output_items(response_id, reply)
        response = wire.response_object(response_id, req.model, req.echo, created=created, output=output,
                                        finish=choice.get("finish_reason"), chat_usage=completion.get("usage"))
        prep.answered = time.perf_counter()  # the response kept and its object made: both are this call's overhead
        return Answer(prep, response=response)
    chunks = chat.stream(prep)
    # The first chunk is awaited here, so an upstream that fails at once answers with its
    # own status (what the SDK turns into RateLimitError and the like).
    first = next(chunks, None)
    writer = wire.EventWriter(response_id, req.model, req.echo, created, leading)
    return Answer(prep, events=_events(prep, project, writer, first, chunks))


def _events(prep: chat.Prepared, project: Project, writer: wire.EventWriter, first: dict[str, Any] | None,
            rest: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from writer.start()
    try:
        if first is not None:
            yield from writer.chunk(first)
        for chunk in rest:  # the reply is stored when the upstream's stream ends (chat._relay)
            yield from writer.chunk(chunk)
    except GatewayError as exc:
        yield writer.error(exc)
        return
    reply: dict[str, Any] = {"role": "assistant", "content": None}
    text = "".join(writer.message.text) if writer.message is not None else ""
    calls = [{"id": o.item["call_id"], "type": "function",
              "function": {"name": o.item["name"], "arguments": "".join(o.text)}}
             for _i, o in sorted(writer.calls.items())]
    reply["content"] = text or (None if calls else "")
    if calls:
        reply["tool_calls"] = calls
    _keep(prep, writer.response_id, project, reply)
    yield from writer.finish_events()
