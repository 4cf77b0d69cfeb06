"""Clearing before a model call: old results become placeholders with recovery hints."""
import json

import pytest

from compaction.archive import MemoryArchive
from compaction.context import check_tool_pairs
from compaction.reduction.edits import FAILURE_WORDS
from compaction.reduction.pipeline import before_call, clearing_due

from .helpers import (
    SESSION,
    arrive,
    assert_every_reduction_loads_exactly,
    assert_replay_exact,
    call,
    commit,
    counter,
    policy,
    reduce,
    run,
    total,
)

OUT = "def handler(request):\n    return render(request, 'page.html', context)\n" * 40  # ~2.9k chars


def clearing(**kw):
    base = {"trigger_tokens": 1000, "trigger_fraction": None, "keep": 1}
    base.update(kw)
    return policy(truncation={"enabled": False}, clearing=base)


def test_results_older_than_the_protected_round_are_replaced_by_placeholders():
    raws = run(rounds=8, output=OUT)
    msgs, r = reduce(raws, clearing())
    assert r.abandoned is None
    cleared = [m for m in r.messages if m.reduction]
    assert [m.tool_call_id for m in cleared] == [f"c{i}" for i in range(7)]
    assert r.messages[-1] is msgs[-1] and r.messages[-2] is msgs[-2]  # the last round is untouched
    check_tool_pairs(r.messages)
    for m in cleared:
        text = m.raw["content"]
        assert m.raw["tool_call_id"] == m.tool_call_id and m.raw["role"] == "tool"
        assert "`bash`" in text and m.tool_call_id in text and m.reduction["archive_ref"] in text
        assert f'session_load(handle="{m.reduction["archive_ref"]}"' in text
        assert m.reduction["kind"] == "cleared" and m.reduction["original_chars"] == len(raws[m.ordinal]["content"])
    assert len(r.entries) == 7 and r.tokens_cleared > 0 and r.tokens_truncated == 0
    assert {e["type"] for e in r.events} == {"tool_output_cleared"}
    assert all(row["fate"] == "cleared" and "clear threshold" in row["reason"] for row in r.ledger)


def test_placeholders_say_the_call_ran_and_never_sound_like_a_failure():
    for lang, bad in (("en", FAILURE_WORDS), ("zh", ("失败", "错误", "丢失", "不可用"))):
        _, r = reduce(run(rounds=3, output=OUT), policy(language=lang, truncation={"enabled": False},
                                                        clearing={"trigger_tokens": 1000, "keep": 1}))
        text = r.messages[3].raw["content"]
        assert not any(w in text.lower() for w in bad), text
        assert ("ran and returned" in text) if lang == "en" else ("已执行" in text)


def test_nothing_is_cleared_below_the_threshold_and_the_input_list_comes_back():
    msgs, r = reduce(run(rounds=8, output=OUT), clearing(trigger_tokens=10_000_000))
    assert r.messages is msgs and r.entries == [] and r.ledger == []
    assert "not over the clear threshold" in r.abandoned


def test_the_threshold_can_be_a_fraction_of_the_window():
    raws = run(rounds=8, output=OUT)
    size = total(reduce(raws, clearing(trigger_tokens=10_000_000))[0])
    pol = clearing(trigger_tokens=None, trigger_fraction=0.5)
    assert reduce(raws, pol, window=size * 3)[1].abandoned
    assert reduce(raws, pol, window=size)[1].abandoned is None


def test_more_recent_rounds_can_be_protected():
    _, r = reduce(run(rounds=8, output=OUT), clearing(keep=3))
    assert [m.tool_call_id for m in r.messages if m.reduction] == [f"c{i}" for i in range(5)]


def test_keep_can_count_single_tool_uses_across_parallel_calls():
    raws = [{"role": "user", "content": "look at three files"},
            {"role": "assistant", "content": None, "tool_calls": [call("p1", "read"), call("p2", "read"), call("p3", "read")]},
            {"role": "tool", "tool_call_id": "p1", "content": OUT},
            {"role": "tool", "tool_call_id": "p2", "content": OUT},
            {"role": "tool", "tool_call_id": "p3", "content": OUT},
            {"role": "assistant", "content": None, "tool_calls": [call("p4", "read"), call("p5", "read")]},
            {"role": "tool", "tool_call_id": "p4", "content": OUT},
            {"role": "tool", "tool_call_id": "p5", "content": OUT}]
    _, r = reduce(raws, clearing(keep=3, keep_unit="tool_uses"))
    assert [m.tool_call_id for m in r.messages if m.reduction] == ["p1", "p2"]
    check_tool_pairs(r.messages)
    _, r = reduce(raws, clearing(keep=1, keep_unit="rounds"))
    assert [m.tool_call_id for m in r.messages if m.reduction] == ["p1", "p2", "p3"]


