"""Errors the engine raises. Each names what is wrong and where."""
from __future__ import annotations


class CompactionError(Exception):
    """Base class for every error raised by the engine."""


class SessionValidationError(CompactionError, ValueError):
    """A session (list of messages) is not valid OpenAI chat format.

    ``index`` is the position of the offending message (None for session-level faults),
    ``line`` the line number in a JSONL file,
    ``fault`` a short machine-readable code, ``str(err)`` a sentence for humans.
    """

    def __init__(self, message: str, *, index: int | None = None, fault: str = "invalid", source: str | None = None,
                 line: int | None = None):
        self.index = index
        self.fault = fault
        self.source = source
        self.line = line
        where = []
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

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class SummaryError(CompactionError):
    """Summary generation failed after every retry and failover; the input is untouched."""

    def __init__(self, message: str, attempts: list | None = None):
        self.attempts = attempts or []
        super().__init__(message)


class ArchiveError(CompactionError):
    """An archive entry is missing, unreadable or does not match its content hash."""
