"""A run takes the token counts stored with the live context instead of tokenizing the
whole context again, and gets exactly what counting again would give.

The tokenizer is spied on (wrapped, still running) to see how many characters a run
tokenizes: that work is what a worker saves, and no other part shows it."""
from __future__ import annotations

import json

from compaction import compactor
from compaction.tokens import TiktokenCounter
from dashboard.models import SessionContext
from tests.corpus import corpus_missing
from tests.service.helpers import corpus_session
from tests.service.test_deterministic_runs import anonymised

PREFIX = "minipr__deepseek_bench1__django__django-11099"


def _run(api, messages, monkeypatch, *, stored_counts: bool) -> tuple[dict, str, int]:
    r = api.post("/api/sessions", {"messages": messages, "auto_compact": False})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    if not stored_counts:  # items as older versions stored them: no counter named
        ctx = SessionContext.objects.get(session_id=sid)
        items = ctx.load_items()
        for item in items:
            item["tokens"].pop("counter")
        SessionContext.objects.filter(pk=ctx.pk).update(items=json.dumps(items))
    # a worker that has never seen these messages: no counts cached in this process
    monkeypatch.setattr(compactor, "_SHARED_COUNTERS", {})
    tokenized = []
    plain = TiktokenCounter._plain
    monkeypatch.setattr(TiktokenCounter, "_plain", lambda self, text: tokenized.append(len(text)) or plain(self, text))
    batch = TiktokenCounter.count_texts
    monkeypatch.setattr(TiktokenCounter, "count_texts",
                        lambda self, texts: tokenized.append(sum(map(len, texts))) or batch(self, texts))
    ref = api.post(f"/api/sessions/{sid}/compactions", {"reason": "stored counts"})
    assert ref.status_code == 202, ref.content
    monkeypatch.undo()
    run = api.get(f"/api/runs/{ref.json()['run_id']}").json()
    assert run["status"] == "succeeded", run["error"]
    context = api.get(f"/api/sessions/{sid}/context").json()
    figures = {k: run[k] for k in ("tokens_before", "messages_before", "messages_after")}
    return figures, anonymised(json.dumps(context["messages"], sort_keys=True)), sum(tokenized)


def test_a_run_uses_the_stored_counts_and_gets_what_counting_again_gives(api, monkeypatch):
    data = corpus_session(PREFIX)
    if data is None:
        corpus_missing(f"corpus transcript {PREFIX}*")
    messages = data["messages"]
    recounted, recounted_context, recounted_chars = _run(api, messages, monkeypatch, stored_counts=False)
    stored, stored_context, stored_chars = _run(api, messages, monkeypatch, stored_counts=True)
    # the same counts and the same context, whichever way the counts came (archive handles
    # belong to each session, and so does the summary's count of the handles it quotes)
    assert stored == recounted
    assert stored_context == recounted_context
    assert stored["tokens_before"]["total"] > 0
    # what the run still tokenizes is what it writes (placeholders, the summary prompt), not the context
    assert stored_chars < recounted_chars / 2, (stored_chars, recounted_chars)
