"""Token tailoring drops whole oldest rounds to fit the window minus the
reserved output, and never the system message, a summary, pinned messages or the latest turn."""
from __future__ import annotations

import pytest

from compaction import Compactor, MemoryArchive, Policy, Provenance, get_preset, replay
from compaction.context import render_messages, tool_pairs_ok
from compaction.messages import wrap_originals
from compaction.policy import SummarizerPolicy
from compaction.summarizer import input_budget
from compaction.tailoring import (
    apply,
    run_starts,
    tailor_indices,
    tailoring_budget,
    tailoring_due,
    tailoring_reserve,
)
from tests.support.sessions import (
    chat,
    corpus_messages,
    corpus_sessions,
    runs_with_tools,
    tool_round,
)


def policy(window: int, **extra) -> Policy:
    data = {"counter": "approx", "context_window": window, "summarize": False,
            "trigger": {"kind": "tokens", "threshold": 10_000_000},
            "reduction": {"enabled": False}, "tailoring": {"enabled": True, "reserved_output_tokens": 0}}
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return Policy.load(data)


def total(compactor: Compactor, context: list[dict], tools=None) -> int:
    msgs = wrap_originals(context)
    return sum(t.total for t in compactor.counter.count_many(msgs)) + compactor.counter.count_tools(tools)


def test_a_chat_over_the_budget_loses_its_oldest_runs_and_keeps_system_and_latest_turn():
    session = chat(turns=20, size=400)          # about 2,100 tokens at 4 chars a token
    c = Compactor(policy(1200), archive=MemoryArchive(), session_id="s")

    out = c.compact(session)

    assert out, "tailoring must produce an outcome even though the summary trigger did not fire"
    ctx = out.context
    assert ctx[0] == session[0]
    assert ctx[-2:] == session[-2:]
    assert total(c, ctx) <= 1200
    # whole runs went: what is left is a contiguous, most recent stretch of runs
    kept_users = [m["content"] for m in ctx if m["role"] == "user"]
    assert kept_users == [m["content"] for m in session if m["role"] == "user"][-len(kept_users):]
    assert ctx[1]["role"] == "user", "the kept history starts with a run, never mid-run"
    dropped = [row for row in out.ledger if row["fate"] == "dropped"]
    assert dropped and all("token tailoring" in row["reason"] for row in dropped)


def test_dropped_messages_are_archived_so_the_original_session_replays_exactly():
    session = runs_with_tools(runs=6)
    archive = MemoryArchive()
    c = Compactor(policy(3000), archive=archive, session_id="s")

    out = c.compact(session)

    assert out.messages_after < len(session)
    assert replay(archive.entries("s"), out.messages) == session
    assert [e.kind for e in archive.entries("s")] == ["evicted"]


