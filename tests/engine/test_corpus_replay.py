"""Every corpus session replays under every preset at 8k and 32k windows with integrity.

This is the in-process form of `python -m compaction replay SESSION --preset P
--context-window W`; test_cli.py runs the real command on a few of them.
"""
import pytest

from compaction import PRESETS, get_preset, simulate
from tests.corpus import corpus_files, load, require_corpus

FILES = [p.name for p in corpus_files()]


@pytest.mark.parametrize("window", [8000, 32000])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_corpus_session_keeps_integrity(preset, window):
    require_corpus()
    policy = get_preset(preset).with_overrides({"context_window": window})
    problems = []
    for name in FILES:
        data = load(name)
        report = simulate(data["messages"], policy, tools=data.get("tools"), session_id=data["id"])
        integrity = report["integrity"]
        if not (integrity["tool_pairs_ok"] and integrity["replay_exact"]):
            problems.append((name, integrity))
        # the overflow guard: only a single message larger than the window may overflow
        if report["overflow_calls"] != report["oversized_calls"]:
            problems.append((name, f"{report['overflow_calls']} calls over the usable window"))
        if preset == "default" and report["thrash"]:
            problems.append((name, f"thrash {report['thrash']}"))
        assert report["model_calls"] == sum(1 for m in data["messages"] if m["role"] == "assistant")
    assert problems == []


@pytest.mark.parametrize("preset", ["eino", "sagents"])
def test_large_threshold_presets_compact_when_their_trigger_is_lowered(preset):
    require_corpus()
    policy = get_preset(preset).model_copy(update={"trigger": {"kind": "tokens", "threshold": 6000}})
    policy = type(policy).load(policy.model_dump(mode="json") | {"trigger": {"kind": "tokens", "threshold": 6000},
                                                                  "context_window": 32000})
    compacted = 0
    for name in FILES:
        data = load(name)
        report = simulate(data["messages"], policy, session_id=data["id"])
        assert report["integrity"] == {"tool_pairs_ok": True, "replay_exact": True}, name
        compacted += len(report["compactions"])
    assert compacted > 10


def test_the_default_preset_keeps_a_single_task_run_under_a_small_window():
    require_corpus("minipr__deepseek_bench1__django__django-11564.json")
    data = load("minipr__deepseek_bench1__django__django-11564.json")
    report = simulate(data["messages"], get_preset("default").with_overrides({"context_window": 32000}))
    assert report["compactions"], "a single-user-turn coding run must still compact"
    assert report["overflow_calls"] == 0
    assert report["peak_context_tokens"] <= 32000
