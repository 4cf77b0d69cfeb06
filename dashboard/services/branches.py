"""Branch summaries: per filter key and for the whole session.

Messages can carry a *filter key* (``app/tool``, ``app/tool/search``) on import and
append; it is stored on the ``Message`` row (the message's ``raw`` stays the exact OpenAI
dict). Each compaction run of a session that uses filter keys refreshes the branch
summaries through :class:`compaction.branches.BranchSummarizer`, honouring the policy's
``branches.allowlist`` and ``branches.cascade``; the store (``MemorySummaryStore`` as
JSON, plus the history position the last refresh looked at) lives on ``SessionContext``
and is written in the run's own commit. Retrieval falls back from a missing key to the
whole-session summary (:func:`compaction.branches.retrieve`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compaction.branches import ALL, BranchSummarizer, MemorySummaryStore, normalize_key, retrieve

from ..models import Session, SessionContext, StoredMessage
from . import Invalid
from .common import text_problem

log = logging.getLogger("dashboard.branches")

FILTER_KEY = "filter_key"
MAX_KEY = 255


# -- keys on the way in ------------------------------------------------------------------------

def clean_key(key: Any, where: str = "filter_key") -> str | None:
    """A stored filter key: normalised (``None``/blank -> None), at most 255 characters,
    no empty path segment. Raises Invalid (422) naming ``where``."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise Invalid(f"{where}: a filter key is a string like 'app/tool', not {type(key).__name__}")
    problem = text_problem(key)
    if problem:
        raise Invalid(f"{where}: {problem}")
    key = normalize_key(key)
    if not key:
        return None
    if len(key) > MAX_KEY:
        raise Invalid(f"{where}: a filter key has at most {MAX_KEY} characters")
    if any(not part.strip() for part in key.split("/")):
        raise Invalid(f"{where}: {key!r} has an empty path segment")
    return key


def split_filter_keys(raws: Any, default: str | None = None) -> tuple[Any, list[str | None] | None]:
    """Take the optional ``filter_key`` beside each message out of the message dicts.

    Returns (messages without the field, keys per message) or (messages, None) when no
    message has a key and there is no ``default``. The input dicts are not modified."""
    default = clean_key(default, "filter_key")
    if not isinstance(raws, list):
        return raws, None
    if default is None and not any(isinstance(r, dict) and FILTER_KEY in r for r in raws):
        return raws, None
    out, keys = [], []
    for k, raw in enumerate(raws):
        if isinstance(raw, dict) and FILTER_KEY in raw:
            raw = dict(raw)
            keys.append(clean_key(raw.pop(FILTER_KEY), f"messages[{k}].filter_key") or default)
        else:
            keys.append(default)
        out.append(raw)
    return out, keys if any(k is not None for k in keys) else None


# -- the store ---------------------------------------------------------------------------------

def load_store(data: dict | None) -> tuple[MemorySummaryStore, int]:
    data = data or {}
    return MemorySummaryStore.from_dict(data), int(data.get("position") or 0)


def dump_store(store: MemorySummaryStore, position: int) -> dict:
    return {**store.to_dict(), "position": position}


def uses_branches(session_id: int) -> bool:
    """Branch summaries are kept for sessions whose messages carry filter keys."""
    return StoredMessage.objects.filter(session_id=session_id, filter_key__isnull=False).exists()


@dataclass
class BranchOutcome:
    data: dict                         # the store to save (dump_store)
    refreshes: list[dict] = field(default_factory=list)   # BranchRefresh.to_dict() per trigger key
    updated: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {"updated": self.updated, "failed": self.failed,
                "triggers": [r["trigger_key"] for r in self.refreshes],
                "results": [{k: v for k, v in res.items() if k != "summary"} | {
                    "version": (res.get("summary") or {}).get("version")}
                    for r in self.refreshes for res in r["results"]]}


def refresh(session_id: int, stored: dict | None, policy, *, force: bool, run_id: str,
            trigger_key: str | None = None, parent_request: dict | None = None,
            on_event: Callable[[dict], None] | None = None, compactor: Any = None,
            last_message_at: float | None = None) -> BranchOutcome | None:
    """Refresh the branch summaries of a session (None when it uses no filter keys).

    The trigger keys are the keys of the messages added since the last refresh (the run's
    own ``trigger_key`` first; unkeyed messages trigger the whole-session summary). Each
    goes through ``BranchSummarizer.refresh``: its branch is refreshed when the allowlist
    lets it through, and the whole-session summary too when ``branches.cascade`` is on.
    Without ``force`` a target is refreshed only when the policy's trigger fires on its
    own numbers."""
    if not stored and not uses_branches(session_id):
        return None
    rows = list(StoredMessage.objects.filter(session_id=session_id).order_by("position").values_list("raw", "filter_key"))
    messages = [r for r, _ in rows]
    keys = [k for _, k in rows]
    store, position = load_store(stored)
    new_keys = keys[position:]
    triggers: list[str | None] = []
    if trigger_key:
        triggers.append(normalize_key(trigger_key))
    for k in new_keys:
        k = normalize_key(k) if k else None
        if k not in triggers:
            triggers.append(k)
    if force and not triggers:
        triggers = [normalize_key(trigger_key) if trigger_key else None]
    # keyed triggers first, the whole session last
    triggers.sort(key=lambda k: k in (None, ALL))
    bs = BranchSummarizer(policy, store=store, compactor=compactor)
    out = BranchOutcome(data={})
    for key in triggers:
        result = bs.refresh(messages, keys, trigger_key=key, force=force, run_id=run_id,
                            parent_request=parent_request, on_event=on_event, last_message_at=last_message_at)
        d = result.to_dict()
        out.refreshes.append(d)
        for r in result.results:
            if r.status == "updated" and r.key not in out.updated:
                out.updated.append(r.key)
            elif r.status == "failed" and r.key not in out.failed:
                out.failed.append(r.key)
    out.data = dump_store(store, len(messages))
    return out


# -- reading ---------------------------------------------------------------------------------------

def summaries_of(session: Session) -> dict:
    data = SessionContext.objects.filter(session_id=session.pk).values_list("branch_summaries", flat=True).first()
    return data or {}


def retrieve_for(session: Session, key: str | None = None, data: dict | None = None) -> dict:
    """What an agent asking for ``key`` gets: the summary served, which key it is and the
    fallback used (``exact``, ``whole_session``, ``any`` or ``none``), plus every stored key."""
    key = clean_key(key, "key")
    store, position = load_store(summaries_of(session) if data is None else data)
    found = retrieve(store, key)
    return {"session_id": session.pk, "requested": found.requested, "used": found.used, "fallback": found.fallback,
            "summary": found.summary.to_dict() if found.summary else None,
            "keys": [{"key": s.key, "version": s.version, "messages": s.messages, "covered": s.covered,
                      "updated_at": s.updated_at, "run_id": s.run_id, "model": s.model} for s in store.all()],
            "position": position}
