"""One summary request through litellm, with our own retry, backoff and failover.

The offline extractive model (``extractive/...``) answers in process through the same
loop, without importing litellm (:mod:`.extractive.provider`).

The primary model is tried ``1 + retry.max_retries`` times, then each failover model
the same number of times, in order. Between two tries of one model we sleep an
exponential backoff with jitter (``backoff_base * 2**(k-1)``, capped at
``backoff_cap``, then spread by ``±jitter``); a ``Retry-After`` header, when the
provider sends one, lengthens that sleep up to the same cap. Switching to the next
model does not sleep: it is another deployment, often another provider.

litellm's own retries are switched off (``num_retries=0``, ``max_retries=0`` for
the OpenAI client) so that every HTTP request is one attempt that we record and
report. An attempt fails on any exception (HTTP error, timeout, unreadable body)
and when the returned text is rejected by the caller's check (empty, or not
smaller than what it replaces). Errors that another try cannot fix (400, 401,
403, 404, 422, a missing API key, a deterministic model) move on to the next
model at once.

``sleep`` is a module attribute so tests and callers can replace it; ``summarize``
also takes it as a parameter.
"""
from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .. import _env
from ..errors import SummaryError
from ..policy import RetryPolicy, SummarizerPolicy
from ..redaction import redact, register_secrets
from .extractive import EXTRACTIVE_MODEL
from .extractive.provider import answer as extractive_answer
from .thinking import strip_thinking

sleep: Callable[[float], None] = time.sleep
_rng = random.Random()

EXTRACTIVE_PREFIX = "extractive/"
Phase = Literal["primary", "failover"]
Usage = dict[str, int]   # prompt_tokens, completion_tokens, total_tokens (those the provider reported)
NOT_RETRYABLE_STATUS = frozenset({400, 401, 403, 404, 405, 413, 422})


@dataclass
class Attempt:
    """One request to one model, as shown on the run page and in events."""

    number: int
    phase: Phase
    model: str
    ok: bool
    error: str | None
    latency_ms: float
    usage: Usage | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CallResult:
    text: str
    model: str
    usage: Usage | None
    attempts: list[Attempt]


class Rejected(Exception):
    """The model answered, but the answer is not a usable summary."""

    def __init__(self, message: str, usage: Usage | None = None):
        super().__init__(message)
        self.usage = usage


def is_extractive(model: str | None) -> bool:
    return bool(model) and model is not None and model.startswith(EXTRACTIVE_PREFIX)


def backoff_delay(retry: int, policy: RetryPolicy, rng: random.Random | None = None) -> float:
    """Seconds to wait before the ``retry``-th retry (1-based) of one model."""
    rng = rng or _rng
    delay = min(policy.backoff_cap, policy.backoff_base * (1 << max(0, retry - 1)))
    if policy.jitter:
        delay *= 1 + policy.jitter * rng.uniform(-1.0, 1.0)
    return max(0.0, min(delay, policy.backoff_cap))


