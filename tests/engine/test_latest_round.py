"""A compaction never summarizes the latest round: the last user message, or the last
assistant call with its results, which the model is about to answer or read. When the
summary and that round do not fit the landing target, the context lands above it; it is
never sent as system + summary + acknowledgement alone."""
import json

from compaction import Compactor, Outcome, get_preset
from compaction.cut import LATEST_ROUND_NOTE, NoCut, latest_round_start, plan_cut
from compaction.messages import Provenance
from compaction.policy import CutPolicy
from compaction.session import CompactionSession
from compaction.steps import EXTRACTIVE_TOKENS_PER_WORD, summarizer_settings
from compaction.windows import usable_window
from tests.engine.helpers import counted, tool_round

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                           "parameters": {"type": "object",
                                                          "properties": {"path": {"type": "string"}}}}}]


def module(i: int, lines: int = 40) -> str:
    """A source file of many short function names: one word and several tokens each."""
    return f"# src/module_{i}.py\n" + "\n".join(f"def helper_{i}_{k}(x):\n    return x * {k}  # line {k}"
                                                for k in range(lines))


def read(i: int, lines: int = 40) -> list[dict]:
    call = {"id": f"call_{i}", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/module_{i}.py"})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": module(i, lines)}]


def default_at(window: int):
    return get_preset("default").with_overrides({"context_window": window})


def test_an_agent_loop_reading_file_after_file_always_sends_the_file_it_just_read():
    """The gateway's 200-turn loop, in process: each call's context ends with the call the
    model made and the file it got back, word for word, and fits the usable window. Before,
    from the 124th call on, the summaries (names of the files read, many tokens a word)
    outgrew the landing target and the cut took the latest round too: the model got only its
    summary."""
    session = CompactionSession(default_at(6000), tools=TOOLS)
    session.append({"role": "system", "content": "You are a careful coding agent."})
    session.append({"role": "user", "content": "Read every module of the project and summarise it."})
    summaries = 0
    for i in range(200):
        for raw in read(i):
            session.append(raw)
        out = session.before_model_call()
        summaries += isinstance(out, Outcome) and out.summarized
        context = session.context()
        assert context[-2]["tool_calls"][0]["id"] == f"call_{i}", i
        assert context[-1] == {"role": "tool", "tool_call_id": f"call_{i}", "content": module(i)}, i
        assert session.total_tokens <= session.usable_window, i
    assert summaries > 20


