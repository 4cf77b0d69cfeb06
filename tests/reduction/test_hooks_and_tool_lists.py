"""Rewrite and post-process hooks, per-tool handlers, and the keep / exclude / force-clean lists."""
import json

from compaction import archive_tools
from compaction.archive import MemoryArchive
from compaction.context import check_tool_pairs
from compaction.messages import Provenance
from compaction.reduction.hooks import ReductionHooks, Replacement

from .helpers import (
    arrive,
    assert_every_reduction_loads_exactly,
    assert_replay_exact,
    call,
    commit,
    policy,
    reduce,
    run,
    tool_round,
)

OUT = "Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'user'\n" * 25


def clearing(**kw):
    return policy(truncation={"enabled": False},
                  clearing={"trigger_tokens": 500, "trigger_fraction": None, "keep": 1, **kw.pop("clearing", {})}, **kw)


def write_session():
    raws = [{"role": "user", "content": "create the files"}]
    for i in range(3):
        args = json.dumps({"path": f"src/mod{i}.py", "content": OUT})
        raws += [{"role": "assistant", "content": None, "tool_calls": [call(f"w{i}", "write_file", args)]},
                 {"role": "tool", "tool_call_id": f"w{i}", "content": f"Wrote {len(OUT)} bytes to src/mod{i}.py\n" + OUT}]
    raws += tool_round("b0", OUT, "bash")
    return raws


def collapse_writes(call_msg, results):
    fn = call_msg.tool_calls[0]["function"]
    if fn["name"] != "write_file":
        return None
    path = json.loads(fn["arguments"])["path"]
    return [{"role": "user", "content": f"<system-reminder>You wrote {path} earlier.</system-reminder>"}]


def test_the_rewrite_hook_collapses_a_file_write_into_a_one_line_reminder():
    raws = write_session()
    archive = MemoryArchive()
    _, r = reduce(raws, clearing(), hooks={"rewrite": collapse_writes})
    commit(r, archive)
    reminders = [m for m in r.messages if m.provenance is Provenance.PRESERVED]
    assert [m.raw["content"] for m in reminders] == [
        f"<system-reminder>You wrote src/mod{i}.py earlier.</system-reminder>" for i in range(3)]
    assert all(m.reduction["kind"] == "rewritten" and m.reduction["archive_ref"] for m in reminders)
    assert len(r.messages) == len(raws) - 3
    check_tool_pairs(r.messages)
    removed = [row for row in r.ledger if "rewrite hook" in row["reason"]]
    assert len(removed) == 6 and all(row["tokens_after"] == 0 for row in removed)
    assert_replay_exact(archive, r.messages, raws)
    # the removed originals can still be read back, by message id or tool_call_id
    assert archive_tools.load(archive, "s1", "w1")["content"] == raws[4]["content"]
    assert json.loads(archive_tools.load(archive, "s1", "w1", field="arguments")["content"])["path"] == "src/mod1.py"


def test_a_rewrite_that_breaks_tool_pairing_is_ignored_with_a_warning():
    def drop_result(call_msg, results):
        return [call_msg]

    _, r = reduce(write_session(), clearing(), hooks={"rewrite": drop_result})
    warnings = [e for e in r.events if e.get("code") == "rewrite_rejected"]
    assert len(warnings) == 3 and "has no result" in warnings[0]["message"]
    assert all(m.provenance is Provenance.ORIGINAL for m in r.messages)
    check_tool_pairs(r.messages)
    assert len([row for row in r.ledger if row["fate"] == "cleared"]) == 3  # normal clearing went on


def test_a_rewrite_hook_that_raises_does_not_stop_the_reduction():
    def boom(call_msg, results):
        raise RuntimeError("hook bug")

    _, r = reduce(write_session(), clearing(), hooks=ReductionHooks(rewrite=boom))
    assert any(e.get("code") == "rewrite_hook_raised" for e in r.events)
    assert r.ledger


def test_a_rewrite_may_edit_a_message_in_place():
    def shorten_result(call_msg, results):
        res = results[0]
        return [call_msg, res.with_raw(dict(res.raw, content="(file written)"))]

    archive = MemoryArchive()
    raws = write_session()
    _, r = reduce(raws, clearing(), hooks={"rewrite": shorten_result})
    commit(r, archive)
    edited = [m for m in r.messages if m.raw.get("content") == "(file written)"]
    assert len(edited) == 3 and all(m.reduction["kind"] == "cleared" and m.ordinal is not None for m in edited)
    assert_replay_exact(archive, r.messages, raws)


