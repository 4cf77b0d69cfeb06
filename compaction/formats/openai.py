"""``openai``: one session object ``{"id"?, "messages", "tools"?, "title"?, "model"?}`` (the
corpus format; ``meta.model`` is read when ``model`` is absent), a bare list of messages, or a
list of session objects (several sessions; use ``convert_many``). The keys ``id``,
``source``, ``license``, ``meta`` and ``metadata`` are kept as the session's metadata."""
from __future__ import annotations

from typing import Any

from ._base import (
    MAYBE,
    NO,
    SURE,
    Format,
    ImportedSession,
    Options,
    Sample,
    err,
    finish,
    session_metadata,
    too_many,
)


def _detect(sample: Sample) -> int:
    data = sample.value
    if sample.lines:
        return NO
    if isinstance(data, dict):
        return MAYBE if "messages" in data else NO
    if isinstance(data, list):
        items = [x for x in data if isinstance(x, dict)]
        if items and all("messages" in x for x in items):
            return SURE
        return MAYBE  # a bare message list (or an empty session): the plainest shape there is
    return NO


def _session(data: Any, source: str | None, max_messages: int | None = None) -> ImportedSession:
    if isinstance(data, list):
        messages, meta = data, {}
    elif isinstance(data, dict) and isinstance(data.get("messages"), list):
        messages, meta = data["messages"], data
    else:
        raise err("expected a list of messages or an object with a 'messages' list", "bad_session", source)
    if max_messages is not None and len(messages) > max_messages:
        raise too_many(max_messages, source)
    model = meta.get("model")
    if model is None and isinstance(meta.get("meta"), dict):
        model = meta["meta"].get("model")
    imported = finish(list(messages), None, meta.get("tools") or [], title=meta.get("title"),
                      external_id=meta.get("id", meta.get("external_id")), model=model, fmt="openai",
                      source=source)
    imported.metadata = session_metadata(meta)
    return imported


def _convert(data: Any, source: str | None, options: Options) -> list[ImportedSession]:
    if isinstance(data, list) and data and all(isinstance(x, dict) and "messages" in x for x in data):
        out = []
        for s, item in enumerate(data):
            sub = f"{source}[{s}]" if source else f"session {s}"
            out.append(_session(item, sub, options.max_messages))
        return out
    return [_session(data, source, options.max_messages)]


FORMAT = Format(
    name="openai", order=10, detect=_detect, convert=_convert,
    label="OpenAI chat JSON (a session object, a message list, or a list of sessions)",
)
