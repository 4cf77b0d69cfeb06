"""``langfuse``: Langfuse trace and observation exports, JSON or JSONL.

Shapes read (field names in camelCase as the public API and the UI write them, or in
snake_case as the blob-storage export writes them):

- observations: the observations table's export and ``GET /api/public/observations``
  (``{"data": [...]}``), the blob export's ``observations/`` and enriched
  ``observations_v2/`` files (one observation a line): ``{"id", "traceId", "type",
  "startTime", "endTime", "model", "input", "output", "usageDetails", "sessionId"?...}``;
- a trace download (the trace page's "Download JSON"): ``{"trace": {...}, "observations":
  [...]}``, and a trace with its ``observations`` inline (``GET /api/public/traces/{id}``);
- a session download: ``{"traces": [...]}`` with the session's traces;
- traces alone (the traces table's export, the blob export's ``traces/``): a trace's
  ``sessionId`` groups the observations of that trace; a trace whose observations are not
  in the file counts as one model call when its ``input`` is a list of chat messages.

Model calls are the observations of type ``GENERATION``: ``input`` is the message list sent
(or ``{"messages", "tools"}``), ``output`` the answer (a message, a completion with
``choices``, or text); a JSON string in either (the blob export) is parsed. ``model`` (or
``providedModelName``) names the model, ``usageDetails`` (``input``, ``output``; older
``usage``: ``input``/``output`` or ``promptTokens``/``completionTokens``) is the provider's
count. Conversations are grouped by ``sessionId``, else by trace (see ``_calls``).
"""
from __future__ import annotations

from typing import Any

from ..messages import JSONObject
from ._base import Format, ImportedSession, Options, Sample, err
from ._calls import (
    Call,
    CallError,
    calls_from,
    chat_messages,
    detect_records,
    fold,
    maybe_json,
    pick,
    records,
    text_id,
    timestamp,
    tools_of,
    unwrapped,
    usage,
)

_OBSERVATION_TYPES = frozenset({"GENERATION", "SPAN", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER",
                                "EVALUATOR", "EMBEDDING", "GUARDRAIL"})


def _is_observation(obj: Any) -> bool:
    return (isinstance(obj, dict) and obj.get("type") in _OBSERVATION_TYPES
            and pick(obj, "traceId", "trace_id") is not None and pick(obj, "startTime", "start_time") is not None)


def _is_trace(obj: Any) -> bool:
    if not isinstance(obj, dict) or "role" in obj or "messages" in obj or "run_type" in obj:
        return False
    if not (isinstance(obj.get("id"), str) and "timestamp" in obj):
        return False
    return any(k in obj for k in ("observations", "htmlPath", "sessionId", "session_id", "userId", "user_id",
                                  "totalCost", "latency"))


def _is_bundle(obj: Any) -> bool:
    return isinstance(obj, dict) and (
        (isinstance(obj.get("trace"), dict) and isinstance(obj.get("observations"), list))
        or (isinstance(obj.get("traces"), list) and all(_is_trace(t) for t in obj["traces"][:5])))


def _looks_like(obj: Any) -> bool:
    return _is_observation(obj) or _is_trace(obj) or _is_bundle(obj)


def _detect(sample: Sample) -> int:
    return detect_records(sample, _looks_like, "data")