def test_call_arguments_can_be_cleared_too_and_stay_valid_json():
    args = json.dumps({"path": "src/app.py", "content": OUT})
    raws = [{"role": "user", "content": "write it"}]
    for i in range(4):
        raws += [{"role": "assistant", "content": None, "tool_calls": [call(f"w{i}", "write_file", args)]},
                 {"role": "tool", "tool_call_id": f"w{i}", "content": OUT}]
    archive = MemoryArchive()
    _, r = reduce(raws, clearing(clear_tool_inputs=True))
    commit(r, archive)
    edited = [m for m in r.messages if m.role == "assistant" and m.reduction]
    assert len(edited) == 3
    for m in edited:
        new_args = json.loads(m.raw["tool_calls"][0]["function"]["arguments"])
        assert "archived" in new_args and m.reduction["archive_ref"] in new_args["archived"]
        assert m.reduction["field"] == "arguments" and m.reduction["cleared_calls"] == [m.raw["tool_calls"][0]["id"]]
    assert_replay_exact(archive, r.messages, raws)
    assert assert_every_reduction_loads_exactly(archive, r.messages, raws) == 6


def test_a_per_tool_override_can_switch_argument_clearing():
    args = json.dumps({"content": OUT})
    raws = [{"role": "user", "content": "go"}]
    for i in range(3):
        name = "write_file" if i % 2 == 0 else "bash"
        raws += [{"role": "assistant", "content": None, "tool_calls": [call(f"w{i}", name, args)]},
                 {"role": "tool", "tool_call_id": f"w{i}", "content": OUT}]
    _, r = reduce(raws, policy(truncation={"enabled": False}, clearing={"trigger_tokens": 100, "keep": 0},
                               tools={"write_file": {"clear_inputs": True}}))
    edited_calls = [m.raw["tool_calls"][0]["id"] for m in r.messages if m.role == "assistant" and m.reduction]
    assert edited_calls == ["w0", "w2"]


def test_a_second_call_never_clears_or_archives_anything_twice():
    raws = run(rounds=8, output=OUT)
    archive = MemoryArchive()
    _, first = reduce(raws, clearing())
    commit(first, archive)
    raws2 = raws + [{"role": "user", "content": "continue"}]
    live = first.messages + reduce(raws2, clearing(trigger_tokens=10**9))[0][-1:]
    second = before_call(live, policy=clearing(keep=0), counter=counter(), window=100_000, session_id=SESSION,
                         total_tokens=total(live))
    commit(second, archive)
    ids = [row["message_id"] for row in second.ledger]
    assert ids == ["m000017"]  # only the result the first call protected
    third = before_call(second.messages, policy=clearing(keep=0), counter=counter(), window=100_000,
                        session_id=SESSION, total_tokens=10**6)
    assert third.abandoned and third.entries == [] and third.messages is second.messages
    assert_replay_exact(archive, second.messages, raws2)


def test_a_result_truncated_on_arrival_is_cleared_later_pointing_at_its_first_entry():
    big = "row,value\n" * 9000
    raws = run(rounds=4, output=lambda i: big)
    pol = policy(truncation={"max_chars": 20_000}, clearing={"trigger_tokens": 1000, "keep": 1})
    live, archive = arrive(raws, pol)
    first_refs = {m.id: m.reduction["archive_ref"] for m in live if m.reduction}
    assert len(first_refs) == 4
    r = before_call(live, policy=pol, counter=counter(), window=100_000, session_id=SESSION, total_tokens=total(live))
    assert len(r.ledger) == 3 and r.entries == []  # the originals are already archived
    for m in r.messages:
        if m.reduction and m.reduction["kind"] == "cleared":
            assert m.reduction["archive_ref"] == first_refs[m.id]
            assert first_refs[m.id] in m.raw["content"]
            assert m.reduction["original_chars"] == len(big)
    commit(r, archive)
    assert_replay_exact(archive, r.messages, raws)
    assert_every_reduction_loads_exactly(archive, r.messages, raws)