def test_a_summary_of_long_names_is_held_to_its_word_budget_in_tokens():
    """500 words of ``helper_12_3`` names took 3,700 tokens, most of a 4,500-token window;
    the offline summary is written again in fewer words until it fits its budget at
    EXTRACTIVE_TOKENS_PER_WORD."""
    policy = default_at(6000)
    raws = [{"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "Read every module of the project and summarise it."}]
    for i in range(20):
        raws += read(i)
    out = Compactor(policy).compact(raws, tools=TOOLS, force=True)
    assert isinstance(out, Outcome) and out.summarized and out.summary
    words = summarizer_settings(policy, 6000).max_summary_words
    assert Compactor(policy).counter.count_text(out.summary) <= words * EXTRACTIVE_TOKENS_PER_WORD
    assert any("written again in" in n for n in out.notes)
    assert out.context[-1]["tool_call_id"] == "call_19"


def test_the_overflow_guard_keeps_the_latest_round_when_the_summary_and_it_overshoot_the_target():
    """At 8k the summary may take about 1,700 tokens, and the latest round (the agent's plan,
    its call and a file of 1,100 tokens, under the guard's truncation line) 1,500: together more
    than the 2,400-token landing target. The guard used to move the cut past that round; it
    stays verbatim and the context lands above the target, inside the window."""
    policy = default_at(8000)
    raws = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the bug in src/app.py"}]
    for i in range(40):
        raws += read(i)
    latest = "def handle(order):\n" + "    total = order.amount * 3  # keep\n" * 90
    plan = "The refund total is computed in handle(); " + " ".join(f"step {k}: check order field f{k}." for k in range(50))
    raws += tool_round("last", latest, text=plan, args='{"cmd": "cat src/app.py"}')
    out = Compactor(policy).compact(raws)
    assert isinstance(out, Outcome) and out.summarized
    assert out.trigger["kind"] == "overflow_guard"
    assert out.context[-1] == {"role": "tool", "tool_call_id": "last", "content": latest}
    assert out.context[-2]["tool_calls"][0]["id"] == "last" and out.context[-2]["content"] == plan
    assert out.tokens_after["total"] <= usable_window(8000, policy.reserved_output_tokens)
    target, _ = policy.landing_numbers(8000)
    assert out.tokens_after["total"] > target   # above the target rather than without the round
    assert any(n.startswith("the latest round stays verbatim") for n in out.notes), out.notes


def _reads_then_a_long_plan(words: int) -> tuple[list[dict], str]:
    raws = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Read every module."}]
    for i in range(20):
        raws += read(i)
    plan = " ".join(f"step{k} checks field_{k} of the order;" for k in range(words // 5))
    return raws + tool_round("last", "ok", text=plan, args='{"cmd": "cat src/app.py"}'), plan


def test_guarding_an_overflow_the_summary_gives_way_to_the_latest_round():
    """A 3,000-token plan and its call: with a summary at its full budget the call would
    still not fit the 4,500-token usable window, so the offline summary is written shorter."""
    policy = default_at(6000)
    raws, plan = _reads_then_a_long_plan(1800)
    out = Compactor(policy).compact(raws, tools=TOOLS)
    assert isinstance(out, Outcome) and out.summarized and out.trigger["kind"] == "overflow_guard"
    assert out.context[-2]["content"] == plan and out.context[-1]["tool_call_id"] == "last"
    assert out.tokens_after["total"] <= usable_window(6000, policy.reserved_output_tokens)
    assert any("written again in" in n for n in out.notes)


def test_a_latest_round_larger_than_the_window_is_summarized_too_so_the_call_can_go_out():
    """The one exception: a round that cannot fit the usable window beside any summary. Sent
    whole, the call would overflow; the overflow guard summarizes it and archives it."""
    policy = default_at(6000)
    raws, plan = _reads_then_a_long_plan(5000)
    out = Compactor(policy).compact(raws, tools=TOOLS)
    assert isinstance(out, Outcome) and out.summarized and out.trigger["kind"] == "overflow_guard"
    assert out.tokens_after["total"] <= usable_window(6000, policy.reserved_output_tokens)
    assert any("does not fit the usable window" in n and "summarizes it too" in n for n in out.notes), out.notes
    assert all(m.get("content") != plan for m in out.context)


def test_a_short_span_is_not_refused_for_a_summary_estimated_at_its_whole_budget():
    """A tokens trigger of 2,500 in a 128k window: the word budget (600 words) is far more than
    a summary of 2,800 tokens takes (the offline summary writes at most half the words it
    reads), so the estimate holds it to half the span and the compaction runs."""
    data = get_preset("default").with_overrides({"trigger": {"kind": "tokens", "threshold": 2500},
                                                 "cut.keep_messages": 4})
    raws = [{"role": "system", "content": "You are a careful coding agent."}]
    filler = " ".join(f"word{k}" for k in range(60))
    for i in range(7):
        raws += [{"role": "user", "content": f"Step {i}: please inspect src/module_{i}.py. {filler}"}]
        raws += tool_round(f"c{i}", f"def f_{i}():\n    return {i}\n# {filler}")
        raws += [{"role": "assistant", "content": f"Module {i} defines f_{i}. {filler}"}]
    out = Compactor(data).compact(raws)
    assert isinstance(out, Outcome) and out.summarized, out
    assert out.tokens_after["total"] < 2500


def test_a_cut_whose_tail_bounds_allow_nothing_still_keeps_the_latest_round():
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for i in range(6):
        raws += tool_round(f"c{i}", "out " * 50)
    msgs, toks = counted(raws)
    keep_from = latest_round_start(msgs)
    assert keep_from == len(msgs) - 2   # the last call and its result
    nothing = CutPolicy(keep_messages=0, keep_fraction=0.0, user_turn="ignore")
    assert plan_cut(msgs, toks, nothing, window=100_000).tail_start == len(msgs)   # the bounds alone
    plan = plan_cut(msgs, toks, nothing, window=100_000, keep_from=keep_from)
    assert plan.tail_start == keep_from and plan.evicted == list(range(1, keep_from))
    assert LATEST_ROUND_NOTE in plan.notes


def test_a_context_of_a_summary_and_the_latest_round_is_not_cut_at_all():
    """Nothing but the latest round is left to summarize: no cut, and the reason says so."""
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "[summary]"},
            {"role": "assistant", "content": "Understood."}] + tool_round("c9", "out " * 50)
    msgs, toks = counted(raws)
    msgs[1].provenance, msgs[2].provenance = Provenance.SUMMARY, Provenance.ACKNOWLEDGEMENT
    policy = CutPolicy(keep_messages=0, keep_fraction=0.0, user_turn="prefer")
    plan = plan_cut(msgs, toks, policy, window=100_000, keep_from=latest_round_start(msgs))
    assert isinstance(plan, NoCut) and "latest round stays verbatim" in plan.reason


def test_the_latest_round_is_a_trailing_user_message_when_the_context_ends_with_one():
    msgs, _ = counted([{"role": "system", "content": "s"}, {"role": "user", "content": "a"}]
                      + tool_round("c1") + [{"role": "user", "content": "now run the tests"}])
    assert latest_round_start(msgs) == len(msgs) - 1


def test_eino_still_summarizes_the_whole_history_as_its_seed_does():
    """Eino's summary replaces every message (its finalizer returns the summary alone), so its
    preset turns the rule off: cut.keep_latest_round is false there and only there."""
    assert get_preset("eino").cut.keep_latest_round is False
    assert all(get_preset(n).cut.keep_latest_round for n in ("default", "trpc", "deepagents", "sagents"))
    policy = get_preset("eino").with_overrides({"context_window": 8000, "trigger.threshold": 2000})
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "Fix the bug"}]
    for i in range(30):
        raws += tool_round(f"c{i}", "out " * 100)
    out = Compactor(policy).compact(raws)
    assert isinstance(out, Outcome) and out.summarized
    assert not any(m.get("role") == "tool" for m in out.context)


