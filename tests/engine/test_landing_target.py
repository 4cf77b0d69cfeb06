"""Landing target and hysteresis: a compaction lands well below its trigger, one that would
free too little does not run, and replay reports count the thrash."""
from __future__ import annotations

import pytest

from compaction import PRESETS, Compactor, Outcome, Skipped, get_preset
from compaction.cut import NO_TAIL_NOTE
from compaction.errors import PolicyError
from compaction.policy import Policy
from compaction.session import CompactionSession
from compaction.simulate import run_simulation
from tests.engine.helpers import chat, coding_run, tool_round
from tests.support.llm_server import ok


def test_a_target_above_the_trigger_is_refused_naming_the_field():
    with pytest.raises(PolicyError) as exc:
        Policy.load({"trigger": {"kind": "tokens", "threshold": 8000}, "landing": {"target": 9000}})
    assert exc.value.field == "landing.target"
    assert "trigger threshold" in str(exc.value)


def test_a_minimum_freed_above_the_window_is_refused_naming_the_field():
    with pytest.raises(PolicyError) as exc:
        Policy.load({"context_window": 8000, "landing": {"min_freed": 9000}})
    assert exc.value.field == "landing.min_freed"


def test_the_defaults_are_half_the_trigger_and_a_tenth_of_the_usable_window():
    p = Policy.load({"context_window": 10_000, "trigger": {"kind": "tokens", "threshold": 6000}})
    assert p.landing_numbers(10_000) == (3000, 1000)


def test_the_default_minimum_never_stops_a_trigger_far_below_the_window():
    """6,000 tokens at a 128k window: 10% of the window could never be freed at the trigger."""
    p = Policy.load({"context_window": 128_000, "trigger": {"kind": "tokens", "threshold": 6000}})
    assert p.landing_numbers(128_000) == (3000, 1500)


def _summarizing(llm_server, llm_settings, **landing):
    """A policy whose summaries come from the scripted server (a summary within its word
    budget), whose tail bounds alone would keep 90% of the window verbatim."""
    llm_server.script(ok("The agent read files and ran tests. " * 12))
    return Policy.load({"counter": "approx", "context_window": 8000, "trigger": {"kind": "tokens", "threshold": 6000},
                        "cut": {"keep_messages": 200, "keep_fraction": 0.9}, "summarizer": llm_settings(),
                        "landing": landing})


def test_a_compaction_moves_the_cut_back_until_it_lands_at_the_target(llm_server, llm_settings):
    session = CompactionSession(_summarizing(llm_server, llm_settings))
    session.extend(coding_run(rounds=50, output_chars=500))
    out = session.compact()
    assert isinstance(out, Outcome) and out.summarized
    assert out.tokens_after["total"] <= session.landing_target == 3000
    assert any("moved the cut back" in n for n in out.notes)


def test_with_move_cut_off_the_tail_bounds_stay_as_given(llm_server, llm_settings):
    session = CompactionSession(_summarizing(llm_server, llm_settings, move_cut=False, min_freed=0))
    session.extend(coding_run(rounds=50, output_chars=500))
    out = session.compact()
    assert isinstance(out, Outcome) and out.tokens_after["total"] > 3000


def test_a_message_count_trigger_does_not_thrash():
    """`messages > 15` fires on every call of a chat; without the minimum each compaction
    evicts a message or two."""
    p = {"counter": "approx", "context_window": 32_000, "trigger": {"kind": "messages", "threshold": 15},
         "cut": {"keep_messages": 12}}
    guarded = run_simulation(chat(turns=40, size=300), Policy.load(p))
    unguarded = run_simulation(chat(turns=40, size=300), Policy.load(p | {"landing": {"min_freed": 0}}))
    assert unguarded.thrash > 5
    assert guarded.thrash == 0
    assert len(guarded.compactions) < len(unguarded.compactions)
    assert guarded.integrity.ok


