"""The service gives the same session the same context on every run.

Two sessions imported from the same transcript and compacted the same way differ only in
their archive handles: a handle is derived from the content it holds *and* the session it
belongs to (handles are unique across the whole database), so each session's handles are
its own. Mapped onto each other in order of appearance, the contexts are byte-identical.
"""
from __future__ import annotations

import json
import re

from compaction import CompactionSession, Policy
from compaction.outcome import Outcome
from dashboard.models import StoredArchiveEntry
from tests.corpus import corpus_missing
from tests.service.helpers import corpus_session

HANDLE = re.compile(r"ar_[0-9a-f]{16}(?:-\d+)?")
PREFIX = "minipr__deepseek_bench1__django__django-11099"


def compacted_context(api, messages) -> tuple[str, list[str], int, dict]:
    r = api.post("/api/sessions", {"messages": messages, "auto_compact": False})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    ref = api.post(f"/api/sessions/{sid}/compactions", {"reason": "determinism"})
    assert ref.status_code == 202, ref.content
    run = api.get(f"/api/runs/{ref.json()['run_id']}").json()
    assert run["status"] == "succeeded", run["error"]
    ctx = api.get(f"/api/sessions/{sid}/context").json()
    handles = list(StoredArchiveEntry.objects.filter(session_id=sid).order_by("id").values_list("entry_id", flat=True))
    return json.dumps(ctx["messages"], sort_keys=True, ensure_ascii=False), handles, sid, run["policy_snapshot"]


def anonymised(text: str) -> str:
    seen: dict[str, str] = {}
    return HANDLE.sub(lambda m: seen.setdefault(m.group(0), f"<handle {len(seen)}>"), text)


def test_two_sessions_of_one_transcript_get_the_same_context_apart_from_their_own_handles(api):
    data = corpus_session(PREFIX)
    if data is None:
        corpus_missing(f"corpus transcript {PREFIX}*")
    messages = data["messages"]
    first, first_handles, sid, policy = compacted_context(api, messages)
    second, second_handles, _, _ = compacted_context(api, messages)
    assert first_handles and len(first_handles) == len(second_handles)
    assert not set(first_handles) & set(second_handles)
    quoted = set(HANDLE.findall(first))
    assert quoted and quoted <= set(first_handles)
    assert anonymised(first) == anonymised(second)

    # The engine, given the same session id, policy and messages, writes the very same bytes.
    engine = CompactionSession(Policy.load(policy), session_id=str(sid))
    engine.extend(messages)
    assert isinstance(engine.compact(force=True), Outcome)
    assert [e.id for e in engine.archive.entries(str(sid))] == first_handles
    assert json.dumps(engine.context(), sort_keys=True, ensure_ascii=False) == first