def test_a_placeholder_never_replaces_a_result_smaller_than_itself():
    raws = run(rounds=6, output=lambda i: "ok" if i % 2 else OUT)
    _, r = reduce(raws, clearing(keep=0))
    assert [m.tool_call_id for m in r.messages if m.reduction] == ["c0", "c2", "c4"]


def test_small_results_can_be_left_alone_by_size():
    raws = run(rounds=6, output=lambda i: OUT * (3 if i % 2 else 1))
    _, r = reduce(raws, clearing(keep=0, min_result_tokens=1500))
    assert [m.tool_call_id for m in r.messages if m.reduction] == ["c1", "c3", "c5"]


def test_a_custom_placeholder_is_used_verbatim_or_filled_in():
    _, r = reduce(run(rounds=3, output=OUT), clearing(placeholder="[cleared]"))
    assert r.messages[3].raw["content"] == "[cleared]" and r.messages[3].reduction["archive_ref"]
    _, r = reduce(run(rounds=3, output=OUT), clearing(placeholder="[{tool_name} {tool_call_id} -> {handle}]"))
    assert r.messages[3].raw["content"] == f"[bash c0 -> {r.messages[3].reduction['archive_ref']}]"


def test_stop_mode_clears_oldest_first_until_enough_is_reclaimed():
    raws = run(rounds=8, output=OUT)
    _, r = reduce(raws, clearing(clear_at_least_tokens=1000, at_least_mode="stop"))
    cleared = [m.tool_call_id for m in r.messages if m.reduction]
    assert cleared == ["c0", "c1"]  # each frees ~550 tokens; two are enough
    assert r.tokens_cleared >= 1000


def test_cleared_results_replay_byte_exact_and_load_exactly_from_the_archive():
    raws = run(rounds=10, output=lambda i: OUT * (i + 1))
    archive = MemoryArchive()
    _, r = reduce(raws, clearing(keep=2))
    commit(r, archive)
    assert_replay_exact(archive, r.messages, raws)
    assert assert_every_reduction_loads_exactly(archive, r.messages, raws) == 8


def test_a_fraction_trigger_without_a_window_changes_nothing_and_says_why():
    msgs, r = reduce(run(rounds=4, output=OUT), clearing(trigger_tokens=None, trigger_fraction=0.1), window=None)
    assert r.messages is msgs and "needs the window size" in r.abandoned


def test_parallel_results_are_cleared_one_by_one_and_stay_paired():
    raws = [{"role": "user", "content": "inspect"}]
    for k in range(3):
        ids = [f"r{k}{j}" for j in range(3)]
        raws.append({"role": "assistant", "content": None, "tool_calls": [call(i, "read") for i in ids]})
        raws += [{"role": "tool", "tool_call_id": i, "content": OUT if j != 1 else "short"} for j, i in enumerate(ids)]
    archive = MemoryArchive()
    _, r = reduce(raws, clearing(keep=1))
    commit(r, archive)
    assert [m.tool_call_id for m in r.messages if m.reduction] == ["r00", "r02", "r10", "r12"]
    check_tool_pairs(r.messages)
    assert_replay_exact(archive, r.messages, raws)
    assert_every_reduction_loads_exactly(archive, r.messages, raws)


def test_hooks_given_as_a_dict_are_checked_for_typos():
    with pytest.raises(TypeError, match="unknown reduction hook"):
        reduce(run(rounds=2, output=OUT), clearing(), hooks={"rewriter": lambda c, r: None})


def test_clearing_due_is_a_cheap_check_of_the_thresholds():
    pol = clearing(trigger_tokens=5000, trigger_fraction=0.5)
    assert not clearing_due(pol, 4000, 100_000)
    assert clearing_due(pol, 5001, 100_000)
    assert clearing_due(pol, 4000, 6000)  # half of a 6k window
    assert not clearing_due(policy(enabled=False), 10**9, 1000)
    assert not clearing_due(policy(clearing={"enabled": False}), 10**9, 1000)
    assert clearing_due(policy(clearing={"enabled": False}, passes={"enabled": True}), 0, 1000)
