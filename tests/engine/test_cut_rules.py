"""The cut's rules one at a time, at their edges: what mutation testing of compaction/cut.py
found no test pinning down (roles spelled as the API spells them, exact tail bounds, the
first user turn, the reasons a plan gives)."""
from compaction.cut import NO_TAIL_NOTE, NoCut, plan_cut, unsafe_boundaries
from compaction.messages import Message, Provenance
from compaction.policy import CutPolicy
from tests.engine.helpers import chat, counted, tool_round

WIDE = 100_000


def users_and_answers(n: int, size: int = 40) -> list[dict]:
    out = []
    for i in range(n):
        out += [{"role": "user", "content": f"q{i} " + "q" * size}, {"role": "assistant", "content": f"a{i} " + "a" * size}]
    return out


def test_every_leading_system_and_developer_message_is_head_and_never_evicted():
    raws = [{"role": "system", "content": "s"}, {"role": "developer", "content": "d"},
            {"role": "system", "content": "s2"}] + users_and_answers(6)
    msgs, toks = counted(raws)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0), window=WIDE)
    assert plan.head == [0, 1, 2]
    assert plan.evicted[0] == 3 and not set(plan.evicted) & {0, 1, 2}


def test_a_session_of_system_messages_only_has_no_cut_and_says_why():
    msgs, toks = counted([{"role": "system", "content": "s"}, {"role": "developer", "content": "d"}])
    plan = plan_cut(msgs, toks, CutPolicy(), window=WIDE)
    assert isinstance(plan, NoCut) and plan.reason == "nothing but system messages"
    msgs, toks = counted([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
    one = plan_cut(msgs, toks, CutPolicy(keep_messages=0, keep_fraction=1.0), window=WIDE)
    assert not isinstance(one, NoCut) or one.reason != "nothing but system messages"


def test_later_system_and_developer_messages_are_pinned_but_the_engines_summary_is_not():
    raws = [{"role": "system", "content": "s"}] + users_and_answers(2)
    raws += [{"role": "developer", "content": "later rule"}] + users_and_answers(2)
    raws += [{"role": "system", "content": "later system"}] + users_and_answers(3)
    msgs, toks = counted(raws)
    summary = Message({"role": "system", "content": "[summary]"}, "sum-1", Provenance.SUMMARY)
    msgs = msgs[:1] + [summary] + msgs[1:]
    toks = toks[:1] + [toks[1]] + toks[1:]
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0), window=WIDE)
    roles = {msgs[i].raw["content"]: i for i in range(len(msgs))}
    assert plan.pinned == [roles["later rule"], roles["later system"]]
    assert 1 in plan.evicted, "the previous summary is folded into the next one, not pinned"


def test_pin_first_user_keeps_only_the_first_original_user_message():
    msgs, toks = counted([{"role": "system", "content": "s"}] + users_and_answers(6))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0), window=WIDE, pin_first_user=True)
    assert plan.pinned == [1]
    assert plan.evicted[0] == 2
    without = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0), window=WIDE)
    assert without.pinned == [] and without.evicted[0] == 1


def test_a_preserved_copy_of_the_first_user_message_counts_as_the_first_user_turn():
    msgs, toks = counted([{"role": "system", "content": "s"}] + users_and_answers(6))
    preserved = Message({"role": "user", "content": "task (preserved)"}, "p-1", Provenance.PRESERVED)
    msgs = msgs[:1] + [preserved] + msgs[1:]
    toks = toks[:1] + [toks[1]] + toks[1:]
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0), window=WIDE, pin_first_user=True)
    assert plan.pinned == [], "the preserved copy already carries the task: no second user message is pinned"


def test_a_tool_result_whose_call_is_missing_never_starts_the_tail():
    raws = [{"role": "user", "content": "u"}, {"role": "tool", "tool_call_id": "gone", "content": "r"},
            {"role": "assistant", "content": "a"}]
    msgs, _ = counted(raws)
    assert unsafe_boundaries(msgs) == [False, True, False, False]


def test_a_pinned_tool_call_keeps_its_whole_group_and_nothing_else():
    raws = [{"role": "system", "content": "s"}] + users_and_answers(2)
    raws += tool_round("c1", "result one") + users_and_answers(4)
    msgs, toks = counted(raws)
    msgs[5] = msgs[5].with_raw(msgs[5].raw, pinned=True)    # the assistant message with the call
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0), window=WIDE)
    assert plan.pinned == [5, 6]
    assert plan.evicted == [1, 2, 3, 4] + list(range(7, plan.tail_start))


def test_the_tail_keeps_exactly_keep_messages_and_exactly_the_token_budget():
    msgs, toks = counted([{"role": "system", "content": "s"}] + users_and_answers(8))
    n = len(msgs)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=4, keep_fraction=1.0), window=WIDE)
    assert plan.target == n - 4 and plan.tail_start == n - 4
    last_four = sum(t.total for t in toks[n - 4:])
    exact = plan_cut(msgs, toks, CutPolicy(keep_messages=99, keep_fraction=1.0), window=last_four)
    assert exact.target == n - 4, "a tail exactly as large as the budget fits"
    under = plan_cut(msgs, toks, CutPolicy(keep_messages=99, keep_fraction=1.0), window=last_four - 1)
    assert under.target == n - 3


def test_min_evicted_messages_is_a_count_of_evicted_originals():
    msgs, toks = counted([{"role": "system", "content": "s"}] + users_and_answers(2))
    assert plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0, min_evicted_messages=2),
                    window=WIDE).evicted == [1, 2]
    three = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0, min_evicted_messages=3), window=WIDE)
    assert (three.tail_start, three.evicted, three.boundary) == (4, [1, 2, 3], "safe")
    refused = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0, min_evicted_messages=5), window=WIDE)
    assert isinstance(refused, NoCut) and refused.reason.startswith("no safe cut")


