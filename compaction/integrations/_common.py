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


def check_new_messages(integration: str, tracker: CallTracker, raws: Sequence[RawMessage], start: int) -> None:
    """Validate ``raws`` as the messages that follow position ``start - 1`` of a conversation
    whose tool calls ``tracker`` follows, without touching ``tracker``: shape first, then
    pairing (a result answers an open call; a new turn leaves none unanswered; call ids are
    unique). Costs O(len(raws)), whatever the conversation's length."""
    opened: dict[str, int] = {}    # calls made in this batch, still open
    answered: set[str] = set()     # calls open before this batch that the batch answers
    new_ids: set[str] = set()
    for k, raw in enumerate(raws):
        index = start + k
        try:
            validate_message(raw, index)
        except SessionValidationError as exc:
            raise IntegrationError.wrap(integration, exc) from None
        role = raw["role"]
        if role == "tool":
            cid = raw["tool_call_id"]
            if cid in opened:
                del opened[cid]
            elif cid in tracker.open and cid not in answered:
                answered.add(cid)
            else:
                seen = cid in tracker.seen or cid in new_ids
                why = "was already answered" if seen else "matches no earlier tool call"
                raise IntegrationError(integration, f"orphan tool result: tool_call_id {cid!r} {why}",
                                       index=index, fault="orphan_tool_result")
            continue
        still_open = next((c for c in tracker.open if c not in answered), None)
        if still_open is not None or opened:
            cid, owner = (still_open, tracker.open[still_open]) if still_open is not None else next(iter(opened.items()))
            raise IntegrationError(integration, f"tool call {cid!r} of message {owner} has no result before the "
                                                f"next {role} message", index=index, fault="unanswered_tool_call")
        for call in raw.get("tool_calls") or []:
            cid = call["id"]
            if cid in tracker.seen or cid in new_ids:
                raise IntegrationError(integration, f"duplicate tool call id {cid!r}", index=index,
                                       fault="duplicate_call_id")
            new_ids.add(cid)
            opened[cid] = index