def test_a_single_long_run_loses_rounds_inside_it_but_keeps_its_task_and_last_round():
    session = [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix the bug"}]
    for i in range(30):
        session += tool_round(f"c{i}", f"output {i} " + "o" * 600)
    session.append({"role": "assistant", "content": None,
                    "tool_calls": [{"id": "last", "type": "function",
                                    "function": {"name": "bash", "arguments": '{"cmd": "pytest"}'}}]})
    c = Compactor(policy(2000))

    out = c.compact(session)

    ctx = out.context
    assert ctx[:2] == session[:2], "system message and the run's user message stay"
    assert ctx[-1] == session[-1], "the unanswered latest call stays"
    assert ctx[-3:-1] == session[-3:-1], "the round before it is only dropped if needed"
    assert tool_pairs_ok(ctx)
    assert total(c, ctx) <= 2000


def test_parallel_tool_calls_are_never_separated_from_any_of_their_results():
    session = runs_with_tools(runs=3, rounds=7, output=500)
    for window in range(600, 6000, 350):
        out = Compactor(policy(window)).compact(session)
        if out:
            assert tool_pairs_ok(out.context), window
            ids = {m["tool_call_id"] for m in out.context if m["role"] == "tool"}
            calls = {c["id"] for m in out.context for c in m.get("tool_calls") or []}
            assert ids == calls, window


def test_a_summary_and_its_acknowledgement_survive_tailoring():
    # The session fits the window (so the overflow guard stays out of it) but not the tailoring
    # budget, and the tail bounds stay as given: the summary leaves tailoring work to do. (The
    # message size sets that up: with the task-once summary, 300-word turns fit the budget.)
    session = chat(turns=14, size=330)
    p = policy(2500, summarize=True, cut={"keep_messages": 20, "keep_fraction": 1.0},
               finalize={"preserve_user_messages": False}, landing={"move_cut": False},
               tailoring={"reserved_output_tokens": 600})
    out = Compactor(p).compact(session, force=True)

    assert out.summarized
    kinds = [m.provenance for m in out.messages]
    assert Provenance.SUMMARY in kinds and Provenance.ACKNOWLEDGEMENT in kinds
    assert any(e["type"] == "tailor" for e in out.events)
    assert out.context[0] == session[0]
    assert out.context[-2:] == session[-2:]
    assert sum(out.tokens_after[k] for k in out.tokens_after if k != "total") <= 1900


def test_a_summary_merged_into_the_system_message_is_never_dropped_with_the_trpc_preset():
    session = chat(turns=40, size=600)
    p = get_preset("trpc").with_overrides({"context_window": 6000})

    out = Compactor(p).compact(session, force=True)

    assert out.summarized
    assert out.context[0]["role"] == "system"
    assert "[Conversation summary #1]" in out.context[0]["content"]
    assert out.context[-1] == session[-1]


def test_when_the_protected_messages_alone_are_too_big_it_says_so_and_drops_only_what_it_may():
    session = [{"role": "system", "content": "s" * 8000}] + chat(turns=3, size=100)[1:]
    c = Compactor(policy(1000))

    out = c.compact(session)

    assert out.context[0] == session[0]
    assert out.context[-2:] == session[-2:]
    assert any("still over the tailoring budget" in n for n in out.notes)
    tailor = next(e for e in out.events if e["type"] == "tailor")
    assert tailor["over_budget"] is True


def test_pinned_first_user_message_is_kept_when_its_run_is_dropped():
    session = chat(turns=12, size=400)
    out = Compactor(policy(1200, pin_first_user_message=True)).compact(session)

    assert out.context[1] == session[1]
    assert session[2] not in out.context


def test_nothing_happens_under_the_budget_and_the_result_stays_a_skip():
    session = chat(turns=3, size=50)
    out = Compactor(policy(100_000)).compact(session)
    assert not out


def test_tailoring_is_off_by_default_and_on_in_the_trpc_preset():
    assert Policy().tailoring.enabled is False
    assert get_preset("trpc").tailoring.enabled is True
    session = chat(turns=20, size=400)
    p = Policy.load({"counter": "approx", "context_window": 1200, "summarize": False,
                     "trigger": {"kind": "tokens", "threshold": 10_000_000}, "reduction": {"enabled": False}})
    # within the window nothing is tailored without the setting ...
    assert not Compactor(p).compact(chat(turns=2, size=400))
    # ... but a context over it is never left so: the overflow guard drops the oldest rounds
    out = Compactor(p).compact(session)
    assert out and any("overflow guard" in n for n in out.notes)
    assert out.tokens_after["total"] <= 1200


# -- the budget: window minus reserved output ----------------------------------------------

@pytest.mark.parametrize("reserved, tailoring_reserved, window, budget", [
    (0, None, 100_000, 100_000 - 4096),      # default reserve 4,096 when the policy has none
    (8000, None, 100_000, 92_000),            # follows the policy's reserved_output_tokens
    (8000, 1000, 100_000, 99_000),            # tailoring's own reserve wins
    (0, None, 8000, 6000),                    # never more than a quarter of the window
])
def test_the_budget_leaves_room_for_the_models_output(reserved, tailoring_reserved, window, budget):
    p = Policy.load({"reserved_output_tokens": reserved, "context_window": window,
                     "tailoring": {"enabled": True, "reserved_output_tokens": tailoring_reserved}})
    assert tailoring_budget(p, window) == budget
    assert tailoring_reserve(p) == (tailoring_reserved if tailoring_reserved is not None else reserved or 4096)


def test_tools_count_against_the_budget():
    session = chat(turns=6, size=400)
    tools = [{"type": "function", "function": {"name": f"t{i}", "description": "d" * 400,
                                               "parameters": {"type": "object", "properties": {}}}}
             for i in range(4)]
    c = Compactor(policy(1600))
    without = c.compact(session)
    with_tools = c.compact(session, tools=tools)
    assert with_tools.messages_after < (without.messages_after if without else len(session))
    assert with_tools.tokens_after["total"] <= 1600


def test_tailoring_due_is_a_cheap_check_for_agent_loops():
    p = policy(1000)
    assert tailoring_due(p, 1001, 1000) and not tailoring_due(p, 999, 1000)
    assert not tailoring_due(Policy(), 10**9, 1000)


# -- corpus -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", corpus_sessions())
def test_every_corpus_session_tailored_to_half_its_size_keeps_pairs_system_and_latest_turn(name, counter):
    raws = corpus_messages(name)
    msgs = wrap_originals(raws)
    tokens = counter.count_many(msgs)
    size = sum(t.total for t in tokens)
    p = policy(max(200, size // 2))
    result = apply(msgs, counter, p, p.context_window, tokens=tokens)

    kept = render_messages(result.messages)
    assert tool_pairs_ok(kept)
    head = [m for m in raws[:1] if m["role"] == "system"]
    assert kept[:len(head)] == head
    starts = run_starts(msgs)
    if starts:
        assert raws[starts[-1]] in kept, "the latest user turn stays"
    assert kept[-1] == raws[-1]
    assert result.tokens_after <= result.tokens_before
    if not result.over_budget:
        assert result.tokens_after <= tailoring_budget(p, p.context_window)
    # order is preserved
    positions = [m.ordinal for m in result.messages]
    assert positions == sorted(positions)


def test_tailor_indices_drops_nothing_when_under_budget(counter):
    msgs = wrap_originals(chat(turns=2))
    tokens = counter.count_many(msgs)
    assert tailor_indices(msgs, tokens, 10**6) == ([], False)


@pytest.mark.parametrize("settings, budget", [
    ({"context_window": 10_000, "input_share": 1.0}, 10_000 - 1024),                 # room for ~600 words
    ({"context_window": 10_000, "input_share": 1.0, "params": {"max_tokens": 3000}}, 7000),
    ({"context_window": 10_000, "input_share": 1.0, "max_summary_words": 2000}, 10_000 - 2828),
    ({"context_window": 1500, "input_share": 1.0}, 750),                             # never more than half
    ({"context_window": 10_000, "input_share": 0.6}, 6000),                          # the share already leaves room
])
def test_the_summarizer_input_leaves_room_for_the_summarys_own_generation(settings, budget):
    assert input_budget(SummarizerPolicy(**settings), 128_000) == budget


def test_the_trigger_fraction_applies_to_the_window_minus_reserved_output():
    p = Policy.load({"counter": "approx", "context_window": 10_000, "reserved_output_tokens": 2000,
                     "trigger": {"kind": "window_fraction", "fraction": 0.5}})
    c = Compactor(p)
    under, over = c.check(chat(turns=1, size=7600)), c.check(chat(turns=1, size=8400))
    assert under.value < 4000 < over.value        # 50% of (10,000 - 2,000), not of 10,000
    assert not under.fired and over.fired
    assert under.threshold == 4000