def test_the_post_process_hook_sees_the_result_and_may_replace_it():
    seen = []

    def post(result):
        seen.append(len(result.ledger))
        result.events.append({"type": "custom", "note": "saved state"})
        return result

    _, r = reduce(run(rounds=4, output=OUT), clearing(), hooks={"post_process": post})
    assert seen == [3] and r.events[-1] == {"type": "custom", "note": "saved state"}


def test_per_tool_handlers_can_skip_replace_or_fall_back():
    raws = run(rounds=4, output=OUT, name=lambda i: ["grep", "cat", "bash", "bash"][i])
    archive = MemoryArchive()
    hooks = {"clear_handlers": {
        "grep": lambda d: False,                                                   # leave it
        "cat": lambda d: Replacement(f"[cat output in {d.handle}]", arguments='{"cmd": "cat"}'),
        "bash": lambda d: None,                                                    # default placeholder
    }}
    _, r = reduce(raws, clearing(clearing={"keep": 0}), hooks=hooks)
    commit(r, archive)
    by_call = {m.tool_call_id: m for m in r.messages if m.role == "tool"}
    assert by_call["c0"].reduction is None
    assert by_call["c1"].raw["content"] == f"[cat output in {by_call['c1'].reduction['archive_ref']}]"
    assert r.messages[4].raw["tool_calls"][0]["function"]["arguments"] == '{"cmd": "cat"}'
    assert "ran and returned" in by_call["c2"].raw["content"]
    assert_replay_exact(archive, r.messages, raws)


def test_a_failing_handler_falls_back_to_the_default_and_warns():
    def broken(detail):
        raise ValueError("nope")

    raws = run(rounds=2, output=lambda i: "yes\n" * 20_000)
    live, _ = arrive(raws, policy(), hooks={"truncate_handlers": {"bash": broken}})
    assert all(m.reduction for m in live if m.role == "tool")


def test_a_truncate_handler_can_supply_its_own_preview():
    raws = run(rounds=1, output=lambda i: "yes\n" * 20_000)
    live, archive = arrive(raws, policy(), hooks={"truncate_handlers": {"bash": lambda d: f"20k lines of yes ({d.handle})"}})
    assert live[-1].raw["content"] == f"20k lines of yes ({live[-1].reduction['archive_ref']})"
    assert_every_reduction_loads_exactly(archive, live, raws)


def test_excluded_and_kept_tools_are_never_cleared_and_keep_beats_force_clean():
    raws = run(rounds=6, output=OUT, name=lambda i: ["read_file", "bash", "session_search"][i % 3])
    _, r = reduce(raws, clearing(clearing={"keep": 0, "exclude_tools": ["read_file"]}))
    cleared = {m.tool_call_id for m in r.messages if m.reduction}
    assert cleared == {"c1", "c4"}
    _, r = reduce(raws, clearing(clearing={"keep": 0}, tools={"bash": {"skip_clearing": True}}))
    assert {m.tool_call_id for m in r.messages if m.reduction} == {"c0", "c3"}


def test_unknown_tool_names_in_the_lists_warn_instead_of_failing():
    raws = run(rounds=4, output=OUT)
    pol = clearing(clearing={"exclude_tools": ["read_fiel"]}, force_clean_tools=["grpe"],
                   tools={"nonexistent": {"skip_clearing": True}})
    _, r = reduce(raws, pol)
    unknown = {(e["setting"], e["tool_name"]) for e in r.events if e.get("code") == "unknown_tool_name"}
    assert unknown == {("clearing.exclude_tools", "read_fiel"), ("force_clean_tools", "grpe"), ("tools", "nonexistent")}
    assert r.ledger  # the reduction itself went ahead


def test_summaries_preserved_copies_and_pinned_messages_are_left_alone():
    raws = run(rounds=4, output=OUT)
    msgs, _ = reduce(raws, clearing(clearing={"trigger_tokens": 10**9}))
    msgs = list(msgs)
    msgs[3] = msgs[3].with_raw(msgs[3].raw, pinned=True)
    _, r = reduce(msgs, clearing(clearing={"keep": 0}))
    assert {m.tool_call_id for m in r.messages if m.reduction} == {"c1", "c2", "c3"}
