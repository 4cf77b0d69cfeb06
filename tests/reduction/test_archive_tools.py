"""Archive tools for agents: exact slices by handle, ranked search, and the session_load / session_search tools."""
import hashlib
import itertools
import json

import pytest

from compaction import archive_tools
from compaction.archive import ArchivedItem, ArchiveEntry, MemoryArchive, item_for
from compaction.errors import ArchiveError
from compaction.messages import wrap_originals

from .helpers import SESSION, commit, policy, reduce, run

_handles = itertools.count(1)


def next_handle() -> str:
    """A fresh handle for entries these tests write by hand."""
    return f"ar_{next(_handles):016x}"


LOG = "".join(f"{i:05d} GET /api/orders/{i} 200 {i % 97}ms\n" for i in range(3000))


@pytest.fixture()
def cleared():
    outputs = ["psycopg.errors.UniqueViolation: duplicate key value violates unique constraint \"orders_pkey\"\n" * 30,
               LOG,
               "Ran 42 tests in 3.2s\n\nOK\n" * 40,
               "数据库连接失败：无法连接到服务器 db.internal:5432，请检查防火墙配置。\n" * 40,
               "def compute_total(order):\n    return sum(line.price for line in order.lines)\n" * 30,
               "final"]
    raws = run(rounds=6, output=lambda i: outputs[i])
    for i in range(6):  # long commands, so clearing their arguments is worth it
        script = f"cat file_{i}.py\n" + "".join(f"echo step {k} of the migration check\n" for k in range(20))
        raws[2 + 2 * i]["tool_calls"][0]["function"]["arguments"] = json.dumps({"cmd": script})
    archive = MemoryArchive()
    _, r = reduce(raws, policy(truncation={"enabled": False},
                               clearing={"trigger_tokens": 100, "keep": 1, "clear_tool_inputs": True}))
    commit(r, archive)
    return raws, r, archive


def test_load_returns_the_exact_original_by_entry_id_tool_call_id_or_message_id(cleared):
    raws, r, archive = cleared
    log_msg = r.messages[5]
    ref = log_msg.reduction["archive_ref"]
    for handle in (ref, "c1", log_msg.id):
        got = archive_tools.load(archive, SESSION, handle)
        assert got["content"] == LOG and got["total_chars"] == len(LOG) and got["next_offset"] is None
        assert got["entry_id"] == ref and got["message_id"] == "m000005" and got["tool_call_id"] == "c1"
        assert got["tool_name"] == "bash" and got["role"] == "tool"


def test_offset_and_limit_slice_by_characters_and_report_the_next_offset(cleared):
    _, _, archive = cleared
    got = archive_tools.load(archive, SESSION, "c1", 1000, 500)
    assert got["content"] == LOG[1000:1500] and got["next_offset"] == 1500 and got["returned_chars"] == 500
    tail = archive_tools.load(archive, SESSION, "c1", len(LOG) - 10, 500)
    assert tail["content"] == LOG[-10:] and tail["next_offset"] is None
    past = archive_tools.load(archive, SESSION, "c1", len(LOG) + 5, 10)
    assert past["content"] == "" and past["next_offset"] is None
    cjk = archive_tools.load(archive, SESSION, "c3", 0, 7)
    assert cjk["content"] == "数据库连接失败"


def test_arguments_and_raw_messages_can_be_loaded_too(cleared):
    raws, r, archive = cleared
    args = archive_tools.load(archive, SESSION, "c2", field="arguments")
    assert args["content"] == raws[6]["tool_calls"][0]["function"]["arguments"] and args["role"] == "assistant"
    raw = archive_tools.load(archive, SESSION, "c2", field="raw")
    assert json.loads(raw["content"]) == raws[7]


def test_bad_handles_and_ranges_are_explained(cleared):
    _, _, archive = cleared
    with pytest.raises(ArchiveError, match="nothing archived under 'nope'"):
        archive_tools.load(archive, SESSION, "nope")
    with pytest.raises(ValueError, match="offset"):
        archive_tools.load(archive, SESSION, "c1", -1)
    with pytest.raises(ValueError, match="limit"):
        archive_tools.load(archive, SESSION, "c1", 0, 0)
    with pytest.raises(ValueError, match="field"):
        archive_tools.load(archive, SESSION, "c1", field="everything")
    with pytest.raises(ArchiveError, match="part"):
        archive_tools.load(archive, SESSION, "c1", part=3)


