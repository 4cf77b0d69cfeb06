"""The cut: bounded tail, tool pairs never split, user turns preferred, pinned kept."""
from compaction.cut import NO_TAIL_NOTE, plan_cut
from compaction.messages import Provenance
from compaction.policy import CutPolicy
from tests.engine.helpers import call, chat, coding_run, counted


def test_tail_is_bounded_by_message_count_and_starts_at_a_user_turn():
    msgs, toks = counted(chat(turns=10))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=5, keep_fraction=1.0), window=100_000)
    assert plan.boundary == "user_turn"
    assert msgs[plan.tail_start].role == "user"
    assert len(msgs) - plan.tail_start <= 5
    assert plan.head == [0]
    assert plan.evicted == list(range(1, plan.tail_start))


def test_token_fraction_bound_wins_when_it_keeps_fewer():
    msgs, toks = counted(chat(turns=10, size=400))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=20, keep_fraction=0.05), window=10_000)
    kept_tokens = sum(t.total for t in toks[plan.tail_start:])
    assert kept_tokens <= 500


def test_parallel_tool_calls_are_never_separated_from_their_results():
    raws = [{"role": "user", "content": "go"}]
    for r in range(6):
        raws.append({"role": "assistant", "content": None, "tool_calls": [call(f"a{r}"), call(f"b{r}"), call(f"c{r}")]})
        raws += [{"role": "tool", "tool_call_id": f"{x}{r}", "content": "z" * 100} for x in "abc"]
    msgs, toks = counted(raws)
    for keep in range(0, 12):
        plan = plan_cut(msgs, toks, CutPolicy(keep_messages=keep, keep_fraction=1.0, user_turn="ignore"), window=100_000)
        if plan:
            first_tail = msgs[plan.tail_start] if plan.tail_start < len(msgs) else None
            assert first_tail is None or first_tail.role == "assistant"
            evicted_ids = {c["id"] for i in plan.evicted for c in msgs[i].tool_calls}
            tail_results = {m.tool_call_id for m in msgs[plan.tail_start:] if m.role == "tool"}
            assert not evicted_ids & tail_results


def test_single_user_turn_runs_still_compact_at_a_safe_boundary():
    msgs, toks = counted(coding_run(rounds=30))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=6, keep_fraction=0.25), window=20_000)
    assert plan and plan.boundary == "safe"
    assert msgs[plan.tail_start].role == "assistant"
    assert "fell back" in plan.notes[0]


def test_require_user_turn_refuses_single_turn_runs_and_says_why():
    msgs, toks = counted(coding_run(rounds=30))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=6, user_turn="require"), window=20_000)
    assert not plan and "user turn" in plan.reason


def test_no_safe_cut_when_the_whole_history_is_one_unanswered_group():
    raws = [{"role": "system", "content": "s"},
            {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
            {"role": "tool", "tool_call_id": "a", "content": "1"}]
    msgs, toks = counted(raws)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=0, keep_fraction=0.0, user_turn="ignore"), window=1000)
    assert not plan and "no safe cut" in plan.reason


def test_trailing_unanswered_calls_stay_in_the_tail():
    raws = coding_run(rounds=5)
    raws.append({"role": "assistant", "content": None, "tool_calls": [call("late1"), call("late2")]})
    msgs, toks = counted(raws)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=0, keep_fraction=0.0, user_turn="ignore"), window=1000)
    assert plan.tail_start == len(msgs) - 1


def test_pinned_messages_and_their_tool_group_are_never_evicted():
    msgs, toks = counted(coding_run(rounds=10))
    msgs[5].meta["pinned"] = True  # a tool result: its call must stay too
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0), window=100_000)
    assert 4 in plan.pinned and 5 in plan.pinned
    assert 4 not in plan.evicted and 5 not in plan.evicted


def test_backward_search_keeps_more_than_the_target():
    raws = [{"role": "user", "content": "go"}]
    raws.append({"role": "assistant", "content": None, "tool_calls": [call(f"p{i}") for i in range(4)]})
    raws += [{"role": "tool", "tool_call_id": f"p{i}", "content": "r"} for i in range(4)]
    raws.append({"role": "assistant", "content": "done"})
    msgs, toks = counted(raws)
    fwd = plan_cut(msgs, toks, CutPolicy(keep_messages=3, keep_fraction=1.0, user_turn="ignore"), window=10_000)
    back = plan_cut(msgs, toks, CutPolicy(keep_messages=3, keep_fraction=1.0, search="backward", user_turn="ignore"), window=10_000)
    assert fwd.tail_start == 6 and back.tail_start == 1


def test_summaries_alone_are_not_worth_resummarizing():
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "summary"},
            {"role": "assistant", "content": "ack"},
            {"role": "assistant", "content": None, "tool_calls": [call("x")]}]
    msgs, toks = counted(raws)
    for m, prov in ((msgs[1], Provenance.SUMMARY), (msgs[2], Provenance.ACKNOWLEDGEMENT)):
        m.provenance, m.ordinal = prov, None
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=0, keep_fraction=0.0, user_turn="ignore"), window=100_000)
    assert not plan


def test_keep_fraction_0_keeps_no_tail_whatever_keep_messages_and_the_note_says_so():
    """keep_messages is a ceiling: a zero token budget wins and the cut falls at the end."""
    msgs, toks = counted(chat(turns=20))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=8, keep_fraction=0.0), window=128_000)
    assert plan and plan.tail_start == len(msgs) and plan.boundary == "end"
    assert plan.evicted == list(range(1, len(msgs)))
    assert plan.notes == [NO_TAIL_NOTE + ": nothing after the head stays verbatim"]
    assert not any("no user turn" in note for note in plan.notes)  # there were user turns; no tail was allowed
