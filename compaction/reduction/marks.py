"""The mark a reduced message carries: what reduction did to it and where its original went.

A context stores the mark as a plain dict in ``Message.meta["reduction"]`` (sessions, the
dashboard and saved contexts keep it that way, and ``Message.reduction`` returns it);
:class:`ReductionMark` is its typed form, read with :func:`mark_of` and written back with
:meth:`ReductionMark.to_dict`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..messages import Message

MarkKind = Literal["cleared", "truncated", "rewritten"]
# Where an edit happened: on arrival, in threshold clearing, or in one of the passes.
Phase = Literal["arrival", "clearing", "pass0", "pass1", "pass2"]
# What a "cleared" mark replaced: a tool result's content or a call's arguments.
MarkTarget = Literal["result", "arguments"]

_KINDS: dict[str, MarkKind] = {kind: kind for kind in get_args(MarkKind)}
_KNOWN_KEYS = frozenset({"kind", "archive_ref", "phase", "tool_call_id", "tool_name", "original_chars",
                         "original_tokens", "field", "cleared_calls", "rewritten", "source_ids"})


@dataclass(frozen=True)
class ReductionMark:
    """``archive_ref`` names the archive entry holding the untouched message (the first
    edit's entry: a message reduced twice keeps pointing at its true original).
    ``original_chars``/``original_tokens`` describe that original and are None only on
    messages a rewrite hook wrote (``kind="rewritten"``)."""

    kind: MarkKind
    archive_ref: str | None
    phase: Phase
    tool_call_id: str | None = None
    tool_name: str | None = None
    original_chars: int | None = None
    original_tokens: int | None = None
    target: MarkTarget = "result"
    cleared_calls: tuple[str, ...] = ()   # target "arguments": the calls whose arguments were archived
    rewritten: bool = False               # the rewrite hook edited this message
    source_ids: tuple[str, ...] = ()      # kind "rewritten": ids of the group the hook replaced
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this version does not know, kept as stored

    def to_dict(self) -> dict[str, Any]:
        """The stored form; each shape has exactly the keys contexts have always held."""
        out: dict[str, Any]
        if self.kind == "rewritten":
            out = {"kind": self.kind, "archive_ref": self.archive_ref, "phase": self.phase,
                   "source_ids": list(self.source_ids)}
        elif self.target == "arguments":
            out = {"kind": self.kind, "field": "arguments", "archive_ref": self.archive_ref,
                   "tool_call_id": self.tool_call_id, "tool_name": self.tool_name,
                   "cleared_calls": list(self.cleared_calls), "phase": self.phase,
                   "original_chars": self.original_chars, "original_tokens": self.original_tokens}
        else:
            out = {"kind": self.kind, "archive_ref": self.archive_ref, "tool_call_id": self.tool_call_id,
                   "tool_name": self.tool_name, "phase": self.phase, "original_chars": self.original_chars,
                   "original_tokens": self.original_tokens}
            if self.rewritten:
                out["rewritten"] = True
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReductionMark:
        kind = _KINDS.get(str(data.get("kind")))
        if kind is None:
            raise ValueError(f"unknown reduction mark kind {data.get('kind')!r}")
        return cls(kind=kind, archive_ref=data.get("archive_ref"), phase=data.get("phase", "clearing"),
                   tool_call_id=data.get("tool_call_id"), tool_name=data.get("tool_name"),
                   original_chars=data.get("original_chars"), original_tokens=data.get("original_tokens"),
                   target="arguments" if data.get("field") == "arguments" else "result",
                   cleared_calls=tuple(data.get("cleared_calls") or ()), rewritten=bool(data.get("rewritten")),
                   source_ids=tuple(data.get("source_ids") or ()),
                   extra={k: v for k, v in data.items() if k not in _KNOWN_KEYS})


def mark_of(msg: Message) -> ReductionMark | None:
    """The typed reduction mark of ``msg`` (None when reduction never touched it)."""
    raw = msg.reduction
    return ReductionMark.from_dict(raw) if raw else None
