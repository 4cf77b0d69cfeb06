"""Truncation on arrival: oversized tool results keep a head+tail preview, the full text is offloaded."""
import json
import re

from compaction import archive_tools
from compaction.archive import MemoryArchive
from compaction.messages import wrap_originals
from compaction.reduction.pipeline import on_append
from tests.corpus import session

from .helpers import (
    SESSION,
    arrive,
    assert_every_reduction_loads_exactly,
    assert_replay_exact,
    commit,
    counter,
    policy,
    run,
)

BIG = "".join(f"line {i:06d} of the build log\n" for i in range(4000))  # ~112k chars


def _append(raw, pol, tool_name="bash"):
    msg = wrap_originals([raw], start=7)[0]
    return msg, on_append(msg, policy=pol, counter=counter(), session_id=SESSION, tool_name=tool_name)


def test_an_oversized_result_keeps_its_head_and_tail_and_names_how_to_recover_it():
    msg, r = _append({"role": "tool", "tool_call_id": "call_9", "content": BIG}, policy())
    assert r.abandoned is None and len(r.messages) == 1 and len(r.entries) == 1
    new = r.messages[0]
    assert new.id == msg.id and new.ordinal == msg.ordinal and new.provenance is msg.provenance
    text = new.raw["content"]
    assert isinstance(text, str) and len(text) < 51_500
    assert text.startswith("line 000000 of the build log\n")
    assert "line 003999 of the build log" in text
    entry = r.entries[0]
    red = new.reduction
    assert red["kind"] == "truncated" and red["archive_ref"] == entry.id
    assert red["tool_call_id"] == "call_9" and red["tool_name"] == "bash"
    assert red["original_chars"] == len(BIG) and red["original_tokens"] > 20_000
    assert f"{len(BIG):,} characters" in text
    for needle in (entry.id, "call_9", "`bash`", f'session_load(handle="{entry.id}", offset=0, limit='):
        assert needle in text
    assert entry.kind == "offloaded" and entry.session_id == SESSION
    assert entry.items[0].raw is msg.raw and entry.items[0].ordinal == 7


def test_the_truncation_event_and_ledger_report_tokens_before_and_after():
    _, r = _append({"role": "tool", "tool_call_id": "call_9", "content": BIG}, policy())
    (ev,) = r.events
    assert ev["type"] == "tool_output_truncated" and ev["phase"] == "arrival"
    assert ev["message_id"] == "m000007" and ev["tool_call_id"] == "call_9" and ev["tool_name"] == "bash"
    assert ev["archive_ref"] == r.entries[0].id
    assert ev["tokens_before"] > ev["tokens_after"] > 0
    (row,) = r.ledger
    assert row["fate"] == "truncated" and "50,000-character limit" in row["reason"]
    assert r.tokens_truncated == ev["tokens_before"] - ev["tokens_after"] and r.tokens_cleared == 0


def test_a_result_within_the_limit_is_returned_as_the_same_object():
    msg, r = _append({"role": "tool", "tool_call_id": "c", "content": "short"}, policy())
    assert r.messages[0] is msg and r.entries == [] and r.abandoned == "within the size limits"
    assert not r


def test_nothing_happens_when_reduction_or_truncation_is_off():
    raw = {"role": "tool", "tool_call_id": "c", "content": BIG}
    for pol, why in ((policy(enabled=False), "reduction is disabled"),
                     (policy(truncation={"enabled": False}), "truncation is disabled")):
        msg, r = _append(raw, pol)
        assert r.messages == [msg] and r.entries == [] and r.abandoned == why


def test_the_limit_can_be_set_per_tool_and_tools_can_be_excluded_or_kept():
    raw = {"role": "tool", "tool_call_id": "c", "content": "z" * 3000}
    pol = policy(truncation={"max_chars": 10_000}, tools={"grep": {"max_chars": 1000}, "cat": {"skip_truncation": True}})
    assert _append(raw, pol, "grep")[1].abandoned is None
    assert _append(raw, pol, "bash")[1].abandoned == "within the size limits"
    assert "excluded" in _append(raw, policy(truncation={"max_chars": 100, "exclude_tools": ["bash"]}))[1].abandoned
    assert "excluded" in _append(raw, policy(truncation={"max_chars": 100}, tools={"cat": {"skip_truncation": True}}), "cat")[1].abandoned
    assert "kept" in _append(raw, policy(truncation={"max_chars": 100}, keep_tools=["bash"]))[1].abandoned
    # the recovery tools' own output is never truncated, even when not in keep_tools
    assert "kept" in _append(raw, policy(truncation={"max_chars": 100}, keep_tools=[]), "session_load")[1].abandoned


def test_the_budget_is_split_across_text_parts_so_short_parts_stay_whole():
    parts = [{"type": "text", "text": "header: exit code 0"},
             {"type": "text", "text": "A" * 60_000},
             {"type": "text", "text": "B" * 40_000}]
    _, r = _append({"role": "tool", "tool_call_id": "c", "content": parts}, policy(truncation={"max_chars": 10_000}))
    out = r.messages[0].raw["content"]
    assert isinstance(out, list) and len(out) == 4  # the three parts plus the notice
    assert out[0] == parts[0]
    kept_a = out[1]["text"].count("A")
    kept_b = out[2]["text"].count("B")
    assert kept_a + kept_b + len(parts[0]["text"]) <= 10_000
    assert abs(kept_a - kept_b) <= 2 and kept_a > 4_900
    assert "not shown here" in out[1]["text"] and "not shown here" in out[2]["text"]
    assert out[3]["type"] == "text" and r.entries[0].id in out[3]["text"]