# -- the reasons and notes a plan gives, word for word (a mutation run found them unchecked) ---------

def _plan(raws, keep_from=None, **cut):
    msgs, toks = counted(raws)
    return plan_cut(msgs, toks, CutPolicy(**cut), window=100_000, keep_from=keep_from)


def test_a_cut_the_latest_round_alone_would_allow_is_refused_with_that_reason():
    """Only a cut after the latest round would evict enough: the reason names the rule."""
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a2"}]
    plan = _plan(raws, keep_from=4, keep_messages=0, keep_fraction=0.0, user_turn="ignore", min_evicted_messages=4)
    assert isinstance(plan, NoCut)
    assert plan.reason == ("nothing before the latest round can be summarized, and the latest round stays verbatim "
                           "(cut.keep_latest_round)")


def test_require_without_a_user_turn_to_start_at_says_so_even_with_the_latest_round_kept():
    """user_turn=require and no user turn a tail could start at: that is the reason, whatever
    the latest round allows (a safe boundary that is no user turn does not count)."""
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
            *tool_round("c1", "out"), *tool_round("c2", "out")]
    msgs, _ = counted(raws)
    plan = _plan(raws, keep_from=latest_round_start(msgs), keep_messages=1, user_turn="require")
    assert isinstance(plan, NoCut)
    assert plan.reason == ("no user turn can start the kept tail without splitting a tool call from its results "
                           "(policy cut.user_turn=require)")


LONG_TURN = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
             {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"},
             *tool_round("c1", "out"), *tool_round("c2", "out"), *tool_round("c3", "out")]


def test_require_keeps_a_last_turn_longer_than_the_bounds_whole_and_says_so():
    plan = _plan(LONG_TURN, keep_messages=2, user_turn="require", search="forward")
    assert plan.tail_start == 3 and plan.target == len(LONG_TURN) - 2
    assert plan.notes == ["the last turn is longer than the tail bounds; kept it whole so the tail starts at its "
                          "user message (cut.user_turn=require)"]


def test_searching_backward_a_longer_tail_is_explained_by_the_tool_groups_not_the_user_turn():
    plan = _plan(LONG_TURN, keep_messages=1, user_turn="require", search="backward")
    assert plan.tail_start == 3
    assert plan.notes == ["kept more than the tail bounds allow so that no tool call is separated from its results"]


def test_a_tail_that_starts_at_its_target_user_turn_needs_no_note():
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a2"}]
    plan = _plan(raws, keep_messages=2, user_turn="require", search="forward")
    assert (plan.tail_start, plan.target, plan.notes) == (3, 3, [])


def test_the_latest_round_can_be_the_first_message_after_the_head():
    msgs, _ = counted([{"role": "system", "content": "s"}, {"role": "user", "content": "the task"}])
    assert latest_round_start(msgs) == 1


def test_a_system_note_after_the_last_turn_does_not_start_the_latest_round():
    """Agents inject system notes mid-conversation; the round is the last user or assistant turn."""
    msgs, _ = counted([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                       {"role": "assistant", "content": "a"}, {"role": "system", "content": "note: 3 files changed"}])
    assert latest_round_start(msgs) == 2


def test_bounds_that_already_keep_the_latest_round_add_no_note():
    """The tail bounds' target is the latest round itself: rule 6 moved nothing, so the plan
    does not claim it did."""
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"}, *tool_round("c1", "out")]
    msgs, toks = counted(raws)
    keep_from = latest_round_start(msgs)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=2, user_turn="ignore"), window=100_000, keep_from=keep_from)
    assert (plan.target, plan.tail_start, plan.notes) == (keep_from, keep_from, [])


def test_a_pinned_call_at_the_end_keeps_its_result_when_everything_else_is_evicted():
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"}, *tool_round("c1", "result of the pinned call")]
    msgs, toks = counted(raws)
    msgs[3].meta["pinned"] = True
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=0, keep_fraction=0.0, user_turn="ignore"), window=100_000)
    assert plan.tail_start == len(msgs) and plan.pinned == [3, 4] and plan.evicted == [1, 2]
