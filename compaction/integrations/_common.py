"""What every integration shares: one error naming the integration, the message and the
fault, and a check of new messages against a conversation that changes nothing on failure.

A framework hands us messages we did not write; when one of them is something the engine
refuses (an orphan tool result, an unknown role), the caller must learn which adapter
refused it, where in the conversation it sits and why, and its own state must be as it was.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..errors import Fault, SessionValidationError
from ..messages import CallTracker, RawMessage, validate_message


class IntegrationError(SessionValidationError):
    """A message a framework produced is not one the engine accepts.

    ``str(err)`` reads ``"<integration>: message <index>: <what is wrong>"``; ``integration``,
    ``index`` (position in the conversation) and ``fault`` (the engine's fault code) are
    attributes too."""

    def __init__(self, integration: str, message: str, *, index: int | None, fault: Fault,
                 field: str | None = None) -> None:
        self.integration = integration
        super().__init__(message, index=index, fault=fault, source=integration, field=field)

    @classmethod
    def wrap(cls, integration: str, exc: SessionValidationError, index: int | None = None) -> IntegrationError:
        """The engine's error, restated for the integration (``index`` overrides the engine's
        own position when the caller numbers messages differently)."""
        text = str(exc)
        if exc.index is not None and text.startswith(f"message {exc.index}: "):
            text = text[len(f"message {exc.index}: "):]
        return cls(integration, text, index=exc.index if index is None else index, fault=exc.fault, field=exc.field)


class _SeenOverlay(set[str]):
    """The call ids seen so far: the conversation's set, read-only, plus the batch's own."""

    def __init__(self, base: set[str]) -> None:
        super().__init__()
        self._base = base

    def __contains__(self, item: object) -> bool:
        return super().__contains__(item) or item in self._base


def check_new_messages(integration: str, tracker: CallTracker, raws: Sequence[RawMessage], start: int) -> None:
    """Validate ``raws`` as the messages at positions ``start``, ``start + 1``, ... of a
    conversation whose tool calls ``tracker`` follows, without touching ``tracker``: the
    engine's own checks (shape, then pairing: a result answers an open call, a new turn
    leaves none unanswered, call ids are unique) run on a copy-on-write view of it, so the
    cost is O(len(raws)) whatever the conversation's length, and a batch refused at its
    third message leaves nothing of its first two behind."""
    probe = CallTracker()
    probe.seen = _SeenOverlay(tracker.seen)
    probe.open = dict(tracker.open)  # calls awaiting a result: a handful, not the history
    probe.open_owner = tracker.open_owner
    for k, raw in enumerate(raws):
        try:
            validate_message(raw, start + k)
            probe.feed(raw, start + k)
        except SessionValidationError as exc:
            raise IntegrationError.wrap(integration, exc) from None
