"""Every corpus session, reduced end to end: replay stays byte-exact, every removed text
loads back exactly, tool pairs stay intact, and nothing is ever reduced twice."""
import pytest

from compaction.context import check_tool_pairs
from compaction.messages import load_session_file
from compaction.reduction.pipeline import before_call
from tests.corpus import corpus_names, load

from .helpers import (
    SESSION,
    arrive,
    assert_every_reduction_loads_exactly,
    assert_replay_exact,
    commit,
    counter,
    policy,
    total,
)

FILES = corpus_names()


def originals(name):
    _, raws, _ = load_session_file(load(name), name)
    return raws


@pytest.mark.parametrize("name", FILES)
def test_truncation_then_clearing_keeps_every_original_recoverable(name):
    raws = originals(name)
    pol = policy(truncation={"max_chars": 2000, "image_max_chars": 50_000},
                 clearing={"trigger_tokens": 1000, "trigger_fraction": None, "keep": 3, "clear_tool_inputs": True})
    live, archive = arrive(raws, pol)
    r = before_call(live, policy=pol, counter=counter(), window=128_000, session_id=SESSION, total_tokens=total(live))
    commit(r, archive)
    check_tool_pairs(r.messages)
    assert_replay_exact(archive, r.messages, raws)
    reduced = [m for m in r.messages if m.reduction]
    assert assert_every_reduction_loads_exactly(archive, r.messages, raws) == sum(
        len(m.reduction.get("cleared_calls", [None])) for m in reduced)
    # one archived original per reduced message, never two
    ordinals = [i.ordinal for e in archive.entries(SESSION) for i in e.items]
    assert len(ordinals) == len(set(ordinals)) == len(reduced)
    again = before_call(r.messages, policy=pol, counter=counter(), window=128_000, session_id=SESSION,
                        total_tokens=10**7)
    assert again.ledger == [] and again.entries == [] and again.messages is r.messages


@pytest.mark.parametrize("name", FILES)
def test_passes_by_round_keep_every_original_recoverable(name):
    raws = originals(name)
    pol = policy(truncation={"enabled": False}, clearing={"enabled": False},
                 passes={"enabled": True, "recent_unit": "rounds", "keep_recent_requests": 2,
                         "historical_max_tokens": 300, "oversized_max_tokens": 1500})
    live, archive = arrive(raws, pol)
    r = before_call(live, policy=pol, counter=counter(), window=128_000, session_id=SESSION, total_tokens=total(live))
    commit(r, archive)
    check_tool_pairs(r.messages)
    assert_replay_exact(archive, r.messages, raws)
    assert_every_reduction_loads_exactly(archive, r.messages, raws)
    for row in r.ledger:
        assert row["tokens_after"] < row["tokens_before"]
        if row["phase"] == "pass2":
            assert row["tokens_after"] <= 1500 + 200