def _flatten(data: Any, source: str | None) -> tuple[list[tuple[str, JSONObject]], list[tuple[str, JSONObject]]]:
    """(traces, observations) with where each was read."""
    traces: list[tuple[str, JSONObject]] = []
    observations: list[tuple[str, JSONObject]] = []
    data = unwrapped(data, "data")

    def take(where: str, obj: Any) -> None:
        if _is_bundle(obj):
            if isinstance(obj.get("trace"), dict):
                take(f"{where} trace", obj["trace"])
            for k, o in enumerate(obj.get("observations") or []):
                take(f"{where} observation {k}", o)
            for k, t in enumerate(obj.get("traces") or []):
                take(f"{where} trace {k}", t)
        elif _is_observation(obj):
            observations.append((where, obj))
        elif _is_trace(obj):
            traces.append((where, obj))
            for k, o in enumerate(obj.get("observations") or []):
                if isinstance(o, dict):  # the trace list gives ids only; the detail gives objects
                    take(f"{where} observation {k}", o)
        elif isinstance(obj, dict) and obj.get("type") is None and pick(obj, "traceId", "trace_id") is None:
            raise err(f"{where}: neither a Langfuse trace nor an observation", "bad_record", source)

    for where, obj in records(data):
        if not isinstance(obj, dict):
            raise err(f"{where}: expected a trace or observation object, got {type(obj).__name__}",
                      "not_an_object", source)
        take(where, obj)
    return traces, observations


def _is_chat(value: Any) -> bool:
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value)


def _answer(value: Any, what: str) -> list[Any]:
    value = maybe_json(value, what)
    if isinstance(value, dict) and isinstance(value.get("choices"), list):  # a whole completion
        return [c.get("message") for c in value["choices"][:1] if isinstance(c, dict)]
    if value is None:
        return []
    return chat_messages(value, what, default_role="assistant")


def _call(where: str, obj: JSONObject, kind: str, session_of: dict[str, str]) -> Call | None:
    ident = text_id(obj.get("id"))
    if ident is None:
        raise CallError(f"a {kind} without an id")
    trace_id = text_id(pick(obj, "traceId", "trace_id")) if kind == "observation" else ident
    what = f"{kind} {ident}"
    raw_input = maybe_json(obj.get("input"), f"{what} input")
    if kind == "trace" and not _is_chat(raw_input):
        return None  # a trace's input is whatever the app passed in: a call only when it is a chat
    messages = chat_messages(raw_input, f"{what} input")
    if not messages:
        if kind == "trace":
            return None
        raise CallError(f"{what} is a GENERATION without input messages", "no_messages")
    details = pick(obj, "usageDetails", "usage_details") or obj.get("usage") or {}
    if isinstance(details, str):
        details = maybe_json(details, f"{what} usage")
    details = details if isinstance(details, dict) else {}
    return Call(
        id=ident, where=f"{kind} {ident} ({where})", trace_id=trace_id,
        conversation=text_id(pick(obj, "sessionId", "session_id")) or session_of.get(trace_id or ""),
        start=timestamp(pick(obj, "startTime", "start_time", "timestamp"), f"{what} start time"),
        end=timestamp(pick(obj, "endTime", "end_time"), f"{what} end time"),
        input=messages,
        output=[m for m in _answer(obj.get("output"), f"{what} output") if m is not None],
        tools=tools_of(raw_input.get("tools")) if isinstance(raw_input, dict) else [],
        model=pick(obj, "model", "providedModelName", "provided_model_name") if kind == "observation" else None,
        usage=usage(pick(details, "input", "promptTokens", "input_tokens"),
                    pick(details, "output", "completionTokens", "output_tokens")),
    )


def _convert(data: Any, source: str | None, options: Options) -> list[ImportedSession]:
    traces, observations = _flatten(data, source)
    session_of = {str(t["id"]): s for _, t in traces if (s := text_id(pick(t, "sessionId", "session_id")))}
    traced = {text_id(pick(o, "traceId", "trace_id")) for _, o in observations}
    generations = [(where, o) for where, o in observations if o.get("type") == "GENERATION"]
    untraced = [(where, t) for where, t in traces if t["id"] not in traced]  # else its observations carry the calls
    calls = calls_from(generations, lambda where, obj: _call(where, obj, "observation", session_of), source)
    calls += calls_from(untraced, lambda where, obj: _call(where, obj, "trace", session_of), source)
    return fold(calls, "langfuse", source, "GENERATION observations (or traces)")


FORMAT = Format(name="langfuse", order=50, detect=_detect, convert=_convert, reads_jsonl=True,
                label="Langfuse traces or observations (JSON or JSONL export)")