def test_a_compaction_that_would_free_too_little_waits_for_that_many_new_tokens():
    p = Policy.load({"counter": "approx", "context_window": 32_000, "trigger": {"kind": "messages", "threshold": 15},
                     "cut": {"keep_messages": 12}})
    session = CompactionSession(p)
    session.extend(chat(turns=10, size=300))
    out = session.before_model_call()
    assert isinstance(out, Skipped) and out.wait_tokens == session.min_freed
    assert "landing.min_freed" in out.reason
    # not re-armed: the trigger still fires, but nothing runs until min_freed tokens arrived
    assert session.should_compact() and session.before_model_call() is None
    arrived = 0
    while arrived < session.min_freed:
        arrived += session.live.counter.count(session.append({"role": "user", "content": "more " * 200})).total
        session.append({"role": "assistant", "content": "ok"})
    assert session.armed()
    assert session.before_model_call() is not None


def test_tool_output_clearing_obeys_the_same_minimum():
    """Clearing past its threshold that would free less than the minimum waits instead of
    rewriting the prompt prefix for a few tokens."""
    p = get_preset("default").with_overrides({"context_window": 32_000, "landing.min_freed": 20_000,
                                              "reduction.clearing.clear_at_least_tokens": 0})
    session = CompactionSession(p)
    session.extend(coding_run(rounds=40, output_chars=1600))
    assert session.reduction_due() and not session.should_compact()
    out = session.before_model_call()
    assert isinstance(out, Skipped) and out.wait_tokens == 20_000
    assert "tool-output reduction would free" in out.reason


def test_the_report_has_thrash_as_a_top_level_integer():
    report = run_simulation(chat(turns=5), "default").to_dict()
    assert isinstance(report["thrash"], int)


@pytest.mark.parametrize("name", [n for n in PRESETS if n != "default"])
def test_seed_presets_keep_their_tail_bounds_and_fire_as_their_seed_does(name):
    landing = get_preset(name).landing
    # trpc's summary waits when it would free under a tenth of the window: its trigger counts the
    # tokens since the last summary, which a long current turn can hold nearly all of
    assert landing.move_cut is False and landing.min_freed == (0.1 if name == "trpc" else 0)


def test_a_cut_the_landing_target_moved_to_the_end_names_the_landing_not_the_tail_bounds():
    """The tail bounds allow 8 messages; the landing target (half of a 2,000-token trigger)
    moves the cut past all of them but the latest round, and the notes blame the landing, not
    keep_messages."""
    msgs = coding_run(rounds=30, output_chars=500)
    policy = Policy.load({"counter": "approx", "trigger": {"kind": "tokens", "threshold": 2000},
                          "cut": {"keep_messages": 8}})
    out = Compactor(policy).compact(msgs, force=True)
    # past every message of the tail bounds but the latest round, which the agent has not read yet
    assert isinstance(out, Outcome) and out.cut is not None and out.cut["tail_start"] == len(msgs) - 2
    assert any(n.startswith("moved the cut back past the tail bounds") for n in out.notes)
    assert not any(n.startswith(NO_TAIL_NOTE) for n in out.notes)


# -- issue 21 item 7: hysteresis for every path ---------------------------------------------------


def test_a_reduction_that_only_slips_under_the_trigger_does_not_stand_in_for_the_summary():
    """Before, tool-output clearing that freed just enough to get under the trigger counted as
    the answer ("no summary needed"), so the trigger fired again a few calls later."""
    policy = get_preset("default").with_overrides({"context_window": 32_000})
    report = run_simulation(coding_run(rounds=200, output_chars=600), policy)
    target = CompactionSession(policy).landing_target
    fired = [c for c in report.compactions if (c.trigger or "").startswith("window_fraction")]
    assert fired
    for c in fired:
        assert c.summarized or c.tokens_after <= target, (c.at, c.tokens_after, c.notes)
    assert report.thrash == 0 and report.integrity.ok


