"""Summary probes: questions drawn from what a compaction evicted (files edited, errors still
failing, the last request, the pending action), answered or not by the next context sent.
They read the messages with their own parsing, so they score any summarizer the same way."""
from __future__ import annotations

import json

import pytest

from compaction.compare import PolicyTotals, table
from compaction.evaluation.probes import edited_files, errors_in, failing_errors, probes_for, score
from compaction.policy import Policy
from compaction.simulate import run_simulation
from tests.engine.helpers import call, coding_run, tool_round


def _call(name: str, **args: str) -> dict:
    return call("x", name, json.dumps(args))


# Every tool name of the dev corpus (and the editor commands the issue names), with what the
# call did: the files a probe would ask about. Reads are never edits.
CASES = [
    (_call("str_replace_editor", command="view", path="/app"), []),
    (_call("str_replace_editor", command="view", path="/app/logs/auth.log"), []),
    (_call("str_replace_editor", command="str_replace", path="django/core/validators.py"),
     ["django/core/validators.py"]),
    (_call("str_replace_editor", command="create", path="reproduce.py"), ["reproduce.py"]),
    (_call("Edit", file_path="/repo/src/app.py"), ["/repo/src/app.py"]),
    (_call("Write", file_path="/repo/notes.md"), ["/repo/notes.md"]),
    (_call("Read", file_path="/repo/src/app.py"), []),
    (_call("Glob", pattern="**/*.py"), []),
    (_call("LS", path="/repo"), []),
    (_call("TodoWrite", todos="[]"), []),
    (_call("create", filename="reproduce.py"), ["reproduce.py"]),
    (_call("edit", path="src/marshmallow/fields.py"), ["src/marshmallow/fields.py"]),
    (_call("open", path="src/marshmallow/fields.py"), []),
    (_call("find_file", file_name="fields.py"), []),
    (_call("apply_patch", input="*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** End Patch"),
     ["src/a.py"]),
    (_call("bash", command="sed -i 's/self.config.pluginmanager._duplicatepaths.add/x/' src/_pytest/main.py"),
     ["src/_pytest/main.py"]),
    (_call("bash", command="sed -n '120,130p' src/_pytest/main.py"), []),
    (_call("bash", command="cat src/app.py | grep -n def"), []),
    (_call("bash", command="grep -rn 'foo' src/ > /dev/null 2>&1"), []),
    (_call("bash", command="cat > fix.py <<'EOF'\nif a > b.c:\n    pass\nEOF\npython fix.py"), ["fix.py"]),
    (_call("bash", command="echo done | tee -a log.txt"), ["log.txt"]),
    (_call("bash", command="pip install 'astroid>=1.11,<2'"), []),
    (_call("bash", command="cd /testbed && mv old.py new/place.py && rm -f stale.txt"),
     ["new/place.py", "stale.txt"]),
    (_call("bash", command="git apply fix.patch && git checkout src/keep.py"), ["src/keep.py"]),
    (_call("get_reservation_details", reservation_id="ABC123"), []),
    (_call("update_reservation_flights", reservation_id="ABC123"), []),
]


@pytest.mark.parametrize(("tool_call", "files"), CASES)
def test_a_file_counts_as_edited_by_what_the_call_did_not_by_the_tool_name(tool_call, files):
    assert edited_files(tool_call) == files


def test_test_runner_summary_lines_are_results_not_errors():
    out = "E   AssertionError: 1 != 2\n==== 1 failed in 0.18s ====\nFAILED tests/test_a.py::test_empty - Assert\n"
    assert errors_in(out) == ["AssertionError", "test_empty"]
    assert errors_in("==== 3 passed in 0.10s ====") == []


def _run(cid: str, command: str, output: str) -> list[dict]:
    return tool_round(cid, output, args=json.dumps({"command": command}))


def test_an_error_fixed_by_a_later_clean_run_of_the_same_command_is_not_still_failing():
    failing = _run("a", "python repro.py", "Traceback...\nValueError: empty input")
    fixed = failing + _run("b", "sed -i 's/x/y/' src/parser.py", "") + _run("c", "python repro.py", "ok")
    assert failing_errors(failing) == ["ValueError"]
    assert failing_errors(fixed) == []
    # another command afterwards says nothing about the error
    assert failing_errors(failing + _run("d", "ls", "a b")) == ["ValueError"]


SPAN = ([{"role": "user", "content": "Fix the crash in src/parser.py when the input file is empty."}]
        + _run("a", "sed -i 's/old/new/' src/parser.py", "")
        + _run("b", "python repro.py", "Traceback...\nValueError: empty input")
        + _run("c", "pytest tests/test_parser.py", "FAILED tests/test_parser.py::test_empty - ValueError"))


def test_a_span_gives_one_probe_per_question_with_its_answer():
    probes = probes_for(SPAN, SPAN)
    assert [(p.kind, p.answer) for p in probes] == [
        ("file_edited", "src/parser.py"), ("error_failing", "ValueError"), ("error_failing", "test_empty"),
        ("user_request", SPAN[0]["content"][:80]), ("pending_action", "pytest tests/test_parser.py")]


def test_a_probe_is_held_only_when_the_next_context_has_its_answer():
    good = [{"role": "user", "content": "Summary. Task: fix the crash in src/parser.py when the input file is "
                                        "empty. Edited parser.py; test_empty still fails with ValueError. "
                                        "Next: run pytest tests/test_parser.py again."}]
    held = score(9, SPAN, SPAN, good)
    assert held.held == len(held.probes) == 5
    vague = [{"role": "user", "content": "Summary: the agent worked on the code and ran some tests."}]
    missed = score(9, SPAN, SPAN, vague)
    assert missed.held == 0 and missed.to_dict()["total"] == 5


def test_a_format_reminder_repeated_by_the_harness_is_not_the_last_request():
    nag = {"role": "user", "content": "Please always provide EXACTLY ONE action in your response, thanks."}
    span = SPAN + [nag] + _run("d", "ls", "x") + [nag]
    history = span + [nag]
    requests = [p for p in probes_for(span, history) if p.kind == "user_request"]
    assert requests[0].answer == SPAN[0]["content"][:80]


def test_a_replay_reports_probes_per_compaction_and_compare_shows_the_column():
    policy = Policy.load({"counter": "approx", "context_window": 6000, "cut": {"keep_messages": 4}})
    messages = coding_run(rounds=30, output_chars=600, task="Fix the crash in src/parser.py on empty input files")
    report = run_simulation(messages, policy)
    assert report.probes is not None and report.probes.compactions
    first = report.probes.compactions[0]
    assert first.at == report.compactions[0].at
    as_json = report.to_dict()["probes"]
    assert as_json["total"] == sum(c["total"] for c in as_json["compactions"]) > 0
    assert as_json["by_kind"]["user_request"]["total"] >= 1
    row = PolicyTotals("p")
    row.add("s", report.to_dict())
    result = {"rows": [row.to_dict()], "baselines": []}
    assert result["rows"][0]["probes"] == as_json["score"]
    header, _, line = table(result).splitlines()[:3]
    assert "probes" in header.split() and f"{as_json['score']:.3f}" in line.split()


def test_probes_are_the_same_on_every_replay():
    messages = coding_run(rounds=30, output_chars=600)
    policy = Policy.load({"counter": "approx", "context_window": 6000})
    assert run_simulation(messages, policy).to_dict()["probes"] == run_simulation(messages, policy).to_dict()["probes"]
