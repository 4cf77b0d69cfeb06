"""tRPC-style passes: 0 force-cleans named tools, 1 replaces large historical results,
2 head+tail-truncates oversized results anywhere except the recovery tools' output."""
from compaction.archive import MemoryArchive
from compaction.context import check_tool_pairs
from compaction.messages import wrap_originals
from compaction.reduction.config import trpc_reduction
from compaction.reduction.passes import recent_start
from tests.corpus import session

from .helpers import (
    assert_every_reduction_loads_exactly,
    assert_replay_exact,
    commit,
    policy,
    reduce,
    tool_round,
)

LARGE = "2024-05-01T10:00:00 INFO worker heartbeat ok queue=default depth=0\n" * 80  # ~1.4k tokens
SMALL = "done"


def three_requests(output_first=LARGE, name="bash"):
    """Three user requests, each with tool rounds; the last one is the current request."""
    raws = [{"role": "system", "content": "You operate servers."},
            {"role": "user", "content": "check the logs"}]
    raws += tool_round("a1", output_first, name) + tool_round("a2", LARGE, name)
    raws += [{"role": "assistant", "content": "Logs look fine."}, {"role": "user", "content": "now the queue"}]
    raws += tool_round("b1", LARGE, name)
    raws += [{"role": "assistant", "content": "Queue is empty."}, {"role": "user", "content": "and the disk?"}]
    raws += tool_round("c1", LARGE, name)
    return raws


def passes(**kw):
    return policy(truncation={"enabled": False}, clearing={"enabled": False}, passes={"enabled": True, **kw})


def cleared_ids(r):
    return [m.tool_call_id for m in r.messages if m.reduction and m.reduction["kind"] == "cleared"]


def test_pass_one_replaces_large_results_of_requests_older_than_the_protected_ones():
    _, r = reduce(three_requests(), passes(keep_recent_requests=1))
    assert cleared_ids(r) == ["a1", "a2"]
    assert {row["phase"] for row in r.ledger} == {"pass1"}
    assert all("1,024-token pass-1 limit" in row["reason"] for row in r.ledger)
    check_tool_pairs(r.messages)


def test_the_current_request_alone_is_protected_with_no_recent_requests_kept():
    _, r = reduce(three_requests(), passes(keep_recent_requests=0))
    assert cleared_ids(r) == ["a1", "a2", "b1"]


def test_pass_one_runs_without_any_threshold_on_the_context():
    _, r = reduce(three_requests(), passes(), total_tokens=1)
    assert cleared_ids(r) == ["a1", "a2"]


def test_results_under_the_pass_one_limit_stay():
    _, r = reduce(three_requests(output_first=SMALL), passes())
    assert cleared_ids(r) == ["a2"]
    _, r = reduce(three_requests(), passes(historical_max_tokens=5000))
    assert r.abandoned == "nothing to reduce"


def test_rounds_can_be_the_recency_unit_for_long_single_task_runs():
    raws = session("minipr__deepseek_bench1__django__django-11099")["messages"]
    _, by_request = reduce(raws, passes(historical_max_tokens=200))
    assert by_request.abandoned  # one user task: everything is the current request
    _, by_round = reduce(raws, passes(recent_unit="rounds", keep_recent_requests=3, historical_max_tokens=200))
    assert by_round.ledger and by_round.abandoned is None
    last_rounds = [i for i, m in enumerate(by_round.messages) if m.role == "assistant" and m.tool_calls][-4:]
    assert all(not m.reduction for m in by_round.messages[last_rounds[0]:])


def test_skip_recent_messages_widens_the_protected_units():
    msgs = wrap_originals(three_requests())
    assert recent_start(msgs, "requests", 1, 0) == 7
    assert recent_start(msgs, "requests", 1, 12) == 1  # message len-12 lies in the first request
    _, r = reduce(three_requests(), passes(skip_recent_messages=12))
    assert r.abandoned


def test_pass_zero_force_cleans_named_tools_in_history_whatever_their_size():
    raws = three_requests(output_first="total 8\n-rw-r--r-- 1 root root 12 a.txt\n" * 12, name="shell")
    _, r = reduce(raws, passes(historical_max_tokens=100_000))
    assert r.abandoned
    _, r = reduce(raws, policy(truncation={"enabled": False}, clearing={"enabled": False},
                               passes={"enabled": True, "historical_max_tokens": 100_000},
                               force_clean_tools=["shell"]))
    assert cleared_ids(r) == ["a1", "a2"]
    assert all(row["phase"] == "pass0" for row in r.ledger)
    text = r.messages[3].raw["content"]
    assert "archived by policy" in text and "The call ran" in text


def test_keep_wins_over_force_clean_and_says_so():
    raws = three_requests(name="shell")
    pol = policy(truncation={"enabled": False}, clearing={"enabled": False},
                 passes={"enabled": True, "historical_max_tokens": 100_000},
                 force_clean_tools=["shell"], keep_tools=["shell"])
    _, r = reduce(raws, pol)
    assert r.abandoned and r.entries == []
    assert any(e["code"] == "keep_wins" and e["tool_name"] == "shell" for e in r.events)


def test_kept_tools_are_never_touched_by_pass_one():
    _, r = reduce(three_requests(name="session_load"), passes(keep_recent_requests=0))
    assert r.abandoned


def test_pass_two_is_off_by_default_and_truncates_oversized_results_including_the_current_request():
    huge = "".join(f"<div class='row' id='r{i}'>item {i}</div>\n" for i in range(3000))
    raws = three_requests()[:-1] + [{"role": "tool", "tool_call_id": "c1", "content": huge}]
    _, r = reduce(raws, passes(historical_max_tokens=100_000))
    assert r.abandoned
    archive = MemoryArchive()
    _, r = reduce(raws, passes(historical_max_tokens=100_000, oversized_max_tokens=8192))
    commit(r, archive)
    (row,) = r.ledger
    assert row["phase"] == "pass2" and row["fate"] == "truncated" and row["message_id"] == r.messages[-1].id
    last = r.messages[-1].raw["content"]
    assert last.startswith("<div class='row' id='r0'>") and "id='r2999'" in last
    assert row["tokens_after"] <= 8192 + 200 < row["tokens_before"]
    assert "8,192-token limit" in last
    assert_replay_exact(archive, r.messages, raws)
    assert_every_reduction_loads_exactly(archive, r.messages, raws)


def test_pass_two_never_truncates_the_recovery_tools_output():
    huge = "x " * 40_000
    raws = three_requests()[:-2] + tool_round("c1", huge, "session_load")
    _, r = reduce(raws, policy(truncation={"enabled": False}, clearing={"enabled": False}, keep_tools=[],
                               passes={"enabled": True, "historical_max_tokens": 100_000, "oversized_max_tokens": 5000}))
    assert r.abandoned


def test_the_trpc_fragment_clears_history_on_a_multi_request_corpus_session():
    raws = session("taubench__gpt-4o-airline__rec052")["messages"]
    pol = trpc_reduction().model_copy(update={"passes": trpc_reduction().passes.model_copy(update={"historical_max_tokens": 200})})
    archive = MemoryArchive()
    _, r = reduce(raws, pol)
    commit(r, archive)
    assert r.ledger and r.abandoned is None
    check_tool_pairs(r.messages)
    assert_replay_exact(archive, r.messages, raws)
    assert assert_every_reduction_loads_exactly(archive, r.messages, raws) == len(r.ledger)
