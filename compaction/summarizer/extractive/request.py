"""The summary request read back: the transcript, the previous summary and the word budget.

The prompt is built by :mod:`compaction.summarizer.prompts`; this reads it back from
the tags of the default prompt (``<previous_summary>``, ``<conversation>``) and from
its "at most N words" sentence. A custom prompt without those tags is taken whole as
the transcript.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from ..prompts import (
    CONVERSATION_CLOSE,
    CONVERSATION_OPEN,
    NO_PREVIOUS_SUMMARY,
    PREVIOUS_CLOSE,
    PREVIOUS_OPEN,
)

_BUDGET = re.compile(r"at most (\d+) words")


def _field(message: object, key: str) -> object:
    """A field of a prompt message, given as a dict or as an object (litellm's Message)."""
    return message.get(key) if isinstance(message, dict) else getattr(message, key, None)


def _text(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""


def _conversation_after(user_text: str, start: int) -> str:
    c_close = user_text.rfind("\n" + CONVERSATION_CLOSE)
    return user_text[start:c_close if c_close >= start else len(user_text)]


def parse_request(messages: Iterable[object]) -> tuple[str, str | None, int | None]:
    """(conversation text, previous summary or None, word budget or None) from prompt messages."""
    user_text = ""
    system_text = ""
    for msg in messages:
        content = _text(_field(msg, "content"))
        role = _field(msg, "role")
        if role == "user" and content:
            user_text = content
        elif role == "system" and content:
            system_text = content
    previous: str | None = None
    conversation = user_text
    p_open = user_text.find(PREVIOUS_OPEN + "\n")
    joint = "\n" + PREVIOUS_CLOSE + "\n\n" + CONVERSATION_OPEN + "\n"
    if p_open >= 0:
        p_close = user_text.find(joint, p_open)
        if p_close >= 0:
            previous = user_text[p_open + len(PREVIOUS_OPEN) + 1:p_close]
            conversation = _conversation_after(user_text, p_close + len(joint))
    else:
        c_open = user_text.find(CONVERSATION_OPEN + "\n")
        if c_open >= 0:
            conversation = _conversation_after(user_text, c_open + len(CONVERSATION_OPEN) + 1)
    if previous is not None and previous.strip() in ("", NO_PREVIOUS_SUMMARY):
        previous = None
    found = _BUDGET.search(user_text[:20000]) or _BUDGET.search(system_text)
    return conversation, previous, int(found.group(1)) if found else None
