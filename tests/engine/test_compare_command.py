"""``python -m compaction compare``: a directory of sessions through several policies, one table."""
import json

import pytest

from compaction.cli import main
from compaction.compare import PolicyTotals
from tests.engine.helpers import tool_round

WORDS = " ".join(f"word{j}" for j in range(80))


def coding_session(n: int, rounds: int = 14) -> dict:
    msgs = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": f"Fix the bug in src/pkg_{n}/app.py"}]
    for i in range(rounds):
        msgs += tool_round(f"c{n}_{i}", f"src/pkg_{n}/mod_{i}.py: {WORDS}", name="read_file",
                           args=json.dumps({"path": f"src/pkg_{n}/mod_{i}.py"}))
    msgs.append({"role": "assistant", "content": f"The bug is in src/pkg_{n}/mod_2.py and src/pkg_{n}/app.py."})
    return {"id": f"s{n}", "messages": msgs}


@pytest.fixture
def corpus(tmp_path):
    directory = tmp_path / "corpus"
    directory.mkdir()
    for n in range(2):
        (directory / f"s{n}.json").write_text(json.dumps(coding_session(n)))
    (directory / "notes.txt").write_text("not a session")
    return directory


def test_one_row_per_policy_pooled_over_every_session(corpus, tmp_path, capsys):
    policy = tmp_path / "mine.json"
    policy.write_text(json.dumps({"name": "mine", "trigger": {"kind": "tokens", "threshold": 1500}}))
    code = main(["compare", str(corpus), "--preset", "default", "--policy", str(policy), "--preset", "deepagents",
                 "--context-window", "3000", "--json"])
    out = capsys.readouterr()
    assert code == 0
    result = json.loads(out.out)
    assert result["sessions"] == ["s0", "s1"]
    assert [r["label"] for r in result["rows"]] == ["default", "mine.json (mine)", "deepagents"]
    mine = result["rows"][1]
    assert mine["sessions"] == 2 and mine["integrity_ok"] == 2 and mine["compactions"] >= 2
    assert isinstance(mine["thrash"], int)           # the replays report it
    assert all(b["thrash"] is None for b in result["baselines"])   # baselines have no compactions: not made up
    for row in result["rows"]:
        assert 0 <= row["recall"] <= 1 and row["needed"] >= 4
        assert row["tokens_sent"] >= row["mean_context_tokens"] * row["model_calls"] - row["model_calls"]
        assert row["peak_context_tokens"] <= 3000 or row["overflow_calls"] > 0
    assert [b["label"] for b in result["baselines"]] == ["baseline: sliding window", "baseline: observation masking"]
    # progress on stderr, one line per replay, never mixed into the JSON
    assert out.err.count("\n") == 6 and "[6/6] deepagents: s1" in out.err


def test_the_table_names_every_column_and_shows_a_dash_for_missing_figures(corpus, capsys):
    assert main(["compare", str(corpus), "--preset", "default", "--context-window", "3000", "--quiet"]) == 0
    out = capsys.readouterr()
    assert out.err == ""
    lines = out.out.splitlines()
    assert lines[0] == f"2 sessions from {corpus}, context window 3,000"
    for column in ("over", "thrash", "compact", "LLM", "mean ctx", "peak ctx", "tokens sent", "retain", "recall",
                   "intact"):
        assert column in lines[1]
    row = next(line for line in lines if line.startswith("default"))
    assert "–" not in row and row.rstrip().endswith("2/2")
    baseline = next(line for line in lines if line.startswith("baseline: sliding window"))
    assert "–" in baseline   # no compactions, no thrash: a dash, not a made-up 0
    assert any(line.startswith("baseline: sliding window") for line in lines)


def test_thrash_is_summed_when_the_replays_report_it():
    row = PolicyTotals("p")
    base = {"model_calls": 3, "overflow_calls": 0, "compactions": [], "llm_calls": 0, "peak_context_tokens": 10,
            "integrity": {"tool_pairs_ok": True, "replay_exact": True}}
    row.add("a", {**base, "thrash": 2})
    row.add("b", {**base, "thrash": 1})
    assert row.to_dict()["thrash"] == 3
    row.add("c", base)
    assert row.to_dict()["thrash"] is None


@pytest.mark.parametrize("args, message", [
    (["compare", "/no/such/dir"], "is not a directory"),
    (["compare", "{empty}"], "no *.json session files"),
])
def test_bad_directories_are_refused_by_name(tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    args = [a.format(empty=tmp_path / "empty") for a in args]
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert message in str(exc.value)


def test_a_bad_session_file_is_named(corpus):
    (corpus / "broken.json").write_text("{not json")
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(corpus), "--quiet"])
    assert "broken.json is not JSON" in str(exc.value)


def test_an_unknown_preset_is_refused_before_any_replay(corpus, capsys):
    with pytest.raises(SystemExit):
        main(["compare", str(corpus), "--preset", "nope"])
    assert "unknown preset 'nope'" in capsys.readouterr().err


def test_a_bad_policy_file_names_the_field(corpus, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "bad", "cut": {"keep_fraction": 7}}))
    assert main(["compare", str(corpus), "--policy", str(bad), "--quiet"]) == 1
    assert "keep_fraction" in capsys.readouterr().err
