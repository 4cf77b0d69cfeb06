"""The file ledger: what each tool call did to files, judged by what it ran.

Two tables pin the classification over the whole dev corpus: every tool name, and every
program its shell commands run, with the only kinds of touch each may make. A tool or
program the corpus gains must be added here, so nothing is classified unseen. Then the
cases of the held-out sessions that went wrong before (a ``view`` listed as an edit, a sed
expression taken for a path...), call by call."""
from __future__ import annotations

import json

import pytest
from summarizer_spans import CORPUS

from compaction.summarizer.extractive.file_ops import SHELL_KEYS, FileTracker, Touch, programs
from tests.corpus import require_corpus

READ, CREATED, EDITED, DELETED, MOVED = "read", "created", "edited", "deleted", "moved"
SHELL = "shell"   # judged by the programs table

# Every tool name of the dev corpus -> the touches its calls may make.
TOOLS: dict[str, set[str] | str] = {
    "bash": SHELL, "Bash": SHELL,
    "Read": {READ}, "open": {READ},
    "Write": {CREATED}, "create": {CREATED},
    "Edit": {EDITED}, "edit": {EDITED}, "insert": {EDITED},
    # names that hold "write", "edit", "create", "plan"... but touch no file
    "TodoWrite": set(), "exit_plan_mode": set(), "ExitPlanMode": set(), "update_reservation_flights": set(),
    "mcp__plugin_playwright_playwright__browser_take_screenshot": set(),
    # searches and listings look, they do not read a file's text
    "Glob": set(), "LS": set(), "find_file": set(), "search_direct_flight": set(),
    "WebFetch": set(), "WebSearch": set(), "Task": set(), "TaskOutput": set(), "AskUserQuestion": set(),
    "KillShell": set(), "Skill": set(), "submit": set(), "think": set(), "calculate": set(),
    "get_user_details": set(), "get_reservation_details": set(), "transfer_to_human_agents": set(),
    "cancel_reservation": set(),
}

# Every program the corpus's shell commands run -> the touches it may make. ">" and ">>" are
# redirections; "sed -i", "git checkout"... are keyed with the option or subcommand that decides.
PROGRAMS: dict[str, set[str]] = {
    "cat": {READ}, "head": {READ}, "tail": {READ}, "grep": {READ}, "wc": {READ}, "sort": {READ}, "cut": {READ},
    "jq": {READ}, "stat": {READ}, "diff": {READ}, "file": {READ}, "strings": {READ}, "sed": {READ}, "open": {READ},
    "sed -i": {EDITED}, ">": {CREATED}, ">>": {EDITED}, "cp": {CREATED}, "mv": {MOVED}, "rm": {DELETED},
    "touch": {CREATED}, "patch": {EDITED, CREATED, DELETED}, "python": {EDITED}, "python3": {EDITED},
    "edit": {EDITED}, "create": {CREATED}, "git checkout": {EDITED}, "git apply": {EDITED, CREATED, DELETED},
    # run, list, search, install, fetch: no file of the session changes
    "git": set(), "cd": set(), "find": set(), "ls": set(), "tree": set(), "echo": set(), "pip": set(), "curl": set(),
    "mkdir": set(), "xargs": set(), "submit": set(), "pwd": set(), "chmod": set(), "claude": set(),
    "sqlfluff": set(), "ps": set(), "gh": set(), "decompile": set(), "bash": set(), "lsof": set(), "date": set(),
    "which": set(), "true": set(), "unzip": set(), "find_file": set(),
}


def _key(touch: Touch) -> str:
    via = touch.via
    if via.startswith(("sed -i", "perl -i", "git ")):
        return " ".join(via.split()[:2])
    return via.split()[0]