def test_backward_search_keeps_more_and_still_prefers_a_user_turn():
    msgs, toks = counted([{"role": "system", "content": "s"}] + users_and_answers(6))
    n = len(msgs)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=3, keep_fraction=1.0, search="backward"), window=WIDE)
    assert plan.boundary == "user_turn" and plan.tail_start == n - 4 and plan.target == n - 3
    assert plan.notes == ["kept more than the tail bounds allow so that no tool call is separated from its results"]
    forward = plan_cut(msgs, toks, CutPolicy(keep_messages=3, keep_fraction=1.0), window=WIDE)
    assert forward.tail_start == n - 2


def test_require_without_a_user_turn_in_reach_is_no_cut_naming_the_rule():
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for i in range(6):
        raws += tool_round(f"c{i}", "out " * 20)
    msgs, toks = counted(raws)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=4, keep_fraction=1.0, user_turn="require"), window=WIDE)
    assert isinstance(plan, NoCut)
    assert plan.reason == ("no user turn can start the kept tail without splitting a tool call from its results "
                           "(policy cut.user_turn=require)")
    fallback = plan_cut(msgs, toks, CutPolicy(keep_messages=4, keep_fraction=1.0), window=WIDE)
    assert fallback.boundary == "safe"
    assert fallback.notes == ["no user turn in reach; fell back to the nearest safe boundary"]


def test_no_safe_cut_names_both_causes():
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": None, "tool_calls": tool_round("c0")[0]["tool_calls"]}]
    msgs, toks = counted(raws)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=0, keep_fraction=1.0, user_turn="ignore",
                                          min_evicted_messages=2), window=WIDE)
    assert isinstance(plan, NoCut)
    assert plan.reason == ("no safe cut: every boundary in reach would split a tool call from its results "
                           "or evict nothing but summaries and pinned messages")


def test_notes_say_when_a_tool_group_made_the_tail_longer_and_when_no_tail_is_kept():
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    raws.append({"role": "assistant", "content": None,
                 "tool_calls": tool_round("a")[0]["tool_calls"] + tool_round("b")[0]["tool_calls"]})
    raws += [{"role": "tool", "tool_call_id": "a", "content": "ra"}, {"role": "tool", "tool_call_id": "b", "content": "rb"}]
    raws += [{"role": "user", "content": "next"}, {"role": "assistant", "content": "done"}]
    msgs, toks = counted(raws)
    longer = plan_cut(msgs, toks, CutPolicy(keep_messages=3, keep_fraction=1.0, user_turn="ignore",
                                            search="backward"), window=WIDE)
    assert longer.tail_start == 2 and longer.target == 4
    assert longer.notes == ["kept more than the tail bounds allow so that no tool call is separated from its results"]
    msgs, toks = counted(chat(turns=3))
    none = plan_cut(msgs, toks, CutPolicy(keep_messages=0, keep_fraction=1.0), window=WIDE)
    assert none.tail_start == len(msgs) and none.boundary == "end"
    assert none.notes == [NO_TAIL_NOTE + ": nothing after the head stays verbatim"]
    some = plan_cut(msgs, toks, CutPolicy(keep_messages=0, keep_fraction=1.0, search="backward"), window=WIDE)
    assert some.notes[-1] == NO_TAIL_NOTE + ("" if some.tail_start < len(msgs) else
                                            ": nothing after the head stays verbatim")


def test_when_everything_fits_the_target_is_the_first_message_after_the_head():
    msgs, toks = counted(chat(turns=3))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=99, keep_fraction=1.0), window=WIDE)
    assert plan.target == 1


def test_the_token_budget_counts_each_messages_own_tokens():
    raws = [{"role": "system", "content": "s"}]
    for i in range(6):   # short questions, long answers: a neighbour's count would move the target
        raws += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i} " + "a" * 400}]
    raws.append({"role": "user", "content": "next?"})
    msgs, toks = counted(raws)
    n = len(msgs)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=99, keep_fraction=1.0), window=toks[-1].total)
    assert plan.target == n - 1, "the latest message alone fits a budget of its own size"
    last_three = sum(t.total for t in toks[n - 3:])
    assert plan_cut(msgs, toks, CutPolicy(keep_messages=99, keep_fraction=1.0), window=last_three).target == n - 3


def test_backward_search_with_everything_in_reach_cuts_right_after_the_head():
    msgs, toks = counted(chat(turns=3))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=99, keep_fraction=1.0, search="backward"), window=WIDE)
    assert (plan.tail_start, plan.boundary, plan.evicted) == (2, "safe", [1])


def test_require_cuts_at_a_user_turn_when_one_is_in_reach():
    msgs, toks = counted([{"role": "system", "content": "s"}] + users_and_answers(6))
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=3, keep_fraction=1.0, user_turn="require"), window=WIDE)
    assert plan.boundary == "user_turn" and msgs[plan.tail_start].role == "user"


def test_a_pinned_message_that_starts_the_tail_is_tail_not_pinned():
    msgs, toks = counted([{"role": "system", "content": "s"}] + users_and_answers(4))
    msgs[7] = msgs[7].with_raw(msgs[7].raw, pinned=True)
    plan = plan_cut(msgs, toks, CutPolicy(keep_messages=2, keep_fraction=1.0), window=WIDE)
    assert plan.tail_start == 7 and plan.pinned == []
