"""History by runs: without summaries, keep only the last N runs (a run starts at a user message);
0 means no limit, and tool-output reduction still applies to what is kept."""
from __future__ import annotations

import pytest

from compaction import Compactor, MemoryArchive, Policy, replay
from compaction.context import tool_pairs_ok
from compaction.messages import wrap_originals
from compaction.tailoring import count_runs, limit_history_runs
from tests.support.sessions import chat, corpus_messages, runs_with_tools


def policy(runs: int, **extra) -> Policy:
    data = {"counter": "approx", "summarize": False, "history_runs": runs,
            "trigger": {"kind": "tokens", "threshold": 10_000_000}, "reduction": {"enabled": False}}
    data.update(extra)
    return Policy.load(data)


def user_texts(context: list[dict]) -> list[str]:
    return [m["content"] for m in context if m["role"] == "user"]


@pytest.mark.parametrize("runs", [1, 2, 5])
def test_only_the_last_n_runs_are_kept(runs):
    session = runs_with_tools(runs=8)
    out = Compactor(policy(runs)).compact(session)

    assert out.context[0] == session[0]
    assert user_texts(out.context) == [f"task {r}: look at module_{r}.py" for r in range(8 - runs, 8)]
    first_kept = session.index({"role": "user", "content": f"task {8 - runs}: look at module_{8 - runs}.py"})
    assert out.context[1:] == session[first_kept:]
    assert tool_pairs_ok(out.context)


def test_zero_means_unlimited():
    session = runs_with_tools(runs=8)
    assert not Compactor(policy(0)).compact(session)
    assert limit_history_runs(wrap_originals(session), 0) == []


def test_fewer_runs_than_the_limit_change_nothing():
    session = chat(turns=3)
    assert not Compactor(policy(3)).compact(session)


def test_the_limit_is_ignored_when_summaries_are_on():
    session = chat(turns=10)
    p = policy(2, summarize=True)
    assert not Compactor(p).compact(session)   # trigger did not fire; no history-runs drop either


def test_dropped_runs_are_archived_and_the_session_replays_exactly():
    session = runs_with_tools(runs=5)
    archive = MemoryArchive()
    out = Compactor(policy(2), archive=archive, session_id="h").compact(session)

    assert replay(archive.entries("h"), out.messages) == session
    rows = [r for r in out.ledger if r["fate"] == "dropped"]
    assert rows and all("history-runs limit" in r["reason"] for r in rows)
    event = next(e for e in out.events if e["type"] == "tailor")
    assert set(event["dropped_by"].values()) == {"history_runs"}


def test_reduction_still_applies_to_the_runs_that_are_kept():
    session = runs_with_tools(runs=6, output=6000)
    p = policy(3, reduction={"enabled": True, "truncation": {"enabled": False}, "clearing": {"enabled": False},
                             "passes": {"enabled": True, "keep_recent_requests": 0, "historical_max_tokens": 200}})
    out = Compactor(p).compact(session)

    assert user_texts(out.context) == [f"task {r}: look at module_{r}.py" for r in (3, 4, 5)]
    kept_results = [m for m in out.context if m["role"] == "tool"]
    placeholders = [m for m in kept_results if "archive" in str(m["content"])]
    assert placeholders, "older kept runs had their large tool results replaced by reduction"
    assert kept_results[-1]["content"] == session[-2]["content"], "the current run is protected by reduction"
    assert tool_pairs_ok(out.context)


def test_a_corpus_customer_service_session_keeps_its_last_two_runs():
    raws = corpus_messages("taubench__gpt-4o-airline__rec033.json")
    msgs = wrap_originals(raws)
    assert count_runs(msgs) > 2
    out = Compactor(policy(2)).compact(raws)

    assert count_runs(out.messages) == 2
    assert out.context[-1] == raws[-1]
    assert tool_pairs_ok(out.context)
    users = [i for i, m in enumerate(raws) if m["role"] == "user"]
    assert user_texts(out.context) == [raws[i]["content"] for i in users[-2:]]
