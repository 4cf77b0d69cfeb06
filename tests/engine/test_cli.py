"""The command line as a user runs it."""
import json
import subprocess
import sys

import pytest

from tests.corpus import CORPUS_DIR, require_corpus

SESSION = CORPUS_DIR / "minipr__deepseek_bench1__django__django-11099.json"


@pytest.fixture(autouse=True)
def _corpus():
    """Every command here reads a corpus session."""
    require_corpus(SESSION.name)


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "compaction", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_replay_json_reports_compactions_and_integrity(tmp_path):
    res = run("replay", SESSION, "--context-window", 8000, "--json", "--archive-dir", tmp_path / "arch")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    for key in ("session", "messages", "model_calls", "compactions", "peak_context_tokens", "final_context_tokens",
                "overflow_calls", "llm_calls", "integrity", "tokens_cleared", "tokens_truncated", "reduction_events"):
        assert key in report
    assert report["integrity"] == {"tool_pairs_ok": True, "replay_exact": True}
    first = report["compactions"][0]
    for key in ("at", "trigger", "tokens_before", "tokens_after", "evicted_messages", "summary_tokens",
                "retention", "compression", "attempts", "model"):
        assert key in first
    assert first["tokens_after"] < first["tokens_before"]
    assert list((tmp_path / "arch").glob("*.jsonl")), "--archive-dir writes the archive to disk"


def test_dump_writes_a_sendable_context_and_the_exact_original(tmp_path):
    res = run("replay", SESSION, "--context-window", 8000, "--dump", tmp_path)
    assert res.returncode == 0, res.stderr
    assert "integrity: tool pairs ok, replay exact" in res.stdout
    context = json.loads((tmp_path / "context.json").read_text())
    replayed = json.loads((tmp_path / "replay.json").read_text())
    assert replayed == json.loads(SESSION.read_text())["messages"]
    assert context[0]["role"] == "system" and len(context) < len(replayed)


def test_settings_can_be_overridden_from_the_command_line():
    res = run("replay", SESSION, "--preset", "deepagents", "--set", "cut.keep_messages=2",
              "--trigger-tokens", 5000, "--context-window", 32000, "--json")
    assert res.returncode == 0, res.stderr
    assert all("tokens" in c["trigger"] for c in json.loads(res.stdout)["compactions"])
    bad = run("replay", SESSION, "--set", "cut.keep_messages=-3")
    assert bad.returncode == 1 and "cut.keep_messages" in bad.stderr
    unknown = run("replay", SESSION, "--set", "cut.nonsense=1")
    assert unknown.returncode == 1 and "cut.nonsense" in unknown.stderr


def test_count_prints_tokens_per_category():
    res = run("count", SESSION, "--json")
    data = json.loads(res.stdout)
    assert data["tokens"]["tool_results"] > 0 and data["tokens"]["total"] == sum(
        v for k, v in data["tokens"].items() if k != "total")


def test_a_broken_session_file_is_rejected_naming_the_message(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "?"}]))
    res = run("replay", bad)
    assert res.returncode != 0
    assert "message 1" in res.stderr and "orphan tool result" in res.stderr


def test_replay_warns_about_a_trigger_above_the_window_and_sends_no_call_over_it():
    res = run("replay", SESSION, "--preset", "eino", "--context-window", 8000, "--no-counterfactual")
    assert res.returncode == 0, res.stderr
    assert "warning: trigger (tokens) threshold of 160,000 tokens lies above the usable window" in res.stdout
    assert "overflow calls 0" in res.stdout and "thrash" in res.stdout


def test_replay_json_has_thrash_oversized_calls_and_warnings():
    res = run("replay", SESSION, "--preset", "sagents", "--context-window", 8000, "--json", "--no-counterfactual")
    report = json.loads(res.stdout)
    assert isinstance(report["thrash"], int) and report["overflow_calls"] == report["oversized_calls"] == 0
    assert any("170,000" in w for w in report["warnings"])


def test_the_policy_command_prints_the_warning_on_stderr():
    res = run("policy", "--preset", "sagents")
    assert res.returncode == 0 and json.loads(res.stdout)["name"] == "sagents"
    assert "warning:" in res.stderr and "overflow guard" in res.stderr


def test_a_contradictory_landing_target_is_refused_naming_the_field():
    res = run("policy", "--set", "landing.target=999999")
    assert res.returncode == 1
    assert "landing.target" in res.stderr
