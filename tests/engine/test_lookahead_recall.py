"""Look-ahead evaluation on small handmade sessions whose answer is known: which identifiers
the next assistant message needed, whether the context sent still held them, how the two
baselines fare, and when the prompt cache breaks."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compaction import simulate
from compaction.evaluation import LookAhead
from compaction.evaluation.baselines import MASKING_KEEP, ObservationMasking, SlidingWindow
from compaction.evaluation.cache import CacheMeter, Prices, shared_prefix
from compaction.evaluation.needed import History, NeededMemo
from compaction.messages import Message, Provenance, wrap_originals
from compaction.policy import Policy
from compaction.preview import preview_policy
from compaction.tokens import CharCounter, MessageCounter
from tests.corpus import load, require_corpus
from tests.engine.helpers import tool_round

FIX = {"role": "user", "content": "Fix the crash in /srv/app/settings.py please."}
READ = tool_round("c1", "Traceback: ImportError raised by load_settings at line 12", name="read_file",
                  args='{"path": "/srv/app/settings.py"}')
ANSWER = {"role": "assistant",
          "content": "The ImportError comes from load_settings in /srv/app/settings.py; I will add parse_config_v2."}


def session():
    return [{"role": "system", "content": "You are a coding agent."}, FIX, *READ, ANSWER]


def counter():
    return MessageCounter(CharCounter(4.0))


def test_only_identifiers_seen_earlier_are_needed():
    history = History()
    for raw in session()[:-1]:
        history.append(raw)
    needed = history.needed(ANSWER)
    # parse_config_v2 is new in the answer: no compaction could have kept it
    assert sorted(needed) == ["/srv/app/settings.py", "ImportError", "load_settings"]
    assert needed["load_settings"] == [3]          # only the tool result held it
    assert needed["/srv/app/settings.py"] == [1, 2]


def test_a_replay_that_keeps_everything_recalls_everything():
    report = simulate(session(), {"name": "big", "context_window": 100_000})
    la = report["lookahead"]
    assert (la["needed"], la["kept"], la["recall"]) == (4, 4, 1.0)
    assert la["baselines"]["sliding_window"]["recall"] == 1.0
    assert la["baselines"]["observation_masking"]["recall"] == 1.0
    # the tool call reused the path the user gave; the answer three identifiers
    assert [row["needed"] for row in la["per_call"]] == [1, 3]
    assert la["cache_breaks"] == 0 and la["lost"] == {"reduction": 0, "eviction": 0}


def evaluator(usable=10_000):
    return LookAhead(counter(), tools_tokens=0, usable_window=usable, price_model="gpt-4o-mini")


def feed(la, raws):
    for raw in raws:
        la.append(raw)


def test_an_identifier_only_in_an_evicted_message_is_missing_and_put_down_to_eviction():
    la = evaluator()
    raws = session()
    feed(la, raws[:-1])
    msgs = wrap_originals(raws[:-1])
    summary = Message({"role": "user", "content": "Summary: the user wants /srv/app/settings.py fixed."},
                      "summary-1", Provenance.SUMMARY)
    context = [msgs[0], summary]          # the tool round and the ask were summarized away
    la.call(4, ANSWER, context, counter().count_many(context), 100)
    row = la.per_call[-1]
    assert (row["needed"], row["kept"]) == (3, 1)
    assert row["missing"] == ["ImportError", "load_settings"]
    assert la.report().to_dict()["lost"] == {"reduction": 0, "eviction": 2}


def test_an_identifier_in_a_cleared_tool_output_is_put_down_to_reduction():
    la = evaluator()
    raws = session()
    feed(la, raws[:-1])
    msgs = wrap_originals(raws[:-1])
    cleared = Message({"role": "tool", "tool_call_id": "c1", "content": "[output cleared]"}, msgs[3].id,
                      Provenance.ORIGINAL, 3)
    context = [*msgs[:3], cleared]
    la.call(4, ANSWER, context, counter().count_many(context), 100)
    assert la.per_call[-1]["missing"] == ["ImportError", "load_settings"]
    assert la.report().to_dict()["lost"] == {"reduction": 2, "eviction": 0}


def test_case_and_a_spaced_number_still_count_as_present():
    la = evaluator()
    earlier = [{"role": "user", "content": "The timeout is 200 ms for HTTPServer."}]
    feed(la, earlier)
    context = [Message({"role": "user", "content": "timeout 200ms for httpserver"}, "s", Provenance.SUMMARY)]
    la.call(1, {"role": "assistant", "content": "Raise the 200 ms timeout of HTTPServer."}, context,
            counter().count_many(context), 10)
    assert la.per_call[-1]["recall"] == 1.0


def test_the_sliding_window_drops_the_oldest_to_three_quarters_and_never_starts_with_a_tool_result():
    sw = SlidingWindow(usable=100, tools_tokens=0)
    for role, tokens in [("system", 10), ("user", 30), ("assistant", 20), ("tool", 30), ("assistant", 10)]:
        sw.append(role, tokens)
    shape = sw.call()                      # 100 tokens: fits, nothing moves
    assert (shape.tokens, shape.extends) == (100, True)
    sw.append("user", 20)
    shape = sw.call()                      # 120 > 100: drop to <= 75, past the orphaned tool result
    assert not shape.extends and shape.shared == 10   # only the system head is shared with the last call
    assert sw.visible(0) and not sw.visible(1) and not sw.visible(2) and not sw.visible(3)
    assert sw.visible(4) and shape.tokens == 40


def test_observation_masking_hides_tool_results_past_the_newest_ten_and_breaks_the_cache_when_it_does():
    om = ObservationMasking(tools_tokens=0, placeholder_tokens=5)
    for _ in range(MASKING_KEEP):
        om.append("assistant", 10)
        om.append("tool", 100)
    assert om.call().extends and om.visible(1)
    om.append("assistant", 10)
    om.append("tool", 100)
    shape = om.call()
    assert not shape.extends and not om.visible(1) and om.visible(3)
    assert shape.shared == 10             # the first assistant message precedes the rewritten result
    assert shape.tokens == 11 * 110 - 95


def test_a_baseline_misses_what_it_dropped():
    words = " ".join(f"word{j}" for j in range(100))
    filler = [m for i in range(12) for m in tool_round(f"f{i}", f"{i} {words}")]
    raws = [{"role": "system", "content": "agent"}, *tool_round("c0", "the hash is deadbeef1234"), *filler,
            {"role": "assistant", "content": "Checking out deadbeef1234 now."}]
    report = simulate(raws, {"name": "roomy", "context_window": 1_000_000, "reserved_output_tokens": 0})
    la = report["lookahead"]
    assert la["recall"] == 1.0                                    # no compaction: nothing lost
    assert la["baselines"]["observation_masking"]["recall"] == 0.0  # 12 newer tool results: masked
    small = simulate(raws, {"name": "small", "context_window": 1_000, "reserved_output_tokens": 0,
                            "trigger": {"kind": "tokens", "threshold": 999_999}, "reduction": {"enabled": False}})
    assert small["lookahead"]["baselines"]["sliding_window"]["recall"] == 0.0
    assert small["lookahead"]["baselines"]["sliding_window"]["peak_context_tokens"] <= 1_000


def test_shared_prefix_finds_the_first_rewritten_message():
    assert shared_prefix([], ["a"]) == 0
    assert shared_prefix(["a", "b"], ["a", "b", "c"]) == 2
    assert shared_prefix(["a", "b", "c", "d"], ["a", "x", "c", "d", "e"]) == 1
    assert shared_prefix(["a", "b", "c"], ["a", "b"]) == 2


def test_an_extension_reads_the_previous_prompt_from_cache_and_a_rewrite_breaks_it():
    la = evaluator()
    raws = session()

    def send(at, nxt, context):
        tokens = counter().count_many(context)
        la.call(at, nxt, context, tokens, sum(t.total for t in tokens))
        return sum(t.total for t in tokens)

    feed(la, raws[:2])
    first = send(2, raws[2], wrap_originals(raws[:2]))
    feed(la, raws[2:4])
    grown = wrap_originals(raws[:4])
    second = send(4, ANSWER, grown)
    third = send(5, ANSWER, [grown[0], Message({"role": "user", "content": "summary"}, "s", Provenance.SUMMARY)])
    d = la.report().to_dict()
    assert [r["cache_break"] for r in la.per_call] == [False, False, True]
    head = counter().count(grown[0]).total
    # the second call reads all of the first from cache; the third only the system message
    assert d["cache_breaks"] == 1 and d["cached_tokens"] == first + head
    assert d["input_tokens"] == first + second + third


def test_cost_uses_the_model_tables_cache_read_price():
    prices = Prices.of("gpt-4o-mini")
    assert prices is not None and prices.cache_read < prices.input
    meter = CacheMeter()
    meter.record(1000, 0, True)
    meter.record(1500, 1000, True)
    assert meter.cost(prices) == pytest.approx(1000 * prices.cache_read + 1500 * prices.cache_write)
    assert meter.to_dict(None)["cost_usd"] is None
    assert Prices.of("no-such-model-anywhere") is None


def test_the_price_model_is_chosen_and_named():
    report = simulate(session(), {"name": "p", "context_window": 100_000}, price_model="gpt-4o")
    assert report["lookahead"]["price_model"] == "gpt-4o" and report["lookahead"]["prices_known"]
    assert simulate(session(), {"name": "p"})["lookahead"]["price_model"] == "gpt-4o-mini"
    assert simulate(session(), {"name": "p", "model": "gpt-4o"})["lookahead"]["price_model"] == "gpt-4o"


REPLAY = """
import json, sys
from compaction import simulate
from tests.corpus import load, require_corpus
from tests.engine.helpers import tool_round
words = " ".join(f"word{j}" for j in range(60))
filler = [m for i in range(30) for m in tool_round(f"f{i}", f"/srv/log/{i}.txt load_cfg_{i} {words}")]
raws = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Fix /srv/app/settings.py"}, *filler,
        {"role": "assistant", "content": "See /srv/log/3.txt, load_cfg_3, load_cfg_29 and /srv/app/settings.py"}]