def retry_after_seconds(exc: BaseException) -> float | None:
    """The provider's Retry-After (seconds or HTTP date), when the error carries one."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
    except Exception:  # noqa: BLE001 - exotic header containers
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        if when is None:
            return None
        seconds: float = when.timestamp() - time.time()
        return max(0.0, seconds)


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def describe_error(exc: BaseException, timeout: float | None = None) -> str:
    """A one-line error for the attempt log: class, HTTP status, provider message (with every
    known secret and credential-shaped string taken out: a provider or proxy may echo the
    request's key, ``compaction.redaction``)."""
    name = type(exc).__name__
    text = redact(" ".join(str(exc).split()))
    # litellm prefixes "litellm.InternalServerError: InternalServerError: ..."; keep the message.
    for prefix in (f"litellm.{name}: ", f"{name}: "):
        while text.startswith(prefix):
            text = text[len(prefix):]
    if name == "Timeout" or (name.endswith("TimeoutError") and "timed out" in text.lower()):
        head = f"timed out after {timeout:g}s" if timeout else "timed out"
        return f"{head} ({text[:200]})" if text else head
    status = _status(exc)
    label = f"{name} (HTTP {status})" if status else name
    if len(text) > 400:
        text = text[:397] + "..."
    return f"{label}: {text}" if text else label


def _retryable(exc: BaseException, model: str) -> bool:
    if isinstance(exc, Rejected):
        return not is_extractive(model)   # the extractive model gives the same answer again
    if is_extractive(model):
        return False
    status = _status(exc)
    if status in NOT_RETRYABLE_STATUS and type(exc).__name__ != "Timeout":
        return False
    return True


def _usage_dict(response: Any) -> Usage | None:
    usage = getattr(response, "usage", None)
    if usage is None and isinstance(response, dict):
        usage = response.get("usage")
    if usage is None:
        return None
    out: Usage = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(key) if isinstance(usage, dict) else getattr(usage, key, None)
        if isinstance(value, int):
            out[key] = value
    return out or None


def _content(response: Any) -> str:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise Rejected("the response has no choices")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None) if message is not None else None
    if isinstance(content, list):  # some gateways return content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def request_kwargs(model: str, messages: list[dict[str, Any]], settings: SummarizerPolicy, *,
                   extractive_words: int | None = None, language: str = "en",
                   kept_verbatim: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keyword arguments of one ``litellm.completion`` call."""
    kwargs: dict[str, Any] = dict(settings.params or {})
    kwargs.update(model=model, messages=messages, timeout=settings.timeout_seconds,
                  num_retries=0, max_retries=0)
    if is_extractive(model):
        # The offline provider reads its word budget here (and from the prompt as a fallback).
        kwargs["metadata"] = {**(kwargs.get("metadata") or {}), "max_summary_words": extractive_words,
                              "language": language}
        if kept_verbatim:
            kwargs["metadata"]["kept_verbatim"] = list(kept_verbatim)
        return kwargs
    if settings.api_base:
        kwargs["api_base"] = settings.api_base
    if settings.api_key_env:
        key = os.environ.get(settings.api_key_env)
        if key is None:
            raise _MissingKey(f"environment variable {settings.api_key_env} (summarizer.api_key_env) is not set")
        kwargs["api_key"] = key
        register_secrets([key])  # so an upstream echoing it never brings it into an attempt's error
    elif settings.api_base and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
        # A local OpenAI-compatible server (llama.cpp, vLLM) usually needs no key, but the
        # OpenAI client refuses to send a request without one.
        kwargs["api_key"] = "no-key"
    return kwargs


class _MissingKey(Exception):
    status_code = 401


def complete(messages: list[dict[str, Any]], settings: SummarizerPolicy, *, check: Callable[[str], str | None],
             on_event: Callable[[dict[str, Any]], Any] | None = None, sleep_fn: Callable[[float], None] | None = None,
             extractive_words: int | None = None, language: str = "en",
             kept_verbatim: tuple[str, ...] = ()) -> CallResult:
    """Ask the configured models for a summary until one passes ``check``.

    ``check(text)`` returns None for a usable summary or a sentence saying why it is
    not. Raises :class:`SummaryError` carrying every attempt when all models fail.
    """
    primary = settings.model or EXTRACTIVE_MODEL
    models = [primary] + [m for m in settings.failover_models if m]
    policy = settings.retry
    attempts: list[Attempt] = []
    number = 0
    for index, model in enumerate(models):
        phase: Phase = "primary" if index == 0 else "failover"
        wait_hint: float | None = None
        for retry in range(policy.max_retries + 1):
            if retry:
                delay = backoff_delay(retry, policy)
                if wait_hint is not None:
                    delay = max(delay, min(wait_hint, policy.backoff_cap))
                (sleep_fn or sleep)(delay)
            number += 1
            started = time.perf_counter()
            usage: Usage | None = None
            text = ""
            try:
                kwargs = request_kwargs(model, messages, settings, extractive_words=extractive_words,
                                        language=language, kept_verbatim=kept_verbatim)
                if is_extractive(model):
                    # Answered in process: litellm would add only its own bookkeeping.
                    raw, usage = extractive_answer(messages, kwargs["metadata"])
                else:
                    response = _env.litellm().completion(**kwargs)
                    usage = _usage_dict(response)
                    raw = _content(response)
                text = strip_thinking(raw) if settings.strip_thinking else raw.strip()
                if not text and raw.strip():
                    raise Rejected("empty summary: the answer held only reasoning (thinking/analysis) text", usage)
                problem = check(text)
                if problem:
                    raise Rejected(problem, usage)
                error = None
            except Exception as exc:  # noqa: BLE001 - every failure is an attempt to report
                error = str(exc) if isinstance(exc, (Rejected, _MissingKey)) else describe_error(
                    exc, settings.timeout_seconds)
                usage = getattr(exc, "usage", usage)
                retryable = _retryable(exc, model) and not isinstance(exc, _MissingKey)
                wait_hint = retry_after_seconds(exc)
            latency = round((time.perf_counter() - started) * 1000, 3)
            attempt = Attempt(number, phase, model, error is None, error, latency, usage)
            attempts.append(attempt)
            if on_event is not None:
                on_event({"type": "generate_summary", "attempt": number, "phase": phase, "model": model,
                          "error": error, "latency_ms": latency, "usage": usage})
            if error is None:
                return CallResult(text, model, usage, attempts)
            if not retryable:
                break
    last = attempts[-1].error if attempts else "no model configured"
    raise SummaryError(f"no usable summary after {len(attempts)} attempt{'s' if len(attempts) != 1 else ''} "
                       f"across {len(models)} model{'s' if len(models) != 1 else ''}; last error: {last}",
                       attempts=attempts)
