"""``langsmith``: LangSmith run exports, JSON or JSONL.

Shapes read: runs as LangSmith's run data format describes them and ``Client.list_runs``
returns them (a list, one run a line, ``{"runs": [...]}``, or a run tree with
``child_runs``): ``{"id", "name", "run_type", "trace_id", "parent_run_id", "dotted_order",
"start_time", "end_time", "inputs", "outputs", "extra", "error", "prompt_tokens",
"completion_tokens"...}``.

Model calls are the runs of type ``llm``:

- ``inputs.messages``: LangChain messages (``[[...]]``, a batch of one, serialized as
  ``{"lc": 1, "type": "constructor", "id": [..., "HumanMessage"], "kwargs": {...}}`` or as
  ``{"type": "human", "content"}``) or OpenAI messages (the ``wrap_openai`` wrapper records
  the request's keyword arguments: ``messages``, ``model``, ``tools``); ``inputs.prompts``
  for a completion model;
- ``outputs.generations[0][0].message`` (LangChain) or ``outputs.choices[0].message``
  (``wrap_openai``, the completion itself), else the generation's ``text``;
- the model from ``extra.metadata.ls_model_name``, ``extra.invocation_params.model``
  or ``inputs.model``; the provider's counts from ``outputs.usage_metadata``,
  ``outputs.llm_output.token_usage``, the answer's ``usage_metadata`` or the run's
  ``prompt_tokens``/``completion_tokens``; tools from ``inputs.tools`` or
  ``extra.invocation_params.tools``.

Conversations are grouped by the thread LangSmith groups runs by (``session_id``,
``thread_id`` or ``conversation_id`` in ``extra.metadata``), else by trace.
"""
from __future__ import annotations

from typing import Any

from ..messages import JSONObject, RawMessage
from ._base import Format, ImportedSession, Options, Sample, err
from ._calls import (
    Call,
    CallError,
    calls_from,
    chat_message,
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

_THREAD_KEYS = ("session_id", "thread_id", "conversation_id")


def _is_run(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("run_type"), str) and (
        "inputs" in obj or "outputs" in obj)


def _detect(sample: Sample) -> int:
    return detect_records(sample, _is_run, "runs")


def _runs(data: Any, source: str | None) -> list[tuple[str, JSONObject]]:
    data = unwrapped(data, "runs")
    out: list[tuple[str, JSONObject]] = []

    def take(where: str, run: Any) -> None:
        if not isinstance(run, dict):
            raise err(f"{where}: expected a run object, got {type(run).__name__}", "not_an_object", source)
        out.append((where, run))
        for k, child in enumerate(run.get("child_runs") or []):
            take(f"{where} child run {k}", child)

    for where, run in records(data, "run"):
        take(where, run)
    return out


def _answer(outputs: Any, what: str) -> list[RawMessage]:
    outputs = maybe_json(outputs, f"{what} outputs")
    if not isinstance(outputs, dict):
        return chat_messages(outputs, f"{what} outputs", default_role="assistant")
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
        if isinstance(first, dict):
            if first.get("message") is not None:
                return [chat_message(first["message"], f"{what} generation", "assistant")]
            if isinstance(first.get("text"), str):
                return [{"role": "assistant", "content": first["text"]}]
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return [chat_message(choices[0].get("message"), f"{what} choice", "assistant")]
    for key in ("message", "output"):
        if outputs.get(key) is not None:
            return chat_messages(outputs[key], f"{what} outputs.{key}", default_role="assistant")
    return []


def _usage(run: JSONObject, outputs: Any, answer: list[RawMessage]) -> dict[str, int]:
    if isinstance(outputs, dict):
        meta = outputs.get("usage_metadata")
        if isinstance(meta, dict):
            return usage(meta.get("input_tokens"), meta.get("output_tokens"))
        llm_output = outputs.get("llm_output")
        token_usage = llm_output.get("token_usage") if isinstance(llm_output, dict) else None
        if isinstance(token_usage, dict):
            return usage(token_usage.get("prompt_tokens"), token_usage.get("completion_tokens"))
        generations = outputs.get("generations")
        first = generations[0][0] if isinstance(generations, list) and generations and isinstance(
            generations[0], list) and generations[0] else None
        message = first.get("message") if isinstance(first, dict) else None
        kwargs = message.get("kwargs") if isinstance(message, dict) else None
        meta = kwargs.get("usage_metadata") if isinstance(kwargs, dict) else None
        if isinstance(meta, dict):
            return usage(meta.get("input_tokens"), meta.get("output_tokens"))
    return usage(run.get("prompt_tokens"), run.get("completion_tokens"))


def _object(value: Any) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _call(where: str, run: JSONObject) -> Call | None:
    if run.get("run_type") != "llm":
        return None
    run_id = text_id(run.get("id"))
    if run_id is None:
        raise CallError("a run without an id")
    what = f"run {run_id}"
    inputs = maybe_json(run.get("inputs"), f"{what} inputs")
    if not isinstance(inputs, dict):
        raise CallError(f"{what}: inputs must be an object, got {type(inputs).__name__}")
    messages = chat_messages(inputs.get("messages"), f"{what} inputs")
    if not messages and isinstance(inputs.get("prompts"), list) and inputs["prompts"]:
        messages = chat_messages(inputs["prompts"][0], f"{what} inputs.prompts")
    if not messages:
        raise CallError(f"{what} is an llm run without input messages", "no_messages")
    extra = _object(run.get("extra"))
    metadata = _object(extra.get("metadata"))
    params = _object(extra.get("invocation_params"))
    outputs = maybe_json(run.get("outputs"), f"{what} outputs")
    answer = _answer(outputs, what) if outputs is not None else []
    model = pick(metadata, "ls_model_name") or pick(params, "model", "model_name") or inputs.get("model")
    trace_id = text_id(run.get("trace_id"))
    if trace_id is None and isinstance(run.get("dotted_order"), str):
        trace_id = run["dotted_order"].split(".")[0][-36:] or None  # <time>Z<root run id>
    return Call(
        id=run_id, where=f"{what} ({where})", trace_id=trace_id,
        conversation=text_id(pick(metadata, *_THREAD_KEYS)),
        start=timestamp(run.get("start_time"), f"{what} start_time"),
        end=timestamp(run.get("end_time"), f"{what} end_time"),
        input=messages, output=answer,
        tools=tools_of(inputs.get("tools")) or tools_of(params.get("tools")),
        model=model if isinstance(model, str) else None,
        usage=_usage(run, outputs, answer),
    )


def _convert(data: Any, source: str | None, options: Options) -> list[ImportedSession]:
    return fold(calls_from(_runs(data, source), _call, source), "langsmith", source, "llm runs")


FORMAT = Format(name="langsmith", order=70, detect=_detect, convert=_convert, reads_jsonl=True,
                label="LangSmith runs (JSON or JSONL export)")
