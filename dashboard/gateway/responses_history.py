"""The whole history a ``POST /v1/responses`` request stands for, as chat messages.

The gateway places a request by its whole history (``identity``), so a request that sends
only part of it is completed here first, from what the gateway stored:

- ``previous_response_id``: the history that response answered, then its reply, then this
  request's input (the chain is the session: a client that sends only the new items
  continues it).
- a ``compaction`` item this gateway returned (its id names the session and how many of its
  stored messages it stands for): those messages, then the items after it. Items before it
  are part of what it stands for and are not read again, as with OpenAI's own items.

``instructions`` are the history's first, system, message: given again unchanged they
change nothing; given with other text they replace it (the history then differs from the
stored one, and the gateway starts a new session from it, as it does for an edited message).
A compaction item without that id (one hand-made, or stripped of it) reads back as its
readable summary, a user message; one made elsewhere is refused (``items``)."""
from __future__ import annotations

from typing import Any

from ..selectors.gateway_responses import previous_response, stored_prefix
from .errors import bad_request
from .items import convert, last_reference, to_messages


def _with_instructions(history: list[dict[str, Any]], instructions: str | None) -> list[dict[str, Any]]:
    if not instructions:
        return history
    system = {"role": "system", "content": instructions}
    if history and history[0].get("role") == "system":
        return history if history[0].get("content") == instructions else [system, *history[1:]]
    return [system, *history]


def _stored(project_id: int, previous: str | None, items: Any) -> tuple[list[dict[str, Any]] | None, int]:
    """(the stored history the input continues, or None; the index of the first input item
    after it)."""
    ref = last_reference(items)
    if ref is not None:
        history = stored_prefix(project_id, ref.session, ref.end)
        if history is None:
            raise bad_request(f"input[{ref.index}]: this compaction item stands for messages this project's sessions "
                              f"do not hold (it was made for another project, or edited)", param=f"input[{ref.index}]")
        return history, ref.index + 1
    if previous is None:
        return None, 0
    row = previous_response(project_id, previous)
    if row is None:
        raise bad_request(f"previous_response_id: no response {previous!r} is kept for this project",
                          param="previous_response_id")
    history = stored_prefix(project_id, row.session_id, row.position)
    if history is None:
        raise bad_request(f"previous_response_id: the history of {previous!r} is no longer stored",
                          param="previous_response_id")
    history.append(dict(row.reply))
    return history, 0


def history(project_id: int, items: Any, instructions: str | None, previous: str | None) -> list[dict[str, Any]]:
    """The whole history of a request's ``input`` (``items``), ``instructions`` and
    ``previous_response_id``; a 400 naming the item at fault. The messages are validated
    where the history is placed (``identity``, through ``chat.prepare``), which skips the
    part a stored history already vouches for."""
    stored, start = _stored(project_id, previous, items)
    if stored is None:
        messages = to_messages(items, instructions)
        first_new = 0
    else:
        messages = _with_instructions(stored, instructions)
        first_new = len(messages)
        if isinstance(items, str):
            messages.append({"role": "user", "content": items})
        elif isinstance(items, list):
            convert(items, start, messages)
        else:
            raise bad_request("input: give a string or a list of items", param="input")
        if len(messages) == first_new:
            raise bad_request("input: give at least one new item after what the request continues", param="input")
    return messages
