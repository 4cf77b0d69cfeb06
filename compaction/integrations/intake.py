"""Checking a batch of new messages against a live context before any of it is appended.

An integration feeds the engine what the framework produced since the last model call.
When message 3 of 5 is at fault, nothing of the batch may reach the context (the engine's
state and the framework's state stay as they were), so the whole batch is checked first
against a copy-on-write view of the context's tool-call bookkeeping: O(batch), not
O(history).
"""
from __future__ import annotations

from collections.abc import Sequence

from ..errors import Fault, SessionValidationError
from ..messages import CallTracker, RawMessage, validate_message


class IntegrationInputError(SessionValidationError):
    """A message the framework produced that the engine cannot take.

    ``integration`` names the adapter, ``index`` the message's position in the framework's
    own message list, ``fault`` the machine-readable reason; ``str(err)`` says all three."""

    def __init__(self, integration: str, index: int | None, fault: Fault, reason: str) -> None:
        self.integration = integration
        self.reason = reason
        where = f"message {index} of the agent's messages" if index is not None else "the agent's messages"
        super().__init__(f"{reason} (fault: {fault})", index=index, fault=fault, source=f"{integration}: {where}")
        # SessionValidationError prefixes "message N" itself; keep one readable sentence.
        self.args = (f"{integration}: {where}: {reason} (fault: {fault})",)

    def __str__(self) -> str:
        return str(self.args[0])


class _SeenOverlay(set[str]):
    """The call ids seen so far: the context's set, read-only, plus the batch's own."""

    def __init__(self, base: set[str]) -> None:
        super().__init__()
        self._base = base

    def __contains__(self, item: object) -> bool:
        return super().__contains__(item) or item in self._base


def check_batch(integration: str, tracker: CallTracker, raws: Sequence[RawMessage], first_index: int) -> None:
    """Raise :class:`IntegrationInputError` for the first message of ``raws`` that a live
    context whose call bookkeeping is ``tracker`` would refuse; ``first_index`` is the position of ``raws[0]`` in the
    framework's list (the index the error names). Nothing is changed."""
    probe = CallTracker()
    probe.seen = _SeenOverlay(tracker.seen)
    probe.open = dict(tracker.open)  # calls awaiting a result: a handful, not the history
    probe.open_owner = tracker.open_owner
    for offset, raw in enumerate(raws):
        index = first_index + offset
        try:
            validate_message(raw, index)
            probe.feed(raw, index)
        except SessionValidationError as exc:
            raise IntegrationInputError(integration, index, exc.fault, _reason(exc)) from None


def _reason(exc: SessionValidationError) -> str:
    """The engine's sentence without its own "message N: " prefix (the index is renamed)."""
    text = str(exc)
    prefix = f"message {exc.index}: "
    return text[len(prefix):] if text.startswith(prefix) else text
