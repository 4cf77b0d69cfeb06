"""``summarize()``: from a span of messages to a checked summary, or a SummaryError.

Steps: render the span (:mod:`.render`), fit it into the summarizer's input budget
(:mod:`.fit`), build the prompt (:mod:`.prompts`), ask the models with retries and
failover (:mod:`.llm`), strip reasoning, reject an empty or non-shrinking answer.
Nothing here mutates the span; on failure the caller still has its input untouched.

Input budget: ``input_share`` of the summarizer's window (``context_window``, else
litellm's table for ``model``, else ``fallback_window``), capped by
``input_max_tokens``. The prompt template and the previous summary are counted in
it; the transcript gets the rest. A previous summary that alone would take more
than half the budget is clipped to a third of it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompactionError, SummaryError
from ..messages import Message, Provenance, iter_text
from ..policy import SummarizerPolicy
from ..tokens import MESSAGE_OVERHEAD, MessageCounter
from ..windows import model_window
from .cache_safe import CacheSafePlan, output_reserve, plan
from .extractive import EXTRACTIVE_MODEL, parse_request, summarize_text, verbatim_key
from .fit import clip_middle, fit_blocks
from .llm import Attempt, complete, is_extractive
from .prompts import build_prompt_messages
from .render import render_blocks

MIN_CONVERSATION_TOKENS = 256
# (system instruction, user instruction, span messages) -> the request messages
InputBuilder = Callable[[str | None, str, list[dict[str, Any]]], list[dict[str, Any]]]


@dataclass
class SummaryResult:
    text: str                       # the summary, reasoning stripped
    model: str                      # the model that produced it (EXTRACTIVE_MODEL when offline)
    extractive: bool                # True when no LLM wrote it
    attempts: list[Attempt]         # every attempt, failed ones included
    prompt_messages: list[dict[str, Any]]     # exactly what was sent
    usage: dict[str, Any] | None              # provider usage of the successful attempt
    input_tokens: int               # tokens of prompt_messages (our count)
    clipped: list[dict[str, Any]] = field(default_factory=list)  # what was clipped or omitted to fit the input
    request_mode: str = "standalone"  # "standalone" | "cache_safe" (forked parent request)
    request_note: str | None = None   # why that mode (set when a cache-safe request was considered)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "model": self.model, "extractive": self.extractive,
                "attempts": [a.to_dict() for a in self.attempts], "prompt_messages": self.prompt_messages,
                "usage": self.usage, "input_tokens": self.input_tokens, "clipped": self.clipped,
                "request_mode": self.request_mode, "request_note": self.request_note}


def summarizer_window(settings: SummarizerPolicy, fallback_window: int) -> int:
    return settings.context_window or model_window(settings.model) or fallback_window


def input_budget(settings: SummarizerPolicy, fallback_window: int) -> int:
    """Tokens the whole summarizer prompt may use. The summary's own generation keeps its
    room in the window (``params.max_tokens``, else about the word budget; never more
    than half the window), whatever ``input_share`` says."""
    window = summarizer_window(settings, fallback_window)
    budget = int(window * settings.input_share)
    budget = min(budget, max(window // 2, window - output_reserve(settings)))
    if settings.input_max_tokens:
        budget = min(budget, settings.input_max_tokens)
    return max(1, budget)


def _prompt_tokens(messages: list[dict[str, Any]], count_text: Callable[[str], int]) -> int:
    def text(content: Any) -> str:
        if isinstance(content, list):  # content parts (an input_builder may send them)
            return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        return content or ""
    return sum(count_text(text(m.get("content"))) + MESSAGE_OVERHEAD for m in messages)


def summarize(span: list[Message], settings: SummarizerPolicy, *, previous_summary: str | None = None,
              counter: MessageCounter,
              fallback_window: int = 128_000, replaced_tokens: int,
              on_event: Callable[[dict[str, Any]], Any] | None = None, language: str = "en",
              tool_call_formatter: Callable[[str, str], str | None] | None = None,
              tool_result_formatter: Callable[[str, str], str | None] | None = None,
              sleep: Callable[[float], None] | None = None,
              pre_summary: Callable[[str], str] | None = None,
              input_builder: InputBuilder | None = None,
              abort_on_hook_error: bool = False,
              parent_request: dict[str, Any] | None = None,
              kept_verbatim: tuple[str, ...] = ()) -> SummaryResult:
    """Summarize ``span`` (folding in ``previous_summary``) with ``settings``.

    ``replaced_tokens`` is the size of everything the summary will replace; with
    ``settings.require_shrink`` a summary of that many tokens or more is rejected.
    ``on_event`` receives one ``generate_summary`` event per attempt. Raises
    :class:`~compaction.errors.SummaryError` (with ``.attempts``) when no usable
    summary comes back.

    Hooks (see :mod:`compaction.hooks`): ``pre_summary`` rewrites the fitted transcript,
    ``input_builder(system_instruction, user_instruction, span_messages)`` builds the
    request messages. A failing hook is reported as a ``hook_error`` event and skipped,
    or raises CompactionError with ``abort_on_hook_error``.

    ``parent_request`` (``{"messages": [...], "tools": [...]}``, the agent's last model
    request) switches to the cache-safe request when ``settings.cache_safe`` is on: the
    parent's messages and tools unchanged plus one compacting instruction (see
    :mod:`.cache_safe`); without it, or when it cannot be used, the standalone request.

    ``kept_verbatim``: the user messages of the span the context keeps word for word after the
    summary (the finalize step re-inserts them). When the task message is one of them, the
    summary points to it instead of restating it: the default prompt says so, and the
    extractive summarizer gets them as request metadata.
    """
    if getattr(settings, "cache_safe", False):
        primary_extractive = is_extractive(settings.model or EXTRACTIVE_MODEL)
        cs = plan(parent_request, span, settings, counter=counter,
                  window=summarizer_window(settings, fallback_window), language=language,
                  extractive=primary_extractive)
        if on_event is not None:
            on_event({"type": "summary_request", "mode": cs.mode, "reason": cs.reason})
        if cs.cache_safe:
            return _summarize_cache_safe(cs, span, settings, previous_summary=previous_summary, counter=counter,
                                         fallback_window=fallback_window, replaced_tokens=replaced_tokens,
                                         on_event=on_event, language=language,
                                         tool_call_formatter=tool_call_formatter,
                                         tool_result_formatter=tool_result_formatter, sleep=sleep,
                                         pre_summary=pre_summary, input_builder=input_builder,
                                         abort_on_hook_error=abort_on_hook_error, kept_verbatim=kept_verbatim)
        result = _summarize_standalone(span, settings, previous_summary=previous_summary, counter=counter,
                                       fallback_window=fallback_window, replaced_tokens=replaced_tokens,
                                       on_event=on_event, language=language,
                                       tool_call_formatter=tool_call_formatter,
                                       tool_result_formatter=tool_result_formatter, sleep=sleep,
                                       pre_summary=pre_summary, input_builder=input_builder,
                                       abort_on_hook_error=abort_on_hook_error, kept_verbatim=kept_verbatim)
        result.request_note = cs.reason
        return result
    return _summarize_standalone(span, settings, previous_summary=previous_summary, counter=counter,
                                 fallback_window=fallback_window, replaced_tokens=replaced_tokens,
                                 on_event=on_event, language=language, tool_call_formatter=tool_call_formatter,
                                 tool_result_formatter=tool_result_formatter, sleep=sleep,
                                 pre_summary=pre_summary, input_builder=input_builder,
                                 abort_on_hook_error=abort_on_hook_error, kept_verbatim=kept_verbatim)


def task_kept(span: list[Message], kept_verbatim: tuple[str, ...]) -> bool:
    """Is the span's first user message (the task, or its re-inserted copy) kept word for word?"""
    if not kept_verbatim:
        return False
    first = next((m for m in span if m.role == "user" and m.provenance not in (Provenance.SUMMARY,
                                                                               Provenance.ACKNOWLEDGEMENT)), None)
    if first is None:
        return False
    keys = {verbatim_key(t) for t in kept_verbatim}
    text = "\n".join(iter_text(first.raw.get("content")))
    # a re-inserted copy carries the engine's marker line first; the user's words follow it
    return verbatim_key(text) in keys or verbatim_key(text.split("\n", 1)[-1]) in keys


