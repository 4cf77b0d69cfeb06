"""Named hooks: Python callables a policy can refer to by name.

Policies are JSON, hooks are code. Code registers a callable under a kind and a name;
a policy (or the dashboard, offering the registered names as choices) picks it by name
in its ``hooks`` section, and :class:`compaction.Compactor` resolves the names when it
is built. A hook passed directly in :class:`compaction.Hooks` wins over a policy name.

Kinds and signatures:

``pre_summary``           ``(text) -> text``: rewrites the transcript the summarizer reads
                          (after it was fitted to the input budget). Not applied in
                          cache-safe mode, where the summarizer reads no transcript.
``post_summary``          ``(text) -> text``: rewrites the summary before it is written.
``input_builder``         ``(system_instruction, user_instruction, span_messages) -> messages``:
                          full control over the messages sent to the summarizer.
                          ``system_instruction`` is the filled system prompt or None,
                          ``user_instruction`` the filled user prompt (transcript included),
                          ``span_messages`` the OpenAI dicts being summarized.
``tool_call_formatter``   ``(tool_name, arguments) -> str | None``: how a call appears in the
                          transcript; None keeps the default line, ``""`` leaves it out.
``tool_result_formatter`` ``(tool_name, content) -> str | None``: same for a tool result.
``user_message_filter``   ``(message, context) -> bool`` (Eino's ``Filter``): whether an evicted
                          user message (OpenAI dict) may be re-inserted after the summary;
                          ``context`` is the whole context being compacted. Every filter the
                          policy lists must accept a message for it to be re-inserted.

Returning an empty string (or None) from a pre/post hook keeps the text unchanged. A hook
that raises is logged as a ``hook_error`` event and ignored, unless the policy's
``hooks.abort_on_error`` (or ``Hooks.abort_on_hook_error``) asks to abort the run.

    from compaction.hooks import register_hook

    @register_hook("pre_summary", "drop_stack_traces")
    def drop_stack_traces(text: str) -> str:
        ...

    Policy.load({"hooks": {"pre_summary": ["redact_secrets", "drop_stack_traces"]}})
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import CompactionError, PolicyError

KINDS = ("pre_summary", "post_summary", "input_builder", "tool_call_formatter", "tool_result_formatter",
         "user_message_filter")
LIST_KINDS = ("pre_summary", "post_summary", "user_message_filter")  # a policy names several, applied in order
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


class UnknownHookError(CompactionError, KeyError):
    """No hook of that kind is registered under that name."""

    def __init__(self, kind: str, name: str):
        self.kind, self.name = kind, name
        known = ", ".join(hook_names(kind)) or "none"
        super().__init__(f"no {kind} hook named {name!r} is registered (registered: {known})")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class HookInfo:
    kind: str
    name: str
    fn: Callable[..., Any]
    description: str
    builtin: bool

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "description": self.description, "builtin": self.builtin}


_lock = threading.Lock()
_registry: dict[str, dict[str, HookInfo]] = {kind: {} for kind in KINDS}


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown hook kind {kind!r}; one of {', '.join(KINDS)}")


def register_hook(kind: str, name: str, fn: Callable[..., Any] | None = None, *, description: str = "",
                  replace: bool = False, builtin: bool = False) -> Callable[..., Any]:
    """Register ``fn`` as the ``kind`` hook called ``name``; returns ``fn``.

    Without ``fn`` it works as a decorator. Registering a taken name raises ValueError
    unless ``replace=True``. The description (else the function's docstring's first
    line) is what the dashboard shows next to the name.
    """
    _check_kind(kind)
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"hook name {name!r} must be 1-64 characters: letters, digits, '_', '.', ':' or '-'")

    def add(func: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(func):
            raise TypeError(f"the {kind} hook {name!r} must be callable")
        doc = description or ((func.__doc__ or "").strip().splitlines() or [""])[0]
        with _lock:
            if name in _registry[kind] and not replace:
                raise ValueError(f"a {kind} hook named {name!r} is already registered; pass replace=True to swap it")
            _registry[kind][name] = HookInfo(kind, name, func, doc, builtin)
        return func

    return add if fn is None else add(fn)


def unregister_hook(kind: str, name: str) -> None:
    _check_kind(kind)
    with _lock:
        _registry[kind].pop(name, None)


def get_hook(kind: str, name: str) -> Callable[..., Any]:
    """The callable registered as ``kind``/``name``; UnknownHookError when there is none."""
    _check_kind(kind)
    with _lock:
        info = _registry[kind].get(name)
    if info is None:
        raise UnknownHookError(kind, name)
    return info.fn


def hook_names(kind: str) -> list[str]:
    _check_kind(kind)
    with _lock:
        return sorted(_registry[kind])


def list_hooks(kind: str | None = None) -> list[dict[str, Any]]:
    """Registered hooks as dicts (kind, name, description, builtin), for pickers and APIs."""
    kinds = KINDS if kind is None else (kind,)
    for k in kinds:
        _check_kind(k)
    with _lock:
        return [info.to_dict() for k in kinds for _, info in sorted(_registry[k].items())]


def chain(fns: list[Callable[[str], str]]) -> Callable[[str], str] | None:
    """One text->text callable applying ``fns`` in order (None for an empty list)."""
    fns = [f for f in fns if f is not None]
    if not fns:
        return None
    if len(fns) == 1:
        return fns[0]

    def chained(text: str) -> str:
        for f in fns:
            out = f(text)
            if isinstance(out, str) and out.strip():
                text = out
        return text

    return chained


def resolve(settings: Any) -> dict[str, Any]:
    """Callables named by a policy's ``hooks`` section: pre/post as lists, others single
    (None when unset). Raises PolicyError naming the field of an unknown name."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        value = getattr(settings, kind, None)
        names = value if isinstance(value, list) else ([value] if value else [])
        fns = []
        for i, name in enumerate(names):
            try:
                fns.append(get_hook(kind, name))
            except UnknownHookError as exc:
                field = f"hooks.{kind}" + (f".{i}" if isinstance(value, list) else "")
                raise PolicyError(str(exc), field=field) from None
        out[kind] = fns if kind in LIST_KINDS else (fns[0] if fns else None)
    return out