def corpus_calls() -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """(session, tool name, [(name, arguments, shell command)]) per session, in order."""
    require_corpus()
    out = []
    for path in sorted(CORPUS.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        calls = []
        for m in data["messages"]:
            for c in m.get("tool_calls") or []:
                fn = c["function"]
                args = fn.get("arguments") or ""
                try:
                    obj = json.loads(args)
                except ValueError:
                    obj = None
                command = next((obj[k] for k in SHELL_KEYS if isinstance(obj, dict) and isinstance(obj.get(k), str)),
                               "" if isinstance(obj, dict) else args)
                calls.append((fn["name"], args, command))
        out.append((path.stem, calls))
    return out


def test_every_tool_name_and_shell_program_of_the_corpus_has_its_row():
    names = {name for _, calls in corpus_calls() for name, _, _ in calls}
    run = {p for _, calls in corpus_calls() for name, _, cmd in calls if TOOLS.get(name) == SHELL
           for p in programs(cmd)}

    assert names == set(TOOLS)
    assert run <= {k.split()[0] for k in PROGRAMS}, sorted(run - set(PROGRAMS))


def test_every_call_of_the_corpus_touches_files_only_as_its_tool_or_program_may():
    seen: dict[str, set[str]] = {}
    for session, calls in corpus_calls():
        tracker = FileTracker()
        for name, args, _ in calls:
            for touch in tracker.touches(name, args):
                allowed = TOOLS[name]
                key = _key(touch) if allowed == SHELL else name
                expected = PROGRAMS[key] if allowed == SHELL else allowed
                assert touch.action in expected, (session, name, touch)
                assert not touch.path.startswith(("s/", "y/")), (session, touch)   # a sed expression
                seen.setdefault(key, set()).add(touch.action)
    # the corpus does exercise the families (the tables are not vacuous)
    assert {"sed -i", ">", "cp", "mv", "rm", "patch", "python", "edit", "Edit", "Write", "Read"} <= set(seen)
    assert seen["sed"] == {READ} and seen["sed -i"] == {EDITED} and seen["cat"] == {READ}


CASES = [
    # editor tools are judged by their command, not their name
    ("str_replace_editor", {"command": "view", "path": "/app"}, [("/app", READ, "")]),
    ("str_replace_editor", {"command": "view", "path": "/app/logs/auth.log"}, [("/app/logs/auth.log", READ, "")]),
    ("str_replace_editor", {"command": "str_replace", "path": "django/core/validators.py",
                            "old_str": "regex = r'^[-\\w]+$'", "new_str": "regex = r'\\A[-\\w]+\\Z'"},
     [("django/core/validators.py", EDITED, "`regex = r'^[-\\w]+$'` → `regex = r'\\A[-\\w]+\\Z'`")]),
    ("str_replace_editor", {"command": "create", "path": "repro.py", "file_text": "import x\nx.run()\n"},
     [("repro.py", CREATED, "")]),
    ("str_replace_editor", {"command": "insert", "path": "a.py", "insert_line": 4, "new_str": "pass"},
     [("a.py", EDITED, "+1 at line 4")]),
    ("bash", {"command": "str_replace_editor view /app/src"}, [("/app/src", READ, "")]),
    # sed: the expression is the change, the files after it are the paths
    ("bash", {"command": "sed -i 's/self.config.pluginmanager._duplicatepaths.add/x/' src/_pytest/main.py"},
     [("src/_pytest/main.py", EDITED, "`s/self.config.pluginmanager._duplicatepaths.add/x/`")]),
    ("bash", {"command": "sed -i.bak -e 's/a/b/' -e 's/c/d/' x.cfg y.cfg"},
     [("x.cfg", EDITED, "`s/a/b/`; `s/c/d/`"), ("y.cfg", EDITED, "`s/a/b/`; `s/c/d/`")]),
    ("bash", {"command": "cd /testbed && sed -n '95,110p' ./django/core/validators.py"},
     [("./django/core/validators.py", READ, "")]),
    # reads never become edits
    ("bash", {"command": "cat setup.py | grep -n version; less README.rst; grep -rn foo src/app.py"},
     [("setup.py", READ, ""), ("README.rst", READ, ""), ("src/app.py", READ, "")]),
    # writes, moves, deletions, restores
    ("bash", {"command": "echo 'x' > out.txt 2>&1; printf y >> log.txt; tee -a notes.md < /dev/null"},
     [("out.txt", CREATED, ""), ("log.txt", EDITED, "appended"), ("notes.md", EDITED, "appended")]),
    ("bash", {"command": "mv export.md backup/ && rm -rf build/x.py && git checkout -- src/a.py"},
     [("export.md", MOVED, "→ `backup/`"), ("build/x.py", DELETED, ""), ("src/a.py", EDITED, "restored from git")]),
    ("bash", {"command": "python -c \"open('cfg/app.ini', 'w').write('[app]')\""},
     [("cfg/app.ini", EDITED, "by a Python script")]),
    ("Edit", {"file_path": "/r/app.py", "old_string": "def f():\n  pass", "new_string": "def g():\n  pass"},
     [("/r/app.py", EDITED, "`def f():` → `def g():`")]),
    ("apply_patch", {"input": "*** Begin Patch\n*** Update File: src/tax.py\n@@ def rate\n-x = 1\n+x = 2\n"
                              "*** Delete File: old.py\n*** End Patch"},
     [("src/tax.py", EDITED, "`@@ def rate` +1 −1"), ("old.py", DELETED, "")]),
    ("TodoWrite", {"todos": [{"content": "edit src/a.py", "status": "pending"}]}, []),
    # an edit that repeats its context lines is told by the line it changed
    ("Edit", {"file_path": "/r/cli.py", "old_string": "else:\n    level = 1\n    return level",
              "new_string": "else:\n    level = 2\n    return level"}, [("/r/cli.py", EDITED, "`level = 1` → `level = 2`")]),
    ("bash", {"command": "stat -c \"%Y %n\" /home/u/a.jsonl"}, [("/home/u/a.jsonl", READ, "")]),
]


@pytest.mark.parametrize(("name", "args", "expected"), CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_what_a_call_did_to_files(name, args, expected):
    touches = FileTracker().touches(name, json.dumps(args))

    assert [(t.path, t.action, t.change) for t in touches] == expected


def test_a_patch_or_a_script_written_earlier_is_read_when_it_is_applied_or_run():
    tracker = FileTracker()
    diff = "--- a/django/db/x.py\n+++ b/django/db/x.py\n@@ -10,3 +10,4 @@ class A:\n a\n-b\n+c\n+d\n"
    tracker.touches("bash", json.dumps({"command": f"cat > /tmp/fix.patch << 'EOF'\n{diff}EOF"}))
    script = "path = 'django/db/y.py'\nwith open(path) as f:\n    s = f.read()\nwith open(path, 'w') as f:\n    f.write(s)\n"
    tracker.touches("bash", json.dumps({"command": f"cat > /tmp/fix.py << 'EOF'\n{script}EOF"}))

    applied = tracker.touches("bash", json.dumps({"command": "cd /testbed && patch -p1 < /tmp/fix.patch"}))
    ran = tracker.touches("bash", json.dumps({"command": "python /tmp/fix.py"}))
    failed = tracker.touches("bash", json.dumps({"command": "cd /testbed && git apply /tmp/fix.patch"}), failed=True)

    assert applied == [Touch("django/db/x.py", EDITED, "`@@ -10,3 +10,4 @@` +2 −1", "patch")]
    assert ran == [Touch("django/db/y.py", EDITED, "via `python /tmp/fix.py`", "python /tmp/fix.py")]
    assert failed == []   # the patch did not apply: nothing changed


def test_swe_agent_edits_act_on_the_file_it_opened():
    tracker = FileTracker()
    tracker.touches("open", json.dumps({"path": "src/marshmallow/fields.py", "line_number": 1474}))
    edit = tracker.touches("edit", json.dumps({"search": "return int(value)", "replace": "return int(round(value))"}))
    tracker.touches("bash", json.dumps({"command": "create get_seed.py"}))
    typed = tracker.touches("bash", json.dumps({"command": "edit 9:9\n    model = s.model()\nend_of_edit"}))

    assert edit == [Touch("src/marshmallow/fields.py", EDITED, "`return int(value)` → `return int(round(value))`", "edit")]
    assert typed == [Touch("get_seed.py", EDITED, "line 9 → `model = s.model()`", "edit")]