def test_reduction_alone_is_enough_when_it_lands_at_the_target():
    policy = get_preset("default").with_overrides({"context_window": 32_000})
    session = CompactionSession(policy)
    # one huge old tool output: clearing it alone brings the context far below the target
    session.append({"role": "system", "content": "You are a coding agent."})
    session.append({"role": "user", "content": "Fix the bug in src/app.py"})
    for i in range(14):
        output = "x " * (22_000 if i == 0 else 100)
        for raw in [{"role": "assistant", "content": None, "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": "bash",
                                                                        "arguments": '{"cmd": "cat a.log"}'}}]},
                    {"role": "tool", "tool_call_id": f"c{i}", "content": output}]:
            session.append(raw)
    out = session.compact()
    assert isinstance(out, Outcome) and not out.summarized, out
    assert out.tokens_after["total"] <= session.landing_target
    assert any("no summary needed" in n for n in out.notes)


def test_thrash_counts_every_compaction_that_frees_under_a_tenth_of_the_usable_window():
    """Whatever its kind: here token tailoring drops a round or two on every call."""
    policy = Policy.load({"counter": "approx", "context_window": 8000, "summarize": False,
                          "tailoring": {"enabled": True}, "landing": {"min_freed": 0}})
    report = run_simulation(coding_run(rounds=80, output_chars=600), policy)
    floor = report.usable_window // 10
    small = [c for c in report.compactions if c.tokens_before - c.tokens_after < floor]
    assert len(small) > 10
    assert report.thrash == len(small)


def test_moving_the_cut_to_the_target_keeps_the_round_the_model_is_about_to_read():
    """A long task re-inserted after the summary leaves no room at the target: the cut still
    stops short of the latest call and its result, which the agent asked for and has not seen."""
    policy = get_preset("default").with_overrides({"context_window": 8000, "counter": "approx"})
    session = CompactionSession(policy)
    task = "Fix the refund window in src/refunds.py. " + " ".join(
        f"Rule {k}: refunds after day {k} need approval." for k in range(60))
    session.extend(coding_run(rounds=12, output_chars=800, task=task)
                   + tool_round("big", "def handle_refund_window(order):\n" + "x = 1\n" * 1000,
                                args='{"cmd": "cat src/refunds.py"}'))
    out = session.before_model_call()
    assert isinstance(out, Outcome) and out.summarized
    assert any("moved the cut back" in n for n in out.notes)
    context = session.context()
    assert [m["role"] for m in context[-2:]] == ["assistant", "tool"]
    assert "def handle_refund_window" in context[-1]["content"]
    assert "file_11.py" not in context[-2]["tool_calls"][0]["function"]["arguments"]   # only that round


def _long_answer_then_a_big_result() -> list[dict]:
    answer = "There are three files. " + " ".join(f"File {k} of the listing is module_{k}.py." for k in range(300))
    return [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "List the files of the repository."},
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "Now read the log of the failing build."},
            *tool_round("log", "build step ok\n" * 4200, args='{"cmd": "cat build.log"}')]


def test_a_trpc_summary_that_would_free_under_a_tenth_of_the_window_waits():
    """trpc fires on the tokens since its last summary; here they are nearly all in the round
    it must keep, so a summary would free about 2.6k of a 32k window: a cache break for little."""
    session = CompactionSession(get_preset("trpc").with_overrides({"context_window": 32000}))
    session.extend(_long_answer_then_a_big_result())
    before = session.total_tokens

    out = session.before_model_call()

    assert isinstance(out, Skipped) and "less than the minimum of 3,200" in out.reason
    assert session.total_tokens == before
    # as the window nears, its synchronous summary runs (cut.any_boundary_near_window)
    session.extend(tool_round("log2", "build step ok\n" * 3200, args='{"cmd": "cat build2.log"}'))
    near = session.before_model_call()
    assert isinstance(near, Outcome) and near.summarized
    assert near.tokens_before["total"] - near.tokens_after["total"] >= 3200
