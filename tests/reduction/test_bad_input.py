"""Bad input: binary garbage, a 10 MB output, empty results, odd content. Handled, explained, nothing lost."""
import functools
import json
import random

from compaction import archive_tools
from compaction.archive import MemoryArchive
from compaction.messages import Message, wrap_originals
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
    reduce,
    run,
)

TEN_MB = 10 * 1024 * 1024


@functools.lru_cache(maxsize=1)
def ten_megabytes() -> str:
    """10 MiB of log-like text (numbered lines drawn from a pool of random ones)."""
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "request", "GET", "/api/v1/items", "200", "404", "latency=12ms"]
    pool = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(4096)]
    text = "".join(f"{i:08d} {pool[i % 4093]}\n" for i in range(TEN_MB // 50))
    return text[:TEN_MB]


def test_binary_garbage_is_archived_whole_and_replaced_by_an_escaped_preview():
    rng = random.Random(1)
    garbage = bytes(rng.randrange(256) for _ in range(6000)).decode("latin-1")
    raws = run(rounds=1, output=lambda i: garbage)
    live, archive = arrive(raws, policy())
    msg = live[-1]
    text = msg.raw["content"]
    assert msg.reduction["kind"] == "truncated" and "look like binary data" in text
    assert text.isprintable() or "\n" not in text  # the notice is plain text
    assert "\\x" in text  # the preview shows escapes, not raw control bytes
    assert_replay_exact(archive, live, raws)
    assert_every_reduction_loads_exactly(archive, live, raws)


def test_replacement_characters_from_a_failed_decode_count_as_binary():
    rng = random.Random(2)
    garbage = bytes(rng.randrange(128, 256) for _ in range(4000)).decode("utf-8", errors="replace")
    live, archive = arrive(run(rounds=1, output=lambda i: garbage), policy())
    assert "binary" in live[-1].raw["content"]


def test_short_binary_output_and_ordinary_unicode_are_left_alone():
    for text in ("\x00\x01\x02 tiny blob", "Grüße, 世界! — naïve café ✓\n" * 30):
        live, archive = arrive(run(rounds=1, output=lambda i, text=text: text), policy())
        assert live[-1].reduction is None and archive.entries(SESSION) == []


def test_a_ten_megabyte_output_is_truncated_on_arrival_and_recovered_exactly():
    big = ten_megabytes()
    raws = run(rounds=1, output=lambda i: big)
    msg = wrap_originals(raws)[-1]
    r = on_append(msg, policy=policy(), counter=counter(), session_id=SESSION, tool_name="bash")
    archive = MemoryArchive()
    commit(r, archive)
    new = r.messages[0]
    assert len(new.raw["content"]) < 51_000
    assert new.raw["content"].startswith(big[:1000]) and big[-500:] in new.raw["content"]
    assert r.events[0]["tokens_before"] > 2_000_000 > 20_000 > r.events[0]["tokens_after"]
    live = wrap_originals(raws)[:-1] + [new]
    assert_replay_exact(archive, live, raws)
    assert assert_every_reduction_loads_exactly(archive, live, raws, chunk=1_000_003) == 1
    got = archive_tools.load(archive, SESSION, "c0", 5_000_000, 64)
    assert got["content"] == big[5_000_000:5_000_064] and got["total_chars"] == TEN_MB


def test_a_ten_megabyte_output_is_cleared_before_a_call_when_truncation_is_off():
    big = ten_megabytes()
    raws = run(rounds=2, output=lambda i: big if i == 0 else "ok")
    archive = MemoryArchive()
    _, r = reduce(raws, policy(truncation={"enabled": False}, clearing={"trigger_tokens": 1000, "keep": 1}),
                  total_tokens=3_000_000)
    commit(r, archive)
    assert r.ledger[0]["tokens_before"] > 2_000_000 and r.messages[3].reduction["original_chars"] == TEN_MB
    assert_replay_exact(archive, r.messages, raws)


def test_empty_and_missing_results_are_never_touched():
    raws = run(rounds=4, output=lambda i: ["", "", "", ""][i])
    raws[3]["content"] = None
    raws[5]["content"] = []
    msgs, r = reduce(raws, policy(truncation={"max_chars": 1}, clearing={"trigger_tokens": 1, "keep": 0}))
    assert r.abandoned and r.messages is msgs
    live, archive = arrive(raws, policy(truncation={"max_chars": 1}))
    assert all(m.reduction is None for m in live) and archive.entries(SESSION) == []


def test_oversized_audio_or_file_parts_are_offloaded_and_loadable_by_part():
    audio = {"type": "input_audio", "input_audio": {"data": "UklGR" + "A" * 120_000, "format": "wav"}}
    raws = run(rounds=1, output=lambda i: [{"type": "text", "text": "recorded 3s"}, audio])
    live, archive = arrive(raws, policy())
    parts = live[-1].raw["content"]
    assert parts[0]["text"] == "recorded 3s" and "input_audio attachment" in parts[1]["text"]
    got = archive_tools.load(archive, SESSION, "c0", part=1)
    assert json.loads(got["content"]) == audio
    assert_replay_exact(archive, live, raws)


def test_a_result_whose_tool_is_unknown_still_gets_a_clear_notice():
    msg = wrap_originals([{"role": "tool", "tool_call_id": "orphan", "content": "log line\n" * 10_000}])[0]
    r = on_append(msg, policy=policy(), counter=counter(), session_id=SESSION, tool_name=None)
    assert "`unnamed tool`" in r.messages[0].raw["content"] and r.entries[0].items[0].tool_name is None


def test_content_of_an_unexpected_type_is_reported_not_crashed_on():
    msg = Message({"role": "tool", "tool_call_id": "x", "content": {"rows": 3}}, "m000001", ordinal=1)
    r = on_append(msg, policy=policy(truncation={"max_chars": 1}), counter=counter(), session_id=SESSION,
                  tool_name="db")
    assert r.messages == [msg] and r.entries == []
    assert r.events[0]["code"] == "unsupported_content"


def test_a_result_with_an_image_is_cleared_as_a_whole_and_replays_exactly():
    raws = session("claudecode_sessionshare__images-in-tool-results")["messages"] + [
        {"role": "assistant", "content": "Here is the screenshot."}, {"role": "user", "content": "thanks"}]
    archive = MemoryArchive()
    _, r = reduce(raws, policy(truncation={"enabled": False}, clearing={"trigger_tokens": 100, "keep": 0}))
    commit(r, archive)
    assert isinstance(r.messages[2].raw["content"], str) and r.messages[2].reduction["kind"] == "cleared"
    assert_replay_exact(archive, r.messages, raws)
    assert archive_tools.load(archive, SESSION, r.messages[2].tool_call_id, part=1)["content"] == \
        raws[2]["content"][1]["image_url"]["url"]