def extractive_again(prompt_messages: list[dict[str, Any]], kept_verbatim: tuple[str, ...], max_words: int,
                     language: str) -> str:
    """The offline summary of the same request with another ``kept_verbatim``: what the
    extractive provider would answer (no model is called again, no attempt is counted)."""
    conversation, previous, _ = parse_request(prompt_messages)
    return summarize_text(conversation, previous, max_words, language, kept_verbatim)


def run_hook(name: str, fn: Callable[..., Any], args: tuple[Any, ...], on_event: Callable[[dict[str, Any]], Any] | None, abort: bool) -> Any:
    """Call a user hook; None when it failed and failures are ignored."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - hooks are user code
        if abort:
            raise CompactionError(f"{name} hook failed: {exc}") from exc
        if on_event is not None:
            on_event({"type": "hook_error", "hook": name, "error": repr(exc)})
        return None


def _shrink_check(settings: SummarizerPolicy, count_text: Callable[[str], int], replaced_tokens: int) -> Callable[[str], str | None]:
    def check(text: str) -> str | None:
        if not text.strip():
            return "empty summary"
        if settings.require_shrink:
            size = count_text(text)
            if size >= replaced_tokens:
                return (f"summary is not smaller than what it replaces "
                        f"({size} tokens >= {replaced_tokens} tokens)")
        return None
    return check


def _valid_messages(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(m, dict) and m.get("role") in ("system", "developer", "user", "assistant")
                    and "content" in m for m in value))


def _summarize_cache_safe(cs: CacheSafePlan, span: list[Message], settings: SummarizerPolicy, *, replaced_tokens: int,
                          counter: MessageCounter, on_event: Callable[[dict[str, Any]], Any] | None,
                          sleep: Callable[[float], None] | None, **standalone: Any) -> SummaryResult:
    """The forked request; models that cannot take it (extractive failovers) get the
    standalone request afterwards if every other model failed."""
    failovers = [m for m in settings.failover_models if m]
    llm_failovers = [m for m in failovers if not is_extractive(m)]
    offline = [m for m in failovers if is_extractive(m)]
    llm_settings = settings.model_copy(update={"params": {**(settings.params or {}), **cs.extra_params()},
                                               "failover_models": llm_failovers})
    check = _shrink_check(settings, counter.count_text, replaced_tokens)
    try:
        result = complete(cs.messages, llm_settings, check=check, on_event=on_event, sleep_fn=sleep,
                          extractive_words=settings.max_summary_words,
                          language=standalone.get("language", "en"))
    except SummaryError as exc:
        if not offline:
            raise
        if on_event is not None:
            on_event({"type": "summary_request", "mode": "standalone",
                      "reason": "every model failed on the cache-safe request; trying the offline failover"})
        offset = len(exc.attempts)

        def renumber(event: dict[str, Any]) -> None:
            if on_event is not None:
                on_event({**event, "attempt": event.get("attempt", 0) + offset} if "attempt" in event else event)

        fallback_settings = settings.model_copy(update={"model": offline[0], "failover_models": offline[1:]})
        try:
            later = _summarize_standalone(span, fallback_settings, replaced_tokens=replaced_tokens, counter=counter,
                                          on_event=renumber, sleep=sleep, **standalone)
        except SummaryError as exc2:
            for a in exc2.attempts:
                a.number += offset
            raise SummaryError(str(exc2), attempts=list(exc.attempts) + list(exc2.attempts)) from exc2
        for a in later.attempts:
            a.number += offset
            a.phase = "failover"
        later.attempts = list(exc.attempts) + later.attempts
        later.request_note = "the cache-safe request failed on every model; the offline failover summarized " \
                             "the standalone request"
        return later
    return SummaryResult(text=result.text, model=result.model, extractive=is_extractive(result.model),
                         attempts=result.attempts, prompt_messages=cs.messages, usage=result.usage,
                         input_tokens=cs.input_tokens, clipped=[], request_mode="cache_safe", request_note=cs.reason)


def _summarize_standalone(span: list[Message], settings: SummarizerPolicy, *, previous_summary: str | None,
                          counter: MessageCounter,
                          fallback_window: int, replaced_tokens: int, on_event: Callable[[dict[str, Any]], Any] | None,
                          language: str, tool_call_formatter: Callable[[str, str], str | None] | None,
                          tool_result_formatter: Callable[[str, str], str | None] | None,
                          sleep: Callable[[float], None] | None, pre_summary: Callable[[str], str] | None,
                          input_builder: InputBuilder | None, abort_on_hook_error: bool,
                          kept_verbatim: tuple[str, ...] = ()) -> SummaryResult:
    count_text = counter.count_text
    task_is_kept = task_kept(span, kept_verbatim)
    hooked: dict[str, str] = {}

    def transcript(text: str) -> str:
        """The fitted transcript after the pre_summary hook (run once per distinct text)."""
        if pre_summary is None:
            return text
        if text not in hooked:
            out = run_hook("pre_summary", pre_summary, (text,), on_event, abort_on_hook_error)
            hooked[text] = out if isinstance(out, str) and out.strip() else text
        return hooked[text]

    blocks = render_blocks(span, tool_call_formatter=tool_call_formatter,
                           tool_result_formatter=tool_result_formatter)
    previous = previous_summary.strip() if previous_summary and previous_summary.strip() else None
    if not blocks and previous is None:
        raise SummaryError("nothing to summarize: the span holds no renderable message", attempts=[])

    budget = input_budget(settings, fallback_window)
    clipped: list[dict[str, Any]] = []
    overhead = _prompt_tokens(build_prompt_messages("", settings, previous_summary=previous, language=language,
                                               task_kept=task_is_kept),
                              count_text)
    if previous is not None and overhead > budget // 2:
        before = count_text(previous)
        keep_tokens = max(1, budget // 3)
        chars_before = len(previous)
        keep_chars = int(chars_before * keep_tokens / max(1, before))
        previous, cut = clip_middle(previous, keep_chars)
        clipped.append({"kind": "previous_summary", "tokens_before": before, "tokens_after": count_text(previous),
                        "chars_before": chars_before, "chars_clipped": cut})
        overhead = _prompt_tokens(build_prompt_messages("", settings, previous_summary=previous, language=language,
                                               task_kept=task_is_kept),
                                  count_text)
    room = max(budget - overhead, min(MIN_CONVERSATION_TOKENS, budget))
    for _ in range(4):
        fitted = fit_blocks(blocks, room, count_text, settings.input_strategy)
        messages = build_prompt_messages(transcript(fitted.text), settings, previous_summary=previous,
                                         language=language, task_kept=task_is_kept)
        input_tokens = _prompt_tokens(messages, count_text)
        # Tokens can merge differently where the transcript meets the template: re-fit if over.
        if input_tokens <= budget or room <= MIN_CONVERSATION_TOKENS:
            break
        room = max(MIN_CONVERSATION_TOKENS, room - (input_tokens - budget) - 2)
    clipped.extend(fitted.clipped)
    if input_builder is not None:
        system_instruction = messages[0]["content"] if len(messages) > 1 else None
        span_messages = [m.raw for m in span if m.provenance not in (Provenance.SUMMARY, Provenance.ACKNOWLEDGEMENT)]
        built = run_hook("input_builder", input_builder, (system_instruction, messages[-1]["content"], span_messages),
                         on_event, abort_on_hook_error)
        if built is not None and not _valid_messages(built):
            problem = "input_builder must return a non-empty list of message dicts with a role and content"
            if abort_on_hook_error:
                raise CompactionError(f"input_builder hook failed: {problem}")
            if on_event is not None:
                on_event({"type": "hook_error", "hook": "input_builder", "error": problem})
            built = None
        if built is not None:
            messages = built
            input_tokens = _prompt_tokens(messages, count_text)

    check = _shrink_check(settings, count_text, replaced_tokens)

    # The extractive provider gets the budget as metadata (0 = none stated: it uses its own cap).
    result = complete(messages, settings, check=check, on_event=on_event, sleep_fn=sleep,
                      extractive_words=settings.max_summary_words, language=language,
                      kept_verbatim=kept_verbatim)
    return SummaryResult(text=result.text, model=result.model, extractive=is_extractive(result.model),
                         attempts=result.attempts, prompt_messages=messages, usage=result.usage,
                         input_tokens=input_tokens, clipped=clipped)


__all__ = ["SummaryResult", "summarize", "input_budget", "summarizer_window", "EXTRACTIVE_MODEL", "task_kept",
           "extractive_again"]
