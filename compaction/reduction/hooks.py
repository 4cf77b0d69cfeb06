"""Python callables that customise reduction (they are code, so they live outside the policy).

- ``rewrite(call_message, result_messages)``: runs on every tool-call group in the clearing
  range before per-result clearing (Eino's ClearMessageRewriter). Return ``None`` to leave
  the group to normal clearing, or the list of messages that replaces the group: input
  :class:`Message` objects are kept as they are; a Message with an input's id but a new
  ``raw`` is that input edited; plain dicts are new messages (for example a one-line
  reminder instead of a file-write call and its echo). Inputs left out are archived. The
  output must keep every call paired with its result, or it is ignored with a warning.
- ``post_process(result)``: runs after a before-call reduction that changed something;
  return a replacement :class:`ReductionResult` or ``None`` to keep it.
- ``truncate_handlers[tool]`` / ``clear_handlers[tool]``: per-tool handlers called with a
  :class:`ToolDetail`. Return ``None`` for the default behaviour, ``False`` to leave the
  result untouched, a string or a content list to use as the new content, or a
  :class:`Replacement` (clear handlers may also replace the call's arguments). The engine
  still archives the original and marks the message.

Hooks must not mutate the messages they receive; edits are computed on a copy and may be
abandoned (clear-at-least guard).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message
from .marks import Phase


@dataclass
class ToolDetail:
    message: Message                 # the tool result as it is now
    tool_name: str | None
    tool_call_id: str | None
    arguments: str | None            # the call's arguments string, when the call is in context
    phase: Phase
    handle: str                      # archive handle the original will be stored under
    tokens: int
    language: str


@dataclass
class Replacement:
    content: Any = None              # new content (str or parts); None = the default placeholder
    arguments: str | None = None     # new arguments string for the call (clear handlers only)


@dataclass
class ReductionHooks:
    rewrite: Callable[[Message, list[Message]], list[Message | dict[str, Any]] | None] | None = None
    post_process: Callable[[Any], Any] | None = None
    truncate_handlers: dict[str, Callable[[ToolDetail], Any]] = field(default_factory=dict)
    clear_handlers: dict[str, Callable[[ToolDetail], Any]] = field(default_factory=dict)

    @classmethod
    def coerce(cls, hooks: ReductionHooks | dict[str, Any] | None) -> ReductionHooks:
        if hooks is None:
            return cls()
        if isinstance(hooks, cls):
            return hooks
        if isinstance(hooks, dict):
            unknown = set(hooks) - {"rewrite", "post_process", "truncate_handlers", "clear_handlers"}
            if unknown:
                raise TypeError(f"unknown reduction hook(s): {', '.join(sorted(unknown))}")
            return cls(**hooks)
        raise TypeError(f"hooks must be ReductionHooks, a dict or None, not {type(hooks).__name__}")
