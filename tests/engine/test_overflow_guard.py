"""The overflow guard: no model call is sent over the usable window, whatever the trigger."""
from __future__ import annotations

import pytest

from compaction import Compactor, Outcome, get_preset
from compaction.policy import Policy
from compaction.run_context import as_messages
from compaction.session import CompactionSession
from compaction.simulate import run_simulation
from tests.engine.helpers import coding_run, tool_round

# A trigger that can never fire at this window: only the guard can stop an overflow.
HIGH_TRIGGER = {"kind": "tokens", "threshold": 1_000_000}


def policy(**extra) -> Policy:
    return Policy.load({"counter": "approx", "context_window": 4000, "trigger": HIGH_TRIGGER} | extra)


def test_a_trigger_above_the_window_no_longer_lets_calls_overflow():
    report = run_simulation(coding_run(rounds=60, output_chars=400), policy())
    assert report.compactions, "the guard should have compacted"
    assert report.overflow_calls == 0
    assert report.integrity.ok
    assert all(c.trigger.startswith("overflow guard") for c in report.compactions)


def test_before_model_call_compacts_an_over_window_context_well_below_the_window():
    session = CompactionSession(policy())
    session.extend(coding_run(rounds=60, output_chars=400))
    assert session.total_tokens > session.usable_window
    assert not session.should_compact()
    out = session.before_model_call()
    assert isinstance(out, Outcome) and out.trigger["kind"] == "overflow_guard"
    # well below the window, so the next call does not overflow again at once
    assert session.total_tokens <= 0.7 * session.usable_window


def test_one_shot_compact_guards_too():
    """The service's runs call Compactor.compact; an over-window context is compacted there
    even though the trigger did not fire."""
    out = Compactor(policy()).compact(coding_run(rounds=60, output_chars=400))
    assert isinstance(out, Outcome)
    assert out.trigger["kind"] == "overflow_guard"
    assert out.tokens_after["total"] <= 4000


def test_without_summaries_the_guard_drops_whole_oldest_rounds():
    report = run_simulation(coding_run(rounds=60, output_chars=400), policy(summarize=False))
    assert report.overflow_calls == 0 and report.integrity.ok
    assert any("token tailoring dropped" in n for c in report.compactions for n in c.notes)


def test_a_single_huge_tool_output_is_truncated_rather_than_sent_over_the_window():
    """No reduction in the policy (like the sagents seed): the guard still cuts the result."""
    msgs = coding_run(rounds=3, output_chars=200)
    msgs += tool_round("big", "z" * 40_000)
    msgs.append({"role": "assistant", "content": "done"})
    report = run_simulation(msgs, policy())
    assert report.overflow_calls == 0
    assert report.integrity.ok


def test_a_single_message_larger_than_the_window_is_the_one_reported_exception():
    # a system message is never evicted, summarized or dropped, and it is not a tool result
    msgs = [{"role": "system", "content": "s" * 40_000}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok"}]
    report = run_simulation(msgs, policy())
    assert report.overflow_calls == 1
    assert report.oversized_calls == 1
    assert report.to_dict()["oversized_calls"] == 1


@pytest.mark.parametrize("name", ["eino", "sagents"])
def test_thresholds_above_the_usable_window_load_with_a_warning(name):
    preset = get_preset(name)            # 128k fallback window
    warnings = preset.warnings()
    assert warnings and "overflow guard" in warnings[0]
    assert get_preset("default").warnings() == []


def test_the_replay_report_carries_the_warnings():
    report = run_simulation(coding_run(rounds=2), policy()).to_dict()
    assert any("1,000,000" in w for w in report["warnings"])


# The edge the guard must hold: window 4,000 with 1,000 reserved for output leaves 3,000 usable.
EDGE_POLICY = {"counter": "approx", "context_window": 4000, "reserved_output_tokens": 1000,
               "trigger": HIGH_TRIGGER}


def _context_of(total: int, compactor: Compactor) -> list[dict]:
    """A coding run padded (in its last user message) to exactly ``total`` tokens."""
    base = coding_run(rounds=12, output_chars=400)

    def padded(pad: int) -> tuple[list[dict], int]:
        msgs = base + [{"role": "user", "content": "next " + "w" * pad}]
        return msgs, sum(t.total for t in compactor.counter.count_many(as_messages(msgs)))

    low, high = 0, 40_000            # the count grows with the padding: search for the exact total
    while low < high:
        mid = (low + high) // 2
        if padded(mid)[1] < total:
            low = mid + 1
        else:
            high = mid
    msgs, got = padded(low)
    assert got == total, f"could not build a context of exactly {total} tokens (got {got})"
    return msgs


def test_a_context_just_over_the_usable_window_but_under_the_whole_window_is_compacted():
    """3,049 tokens against a 3,000-token usable window (4,000 minus 1,000 reserved): the call
    would leave no room for the answer, so the guard compacts even though the whole window
    would hold it; 3,000 exactly fits and is left alone."""
    compactor = Compactor(Policy.load(EDGE_POLICY))
    over = compactor.compact(_context_of(3049, compactor))
    assert isinstance(over, Outcome), f"3,049 tokens against 3,000 usable was skipped: {over}"
    assert over.trigger["kind"] == "overflow_guard"
    assert "usable window 3,000" in over.trigger["reason"]
    assert over.tokens_after["total"] <= 3000
    fits = Compactor(Policy.load(EDGE_POLICY)).compact(_context_of(3000, compactor))
    assert not isinstance(fits, Outcome)


def test_the_agent_loop_guard_uses_the_usable_window_too():
    compactor = Compactor(Policy.load(EDGE_POLICY))
    session = CompactionSession(Policy.load(EDGE_POLICY))
    session.extend(_context_of(3049, compactor))
    assert session.total_tokens == 3049 and session.usable_window == 3000
    out = session.before_model_call()
    assert isinstance(out, Outcome) and out.trigger["kind"] == "overflow_guard"
    assert session.total_tokens <= 3000
