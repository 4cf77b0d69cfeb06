"""Errors the engine raises. Each names what is wrong and where."""
from __future__ import annotations

from typing import Any, Literal

# Machine-readable reasons a session or an import is rejected (``SessionValidationError.fault``).
Fault = Literal[
    "invalid",
    # session shape (compaction.messages)
    "not_a_list", "not_an_object", "unknown_role", "bad_content", "bad_content_part",
    "misplaced_tool_calls", "bad_tool_calls", "bad_tool_call", "missing_call_id", "malformed_arguments",
    "missing_tool_call_id", "orphan_tool_result", "unanswered_tool_call", "duplicate_call_id",
    "bad_tools", "bad_session", "unencodable_text",
    # import formats (compaction.formats)
    "bad_encoding", "bad_json", "empty", "unknown_format", "many_sessions", "bad_system", "bad_block",
    "bad_image", "bad_document", "bad_tool_result", "bad_record", "too_many_messages",
    # trace exports (compaction.formats: spans, runs, observations)
    "bad_span", "duplicate_span", "no_messages",
    # agent-framework integrations (compaction.integrations)
    "unconvertible_message",
]


class CompactionError(Exception):
    """Base class for every error raised by the engine."""


class SessionValidationError(CompactionError, ValueError):
    """A session (list of messages) is not valid OpenAI chat format.

    ``index`` is the position of the offending message (None for session-level faults),
    ``line`` the line number in a JSONL file,
    ``fault`` a short machine-readable code, ``field`` the path of the offending value inside
    that message when one value is at fault (``content[1].text``), ``str(err)`` a sentence for humans.
    """

    def __init__(self, message: str, *, index: int | None = None, fault: Fault = "invalid", source: str | None = None,
                 line: int | None = None, field: str | None = None) -> None:
        self.index = index
        self.field = field
        self.fault = fault
        self.source = source
        self.line = line
        where: list[str] = []
        if source:
            where.append(source)
        if line is not None:
            where.append(f"line {line}")
        elif index is not None:
            where.append(f"message {index}")
        prefix = (": ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class PolicyError(CompactionError, ValueError):
    """A policy is invalid; ``field`` is the dotted path of the bad setting."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class SummaryError(CompactionError):
    """Summary generation failed after every retry and failover; the input is untouched."""

    # ``attempts`` are the summarizer's attempt records (compaction.summarizer.llm.Attempt);
    # this module sits below the summarizer, so they stay untyped here.
    def __init__(self, message: str, attempts: list[Any] | None = None) -> None:
        self.attempts = attempts or []
        super().__init__(message)


class ArchiveError(CompactionError):
    """An archive entry is missing, unreadable or does not match its content hash."""