def test_an_entry_of_several_messages_is_addressed_item_by_item():
    msgs = wrap_originals([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}])
    archive = MemoryArchive()
    entry = ArchiveEntry(next_handle(), SESSION, "evicted", [item_for(m) for m in msgs])
    archive.write(entry)
    with pytest.raises(ArchiveError, match="holds 2 messages"):
        archive_tools.load(archive, SESSION, entry.id)
    assert archive_tools.load(archive, SESSION, f"{entry.id}#1")["content"] == "hi there"
    assert archive_tools.load(archive, SESSION, "m000000")["content"] == "hello"


def test_the_untouched_original_wins_over_later_reduced_copies(cleared):
    raws, r, archive = cleared
    # a later summary evicts the cleared message: the evicted copy holds the placeholder
    evicted = ArchiveEntry(next_handle(), SESSION, "evicted", [item_for(m) for m in r.messages[:6]])
    archive.write(evicted)
    assert archive_tools.load(archive, SESSION, "m000005")["content"] == LOG
    hits = archive_tools.search(archive, SESSION, "archived to free context space")
    assert all(h["entry_kind"] == "offloaded" or h["role"] != "tool" for h in hits)


def test_search_ranks_the_matching_output_first_with_a_snippet(cleared):
    _, r, archive = cleared
    hits = archive_tools.search(archive, SESSION, "UniqueViolation orders_pkey")
    assert hits[0]["tool_call_id"] == "c0" and hits[0]["handle"] == r.messages[3].reduction["archive_ref"]
    assert "UniqueViolation" in hits[0]["snippet"] and hits[0]["score"] > 0
    assert archive_tools.load(archive, SESSION, hits[0]["handle"])["content"].startswith("psycopg.errors.UniqueViolation")


def test_search_is_case_insensitive_and_finds_identifiers_and_cjk_text(cleared):
    _, _, archive = cleared
    assert archive_tools.search(archive, SESSION, "COMPUTE_TOTAL")[0]["tool_call_id"] == "c4"
    assert archive_tools.search(archive, SESSION, "compute")[0]["tool_call_id"] == "c4"
    hit = archive_tools.search(archive, SESSION, "防火墙")[0]
    assert hit["tool_call_id"] == "c3" and "防火墙" in hit["snippet"]
    assert archive_tools.search(archive, SESSION, "zebra unicorn") == []


def test_search_covers_cleared_call_arguments(cleared):
    _, _, archive = cleared
    hits = archive_tools.search(archive, SESSION, "file_2.py")
    assert hits and hits[0]["role"] == "assistant"


def test_the_tool_definitions_are_openai_function_schemas():
    for tool, required in ((archive_tools.SESSION_LOAD_TOOL, ["handle"]), (archive_tools.SESSION_SEARCH_TOOL, ["query"])):
        assert tool["type"] == "function"
        fn = tool["function"]
        assert fn["name"] in ("session_load", "session_search") and len(fn["description"]) > 50
        assert fn["parameters"]["type"] == "object" and fn["parameters"]["required"] == required
        assert all("description" in p for p in fn["parameters"]["properties"].values())
        json.dumps(tool)
    load_zh, search_zh = archive_tools.tool_definitions("zh")
    assert "归档" in load_zh["function"]["description"] and load_zh["function"]["name"] == "session_load"