def test_images_in_a_tool_result_are_counted_and_offloaded_when_oversized():
    raws = session("claudecode_sessionshare__images-in-tool-results")["messages"]
    live, archive = arrive(raws, policy(truncation={"image_max_chars": 100_000}))
    tool = next(m for m in live if m.role == "tool")
    assert tool.reduction["kind"] == "truncated"
    parts = tool.raw["content"]
    assert [p["type"] for p in parts] == ["text", "text"]
    assert "Image 1 of this result" in parts[1]["text"] and "image/png" in parts[1]["text"]
    original_url = raws[2]["content"][1]["image_url"]["url"]
    got = archive_tools.load(archive, SESSION, tool.reduction["archive_ref"], part=1)
    assert got["content"] == original_url and got["parts"][1] == {"index": 1, "type": "image_url", "chars": len(original_url)}
    assert_replay_exact(archive, live, raws)


def test_images_under_the_limits_are_kept_and_still_counted():
    image = session("claudecode_sessionshare__images-in-tool-results")["messages"][2]["content"][1]
    raw = {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": BIG[:20_000]}, image]}
    _, r = _append(raw, policy(truncation={"max_chars": 1000}), "shot")
    (ev,) = r.events
    assert ev["images"] == 1 and ev["image_tokens"] > 0 and ev["images_offloaded"] == 0
    content = r.messages[0].raw["content"]
    assert content[1] is image  # the image itself is untouched
    assert "1 image(s) kept" in content[-1]["text"]


def test_image_cost_can_trigger_offloading_too():
    raws = session("claudecode_sessionshare__images-in-tool-results")["messages"]
    live, _ = arrive(raws, policy(truncation={"image_max_tokens": 100}))
    tool = next(m for m in live if m.role == "tool")
    assert tool.reduction and all(p["type"] == "text" for p in tool.raw["content"])


def test_the_load_call_printed_in_the_notice_works_as_written():
    raws = run(rounds=2, output=lambda i: BIG)
    live, archive = arrive(raws, policy())
    tool = live[3]
    call = re.search(r"session_load\((.*?)\)", tool.raw["content"]).group(1)
    args = dict(re.findall(r'(\w+)=("[^"]*"|\d+)', call))
    args = {k: json.loads(v) for k, v in args.items()}
    reply = json.loads(archive_tools.handle_tool_call(archive, SESSION, "session_load", json.dumps(args)))
    assert reply["content"] == BIG[: args["limit"]] and reply["total_chars"] == len(BIG)
    assert reply["next_offset"] == args["limit"]


def test_truncated_results_replay_byte_exact_and_load_exactly():
    raws = run(rounds=6, output=lambda i: BIG[: 20_000 * (i + 1)])
    live, archive = arrive(raws, policy(truncation={"max_chars": 30_000}))
    assert sum(1 for m in live if m.reduction) == 5
    assert_replay_exact(archive, live, raws)
    assert assert_every_reduction_loads_exactly(archive, live, raws) == 5


def test_a_message_that_was_already_truncated_is_not_truncated_again():
    msg, r = _append({"role": "tool", "tool_call_id": "c", "content": BIG}, policy())
    again = on_append(r.messages[0], policy=policy(truncation={"max_chars": 100}), counter=counter(),
                      session_id=SESSION, tool_name="bash")
    assert again.messages[0] is r.messages[0] and again.entries == [] and "already truncated" in again.abandoned


def test_notices_follow_the_policy_language():
    _, r = _append({"role": "tool", "tool_call_id": "c", "content": BIG}, policy(language="zh"))
    text = r.messages[0].raw["content"]
    assert "输出已缩短" in text and "session_load(handle=" in text and "此处省略" in text


def test_entries_are_only_returned_never_written():
    archive = MemoryArchive()
    _, r = _append({"role": "tool", "tool_call_id": "c", "content": BIG}, policy())
    assert archive.entries(SESSION) == []
    commit(r, archive)
    assert [e.id for e in archive.entries(SESSION)] == [r.entries[0].id]


def test_parallel_results_arriving_together_are_each_truncated_on_their_own():
    raws = [{"role": "user", "content": "fetch both"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "p1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}},
                {"id": "p2", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "p1", "content": BIG},
            {"role": "tool", "tool_call_id": "p2", "content": BIG[:40_000]}]
    live, archive = arrive(raws, policy(tools={"grep": {"max_chars": 10_000}}))
    assert [m.reduction["tool_name"] for m in live[2:]] == ["fetch", "grep"]
    assert len(archive.entries(SESSION)) == 2
    assert_replay_exact(archive, live, raws)
    assert_every_reduction_loads_exactly(archive, live, raws)