# -- built-in hooks ---------------------------------------------------------------------

REDACTED = "[REDACTED]"

_SECRET_PATTERNS = [
    # PEM private keys, whole block
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    # provider tokens with recognisable shapes
    re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JWT
]
# "Authorization: Bearer x", "password=x", "api_key": "x" ... : keep the key, hide the value
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{12,}")
_KEY_VALUE = re.compile(
    r"""(?ix)
    (?P<key>["']?[\w.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|client[_-]?secret)["']?)
    (?P<sep>\s*[:=]\s*)
    (?P<quote>["']?)
    (?P<value>[^\s"',;}&]{4,})  # '&' ends a value: the next query parameter is not the secret
    (?P=quote)""")
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^\s:/@]+):(?P<pw>[^\s@/]+)@", re.I)


def redact_secrets(text: str) -> str:
    """Hide API keys, tokens, passwords and private keys (the names stay, the values go)."""
    if not text:
        return text
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _KEY_VALUE.sub(lambda m: f"{m.group('key')}{m.group('sep')}{m.group('quote')}{REDACTED}{m.group('quote')}"
                          if m.group("value") != REDACTED else m.group(0), text)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{REDACTED}@", text)
    return text


_TRAILING = re.compile(r"[ \t]+$", re.M)
_RUNS = re.compile(r"[ \t]{2,}")
_BLANKS = re.compile(r"\n{3,}")


def collapse_whitespace(text: str) -> str:
    """Squeeze runs of spaces and tabs, trailing blanks and more than one empty line."""
    text = _TRAILING.sub("", text)
    text = _RUNS.sub(" ", text)
    return _BLANKS.sub("\n\n", text).strip()


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\r(?!\n)")


def strip_ansi(text: str) -> str:
    """Remove terminal colour codes and carriage-return progress redraws."""
    return _ANSI.sub("", text)


def default_input(system_instruction: str | None, user_instruction: str,
                  span_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The standard request: optional system message, then the prompt with the transcript."""
    messages = [{"role": "system", "content": system_instruction}] if system_instruction else []
    return messages + [{"role": "user", "content": user_instruction}]


def single_user_message(system_instruction: str | None, user_instruction: str,
                        span_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Everything in one user message, for models whose template rejects a system role."""
    parts = [p for p in (system_instruction, user_instruction) if p]
    return [{"role": "user", "content": "\n\n".join(parts)}]


def call_name_only(name: str, arguments: str) -> str:
    """A tool call shows its name but not its arguments."""
    return f"[Called tool: {name}]"


def omit(name: str, value: str) -> str:
    """Leave the item out of the summarizer input."""
    return ""


RESULT_CLIP_CHARS = 2000


def result_head_tail(name: str, content: str) -> str | None:
    """Tool results longer than 2,000 characters keep their beginning and end."""
    if len(content) <= RESULT_CLIP_CHARS:
        return None
    half = RESULT_CLIP_CHARS // 2
    cut = len(content) - 2 * half
    return f"[{name} returned: {content[:half]}\n[... {cut:,} characters not shown ...]\n{content[-half:]}]"


def result_first_line(name: str, content: str) -> str:
    """Each tool result is reduced to its first non-empty line."""
    line = next((ln.strip() for ln in content.splitlines() if ln.strip()), "")
    if len(line) > 300:
        line = line[:297] + "..."
    return f"[{name} returned: {line}]"


BOILERPLATE_REPEATS = 3


def _plain(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text").strip()
    return ""


def drop_repeated_boilerplate(message: dict[str, Any], context: list[dict[str, Any]]) -> bool:
    """Skip a user message sent verbatim 3 or more times (a harness reminder, not a request)."""
    text = _plain(message)
    if not text:
        return True
    repeats = 0
    for other in context:
        if other.get("role") == "user" and _plain(other) == text:
            repeats += 1
            if repeats >= BOILERPLATE_REPEATS:
                return False
    return True


for _kind, _name, _fn in (
    ("pre_summary", "redact_secrets", redact_secrets),
    ("pre_summary", "collapse_whitespace", collapse_whitespace),
    ("pre_summary", "strip_ansi", strip_ansi),
    ("post_summary", "redact_secrets", redact_secrets),
    ("post_summary", "collapse_whitespace", collapse_whitespace),
    ("input_builder", "default", default_input),
    ("input_builder", "single_user_message", single_user_message),
    ("tool_call_formatter", "name_only", call_name_only),
    ("tool_call_formatter", "omit", omit),
    ("tool_result_formatter", "omit", omit),
    ("tool_result_formatter", "head_tail_2000", result_head_tail),
    ("tool_result_formatter", "first_line", result_first_line),
    ("user_message_filter", "drop_repeated_boilerplate", drop_repeated_boilerplate),
):
    register_hook(_kind, _name, _fn, builtin=True, replace=True)