def test_handle_tool_call_dispatches_and_always_answers_with_json(cleared):
    _, _, archive = cleared
    out = json.loads(archive_tools.handle_tool_call(archive, SESSION, "session_load", '{"handle": "c1", "limit": 100}'))
    assert out["content"] == LOG[:100] and out["next_offset"] == 100
    out = json.loads(archive_tools.handle_tool_call(archive, SESSION, "session_search", {"query": "tests OK", "limit": 1}))
    assert len(out["hits"]) == 1 and out["hits"][0]["tool_call_id"] == "c2"
    for name, args, needle in (("session_load", '{"handle": "zzz"}', "nothing archived"),
                               ("session_load", "not json", "JSON object"),
                               ("session_load", '{"handle": "c1", "offset": -5}', "offset"),
                               ("session_load", '{"handle": "c1", "bogus": 1}', "bogus"),
                               ("session_search", '{"query": ""}', "query"),
                               ("rm_rf", "{}", "unknown tool")):
        reply = json.loads(archive_tools.handle_tool_call(archive, SESSION, name, args))
        assert needle in reply["error"]


def test_the_default_tool_limit_keeps_replies_bounded():
    big = "abc def\n" * 20_000
    raws = run(rounds=2, output=lambda i: big)
    archive = MemoryArchive()
    _, r = reduce(raws, policy(truncation={"enabled": False}, clearing={"trigger_tokens": 100, "keep": 1}))
    commit(r, archive)
    out = json.loads(archive_tools.handle_tool_call(archive, SESSION, "session_load", '{"handle": "c0"}'))
    assert out["returned_chars"] == archive_tools.DEFAULT_TOOL_LIMIT and out["next_offset"] == archive_tools.DEFAULT_TOOL_LIMIT


def _entry(archive, session, entry_id, texts):
    items = [ArchivedItem(f"m{k:06d}", None, {"role": "tool", "content": t, "tool_call_id": f"c{k}"}, f"c{k}", "shell")
             for k, t in enumerate(texts)]
    # the term index is cached by content hash, so each entry carries a real one
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()
    archive.write(ArchiveEntry(entry_id, session, "offloaded", items, content_hash=digest))


def test_search_scopes_reach_other_sessions_rank_together_and_name_the_session():
    archive = MemoryArchive()
    _entry(archive, "s1", "ar_a", ["deploy failed: quota exceeded in region west"])
    _entry(archive, "s2", "ar_b", ["quota quota quota exceeded again, the deploy of the west region stalled"])
    _entry(archive, "s3", "ar_c", ["unrelated lunch order"])
    current = archive_tools.search(archive, "s1", "quota")
    assert [(h["session_id"], h["entry_id"]) for h in current] == [("s1", "ar_a")]
    others = archive_tools.search(archive, "s1", "quota", scope="other_sessions", other_sessions=["s1", "s2", "s3"])
    assert [(h["session_id"], h["entry_id"]) for h in others] == [("s2", "ar_b")]
    both = archive_tools.search(archive, "s1", "quota", scope="all_sessions", other_sessions=["s2", "s3"])
    # the sibling mentions the term three times, so it ranks first across the pooled collection
    assert [h["session_id"] for h in both] == ["s2", "s1"]
    assert both[0]["score"] > both[1]["score"]
    with pytest.raises(ValueError, match="scope must be one of"):
        archive_tools.search(archive, "s1", "quota", scope="everything")


def test_search_tool_widens_only_when_the_caller_lists_sibling_sessions():
    archive = MemoryArchive()
    _entry(archive, "s1", "ar_a", ["nothing here"])
    _entry(archive, "s2", "ar_b", ["the migration id was 0042_payments"])
    props = archive_tools.SESSION_SEARCH_TOOL["function"]["parameters"]["properties"]
    assert props["scope"]["enum"] == ["current_session", "other_sessions", "all_sessions"]
    out = json.loads(archive_tools.handle_tool_call(archive, "s1", "session_search", {"query": "0042_payments",
                                                                                     "scope": "all_sessions"}))
    assert "only this session" in out["error"]
    out = json.loads(archive_tools.handle_tool_call(archive, "s1", "session_search",
                                                    {"query": "0042_payments", "scope": "all_sessions"},
                                                    other_sessions=lambda: ["s2"]))
    assert [(h["session_id"], h["handle"]) for h in out["hits"]] == [("s2", "ar_b")]
    out = json.loads(archive_tools.handle_tool_call(archive, "s1", "session_search", {"query": "x", "scope": "mine"},
                                                    other_sessions=lambda: ["s2"]))
    assert "scope must be one of" in out["error"]