la = simulate(raws, {"name": "t", "context_window": 4000})["lookahead"]
print(json.dumps({"baselines": la["baselines"], "needed": [(r["at"], r["needed"]) for r in la["per_call"]]},
                 sort_keys=True))
"""


def test_what_was_needed_and_the_baselines_do_not_depend_on_the_process(tmp_path):
    """Two interpreters with different string-hash seeds (set order differs between them)
    give the same figures for everything that depends on the history alone."""
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        res = subprocess.run([sys.executable, "-c", REPLAY], capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        outs.append(res.stdout)
    assert outs[0] == outs[1]
    figures = json.loads(outs[0])
    assert figures["needed"][-1][1] == 4
    assert figures["baselines"]["sliding_window"]["recall"] < 1.0   # 4,000 tokens cannot hold it all


def test_no_lookahead_when_not_asked_for():
    assert "lookahead" not in simulate(session(), "default", lookahead=False)



def test_a_memo_shared_by_replays_of_one_session_gives_each_policy_its_own_figures():
    """A tuning grid replays one session under many policies with one NeededMemo: what each
    call needed comes from the memo, what each policy kept from its own context. A real
    transcript whose recall drops when short summaries replace its history."""
    name = "sweagent__replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source__marshmal.json"
    require_corpus(name)
    messages = load(name)["messages"]
    memo = NeededMemo()
    figures = []
    for threshold, keep in ((1500, 1), (3000, 8), (1500, 8), (100_000, 1)):
        # 40 words: a summary that cannot carry every name the agent goes back to
        policy = Policy.load({"name": "memo", "trigger": {"kind": "tokens", "threshold": threshold},
                              "cut": {"keep_messages": keep}, "summarizer": {"max_summary_words": 40}})
        alone = preview_policy(messages, policy, fallback_model="gpt-4o").figures
        shared = preview_policy(messages, policy, fallback_model="gpt-4o", needed_memo=memo).figures
        assert shared == alone
        figures.append(alone)
    assert memo.at and len({f.kept for f in figures}) > 1  # the policies kept different amounts
    assert len({f.needed for f in figures}) == 1  # what the calls needed is the session's own
