"""What each section of the offline summary says, on real corpus sessions where the corpus
has the case, and on short transcripts in the summarizer's own input format otherwise."""
from __future__ import annotations

import json
import re

import pytest
from summarizer_spans import CORPUS

from compaction import locales
from compaction.messages import wrap_originals
from compaction.summarizer import render_conversation
from compaction.summarizer.extractive import count_words, parse_previous, summarize_text
from tests.corpus import require_corpus

DJANGO_FIX = "minipr__deepseek_bench1__django__django-11099"
DJANGO_ORDER = "minipr__deepseek_bench1__django__django-13265"
PLACEHOLDERS = ("/path/to/working/dir", "path/to/file1", "path/to/file2", "README.md")


def corpus_transcript(name: str, start: int = 0, stop: int | None = None) -> str:
    data = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    span = [m for m in wrap_originals(data["messages"]) if m.role != "system"][start:stop]
    return render_conversation(span)


def section(text: str, heading: str) -> list[str]:
    """The bullets under ``## heading`` ([] when the section is absent)."""
    if f"## {heading}\n" not in text:
        return []
    body = text.split(f"## {heading}\n", 1)[1].split("\n\n## ", 1)[0]
    return [line[2:] for line in body.splitlines() if line.startswith("- ")]


def call(name: str, args: dict) -> str:
    return f"[Called tool: {name} with args: {json.dumps(args)}]"


def session(*parts: str) -> str:
    """A transcript of ``parts`` after a long, uneventful test run: real spans are large, and
    the word budget is held below half the input, so a tiny span would get a tiny summary."""
    log = "\n".join(f"tests/test_suite.py::test_case_{k} PASSED" for k in range(400))
    opening = ["[assistant]: " + call("bash", {"command": "pytest -q tests/test_suite.py"}),
               f"[bash returned: {log}\n<returncode>0</returncode>]"]
    return "\n\n".join([parts[0], *opening, *parts[1:]])


@pytest.fixture(scope="module")
def django_fix() -> str:
    return summarize_text(corpus_transcript(DJANGO_FIX), None, 600)


@pytest.fixture(scope="module")
def django_order() -> str:
    return summarize_text(corpus_transcript(DJANGO_ORDER, 0, 140), None, 600)


def test_the_task_is_the_tagged_request_kept_short_with_the_constraints_after_it(django_order):
    task, *rest = section(django_order, "Task and constraints")

    assert task.startswith("Task: AlterOrderWithRespectTo() with ForeignKey crash when _order is included in Index().")
    assert "Consider the following PR description" not in task and "<pr_description>" not in task
    assert count_words(task) <= 62 and len(task) <= 500
    assert "Constraint: DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)" in rest


def test_the_file_the_agent_fixed_is_listed_as_edited_and_the_files_it_only_read_apart(django_fix):
    edited, read = section(django_fix, "Files edited"), section(django_fix, "Files read")

    # the rewrite is compared with the file as `cat` showed it: the change itself is named
    assert ("./django/contrib/auth/validators.py (rewritten: `regex = r'^[\\w.@+-]+$'` → "
            "`regex = r'\\A[\\w.@+-]+\\Z'` +2 −2)") in edited
    assert any(line.startswith("/testbed/test_username_validator.py (created") for line in edited)
    assert "./django/core/validators.py (×7)" in read
    assert not {line.split(" (")[0] for line in edited} & {line.split(" (")[0] for line in read}


def test_every_way_of_changing_a_file_counts_as_an_edit_and_reading_commands_as_reads():
    patch = "*** Begin Patch\n*** Update File: src/billing/tax.py\n@@\n-rate = 0.2\n+rate = 0.21\n*** End Patch"
    transcript = session(*[
        "[user]: Update the VAT rate and note it in the changelog.",
        "[assistant]: " + call("str_replace_editor", {"command": "str_replace", "path": "/repo/src/billing/vat.py",
                                                       "old_str": "0.2", "new_str": "0.21"}),
        "[str_replace_editor returned: The file /repo/src/billing/vat.py has been edited.]",
        "[assistant]: " + call("bash", {"command": "sed -i 's/rate\\/old/rate\\/new/g' src/billing/rates.cfg"}),
        "[bash returned: <returncode>0</returncode>]",
        "[assistant]: " + call("bash", {"command": "cat > notes/vat.md << 'EOF'\nrate > 0.2 now\nEOF"}),
        "[bash returned: <returncode>0</returncode>]",
        "[assistant]: " + call("bash", {"command": "echo '- VAT 21%' >> CHANGELOG.md"}),
        "[bash returned: <returncode>0</returncode>]",
        "[assistant]: " + call("apply_patch", {"input": patch}),
        "[apply_patch returned: Done!]",
        "[assistant]: " + call("Write", {"file_path": "/repo/tests/test_vat.py", "content": "def test_rate(): ..."}),
        "[Write returned: File created successfully]",
        "[assistant]: " + call("bash", {"command": "touch src/billing/__init__.py > /dev/null"}),
        "[bash returned: <returncode>0</returncode>]",
        "[assistant]: " + call("bash", {"command": "grep -n 'rate|vat' src/billing/invoice.py && sed -n '1,20p' setup.cfg"}),
        "[bash returned: 12: rate = vat.rate]",
        "[assistant]: " + call("Read", {"file_path": "/repo/src/billing/currency.py"}),
        "[Read returned: import decimal]",
    ])

    text = summarize_text(transcript, None, 400)

    edited = {line.split(" (")[0]: line for line in section(text, "Files edited")}
    assert set(edited) == {"/repo/src/billing/vat.py", "src/billing/rates.cfg", "notes/vat.md", "CHANGELOG.md",
                           "src/billing/tax.py", "/repo/tests/test_vat.py", "src/billing/__init__.py"}
    assert edited["notes/vat.md"] == "notes/vat.md (created)"
    assert edited["src/billing/__init__.py"] == "src/billing/__init__.py (created)"
    assert "/dev/null" not in text.split("## Commands and outcomes", 1)[0]
    assert edited["src/billing/tax.py"] == "src/billing/tax.py (edited: +1 −1)"
    assert edited["/repo/src/billing/vat.py"] == "/repo/src/billing/vat.py (edited: `0.2` → `0.21`)"
    assert edited["src/billing/rates.cfg"] == "src/billing/rates.cfg (edited: `s/rate\\/old/rate\\/new/g`)"
    assert edited["CHANGELOG.md"] == "CHANGELOG.md (edited: appended)"
    assert set(section(text, "Files read")) == {"src/billing/invoice.py", "setup.cfg", "/repo/src/billing/currency.py"}
    # a sed script is the change, never a path of its own
    listed = section(text, "Files edited") + section(text, "Files read") + section(text, "Other paths")
    assert not [line for line in listed if line.startswith(("s/", "rate"))]
    assert "s/rate" not in "\n".join(section(text, "Names used"))


def test_placeholder_paths_of_the_instructions_are_not_listed_anywhere(django_order):
    for placeholder in PLACEHOLDERS:
        assert placeholder not in django_order


def test_a_path_the_session_really_used_is_kept_even_when_the_instructions_name_it_too():
    transcript = session(*[
        "[user]: Create the patch with `git diff -- path/to/file1 > patch.txt`, see README.md for style.",
        "[assistant]: " + call("bash", {"command": "git diff -- src/app.py > patch.txt"}),
        "[bash returned: <returncode>0</returncode>]",
        "[assistant]: The patch is written because the fix is done.",
    ])

    text = summarize_text(transcript, None, 200)

    assert "patch.txt (created)" in section(text, "Files edited")
    assert "path/to/file1" not in text.split("## Task and constraints", 1)[1].split("\n\n## ", 1)[1]
    assert "README.md" not in "\n".join(section(text, "Other paths") + section(text, "Names used"))


def test_commands_are_listed_with_their_exit_status_and_the_error_they_met(django_order):
    commands = section(django_order, "Commands and outcomes")

    assert ("bash: cd /testbed && python test_issue.py 2>&1 → exit 1: ValueError: Indexes passed to ModelState "
            "require a name attribute. <Index: fields='look, _order'> doesn't have one.") in commands


def test_errors_of_a_real_session_are_told_apart_as_open_or_fixed(django_fix):
    errors = section(django_fix, "Errors")

    # The agent got its check script running once the missing module was installed, and the
    # item says by which command...
    assert any(e.startswith("Fixed: ModuleNotFoundError: No module named 'sqlparse' "
                            "(in `python test_validators_directly.py`; fix: `pip") for e in errors), errors
    # ...but never got pytest or the Django test runner to work.
    assert "Open: /opt/miniconda3/bin/python: No module named pytest (in `python -m pytest`)" in errors
    assert ("Open: django.core.exceptions.ImproperlyConfigured: The SECRET_KEY setting must not be empty. "
            "(in `python -m django`, ×2)") in errors


def test_an_error_is_fixed_once_the_same_command_succeeds_and_open_otherwise():
    transcript = session(*[
        "[user]: Make tools/report.py work again.",
        "[assistant]: " + call("bash", {"command": "cd /repo && python tools/report.py 2>&1"}),
        "[bash returned: Traceback (most recent call last):\n  File \"tools/report.py\", line 3\n"
        "KeyError: 'totals'\n<returncode>1</returncode>]",
        "[assistant]: " + call("bash", {"command": "npm run lint"}),
        "[bash returned: error: 3 problems found\n<returncode>2</returncode>]",
        "[assistant]: The report reads totals before they exist, so I will default them to zero.",
        "[assistant]: " + call("bash", {"command": "cd /repo && python tools/report.py"}),
        "[bash returned: report written\n<returncode>0</returncode>]",
    ])

    errors = section(summarize_text(transcript, None, 300), "Errors")

    assert "Fixed: KeyError: 'totals' (after `python tools/report.py`)" in errors
    assert "Open: error: 3 problems found (in `npm run lint`)" in errors


def test_an_open_error_of_an_earlier_summary_is_closed_when_its_command_now_succeeds():
    first = summarize_text(session(*[
        "[user]: Fix the import error in app/main.py, and keep the CLI flags as they are.",
        "[assistant]: " + call("bash", {"command": "python -m app.main --check"}),
        "[bash returned: ImportError: cannot import name 'load_config'\n<returncode>1</returncode>]",
    ]), None, 200)
    assert "Open: ImportError: cannot import name 'load_config' (in `python -m app.main`)" in section(first, "Errors")

    second = summarize_text(session(*[
        "[assistant]: " + call("bash", {"command": "python -m app.main --check"}),
        "[bash returned: all checks passed\n<returncode>0</returncode>]",
    ]), first, 200)

    assert "Fixed: ImportError: cannot import name 'load_config' (in `python -m app.main`)" in section(second, "Errors")


def test_a_directory_listing_in_tool_output_is_counted_by_folder_not_listed_file_by_file():
    """A session that listed a package cache printed 30 file names; the summary listed every
    one of them under "Other paths". Now the best ranked few stay one per line and the rest
    are counted by folder, and a later summary counts them again instead of adding lines."""
    hooks = [f"/repo/.git/hooks/{name}.sample" for name in ("commit-msg", "pre-rebase", "pre-push", "update",
                                                            "pre-commit", "post-update", "pre-receive")]
    cache = [f"/opt/conda/pkgs/package-{k}.0-py313_0.json" for k in range(30)]
    listing = "\n".join(hooks + cache)
    first = summarize_text(session(*[
        "[user]: Find out why the install in /repo breaks, and fix /repo/setup.py.",
        "[assistant]: " + call("bash", {"command": "find /repo /opt/conda/pkgs -type f"}),
        f"[bash returned: {listing}\n<returncode>0</returncode>]",
        "[assistant]: " + call("bash", {"command": "sed -i 's/old/new/' /repo/setup.py"}),
        "[bash returned: <returncode>0</returncode>]",
    ]), None, 600)

    other = section(first, "Other paths")
    singles = [line for line in other if line.endswith(" (in output)")]
    assert len(singles) == 7, other
    assert len(other) <= 12, other
    counted = "\n".join(other)
    assert "`/opt/conda/pkgs/` (" in counted and " more files in output: package-" in counted
    listed = len(re.findall(r"package-\d+\.0-py313_0\.json", counted))
    assert listed <= 7 + 3, counted  # the best ranked singles and a folder line's three examples
    assert "/repo/setup.py (edited" in "\n".join(section(first, "Files edited"))

    second = summarize_text(session(*[
        "[assistant]: " + call("bash", {"command": "ls /opt/conda/pkgs"}),
        f"[bash returned: {listing}\n<returncode>0</returncode>]",
    ]), first, 600)

    again = section(second, "Other paths")
    assert len(again) <= 12, again
    assert sum("`/opt/conda/pkgs/` (" in line for line in again) == 1, again


@pytest.mark.parametrize("name", [DJANGO_FIX, DJANGO_ORDER, "minipr__deepseek_chat_dev_rerun__pylint-dev__astroid-1333",
                                  "claudecode_cctrace__f33cdb42"])
def test_decisions_are_whole_sentences(name):
    decisions = section(summarize_text(corpus_transcript(name), None, 600), "Decisions")

    assert decisions, name
    for sentence in decisions:
        assert re.match(r"[A-Z`\"'(0-9]", sentence), sentence
        assert sentence.endswith((".", "!", "?", ")", "`", "\"", "'")), sentence
        assert "…" not in sentence and not sentence.endswith(":"), sentence


def test_the_next_step_is_the_agents_last_plan_and_the_state_does_not_repeat_it():
    text = summarize_text(corpus_transcript(DJANGO_ORDER, 0, 139), None, 600)

    assert section(text, "Next step") == ["Plan: Let me write a proper patch."]
    state = section(text, "Current state")
    assert state[0].startswith("Last agent message: Now I need to modify this code.")
    assert "proper patch" not in state[0]


def test_the_next_step_is_a_request_the_agent_has_not_answered_yet():
    transcript = session(*[
        "[user]: Rename the --out flag of tools/export.sh to --output.",
        "[assistant]: " + call("bash", {"command": "sed -i 's/--out /--output /' tools/export.sh"}),
        "[bash returned: <returncode>0</returncode>]",
        "[assistant]: Renamed; I will update the docs next.",
        "[user]: Also add a --quiet flag while you are at it.",
    ])

    text = summarize_text(transcript, None, 200)

    assert section(text, "Next step") == ["Unanswered request: Also add a --quiet flag while you are at it."]


def test_a_harness_message_repeated_word_for_word_is_not_taken_for_a_request():
    nag = "Please always provide EXACTLY ONE action in triple backticks."
    parts = ["[user]: Find why the nightly export in jobs/export.py is slow."]
    for k in range(3):
        parts += [f"[assistant]: I will look at step {k} of jobs/export.py because it loops.", f"[user]: {nag}"]
    parts.append("[assistant]: The slow part is the per-row query because it runs 10,000 times.")

    text = summarize_text("\n\n".join(parts), None, 200)

    assert nag not in text
    assert section(text, "Task and constraints")[0] == "Task: Find why the nightly export in jobs/export.py is slow."


def test_names_used_lists_the_agents_identifiers_that_no_other_section_shows(django_order):
    names = ", ".join(section(django_order, "Names used")).split(", ")
    rest = django_order.split("## Names used", 1)[0]

    assert {"generate_created_models", "generate_added_indexes", "MigrationAutodetector"} <= set(names)
    assert not [n for n in names if n in rest]
    assert not [n for n in names if n in ("MY_ENV_VAR", "--- a/", "+++ b/")] or names.index("MY_ENV_VAR") > 20


def test_sections_in_chinese_and_read_back_from_a_chinese_summary():
    transcript = session(*[
        "[user]: 请修复 src/app/main.py 中的登录错误，不要修改测试文件。",
        "[assistant]: " + call("bash", {"command": "pytest tests/test_login.py"}),
        "[bash returned: UnicodeDecodeError: 'ascii' codec can't decode byte 0xe7\n<returncode>1</returncode>]",
        "[assistant]: 错误原因是文件编码。我将在读取时指定 utf-8 编码。",
    ])

    text = summarize_text(transcript, None, 200, "zh")

    assert "## 任务与约束" in text and "## 错误" in text and "## 下一步" in text
    assert "- 未解决：UnicodeDecodeError" in text and "- 计划：我将在读取时指定 utf-8 编码。" in text
    sections, ours = parse_previous(text)
    assert ours and sections["Errors"][0].startswith("Open: UnicodeDecodeError")
    assert sections["Next step"] == ["Plan: 我将在读取时指定 utf-8 编码。"]


def test_a_summary_in_the_format_before_the_split_is_read_into_the_new_sections():
    old = ("Extractive summary (no LLM): 1 user, 2 agent messages, 1 tool calls.\n\n"
           "## User requests\n- Task: Speed up the nightly export.\n\n"
           "## Files and paths\n- jobs/export.py (changed)\n- jobs/db.py (mentioned)")

    text = summarize_text(session("[assistant]: The export is fast now because the query is batched."), old, 200)

    assert section(text, "Task and constraints")[0] == "Task: Speed up the nightly export."
    assert "jobs/export.py (edited)" in section(text, "Files edited")
    assert "jobs/db.py" in section(text, "Other paths")


@pytest.mark.parametrize("budget", [80, 250, 600])
def test_every_corpus_session_stays_within_the_word_budget_with_all_sections(budget):
    require_corpus()
    for path in sorted(CORPUS.glob("*.json")):
        text = summarize_text(corpus_transcript(path.stem), None, budget)
        assert count_words(text) <= budget, path.name


def test_file_and_error_notes_are_written_in_the_summary_language_and_read_back():
    transcript = session(*[
        "[user]: 请修复 src/app/main.py 中的登录错误。",
        "[assistant]: " + call("bash", {"command": "python check.py"}),
        "[bash returned: KeyError: 'uid'\n<returncode>1</returncode>]",
        "[assistant]: " + call("bash", {"command": "sed -i s/uid/user_id/ src/app/main.py"}),
        "[bash returned: <returncode>0</returncode>]",
        "[assistant]: " + call("bash", {"command": "python check.py"}),
        "[bash returned: ok\n<returncode>0</returncode>]",
    ])

    text = summarize_text(transcript, None, 300, "zh")

    assert "- src/app/main.py (修改: `s/uid/user_id/`)" in text
    assert "- 已解决：KeyError: 'uid' (出现于 `python check.py`; 修复: 修改 `src/app/main.py`)" in text
    assert "s/uid/user_id/" not in "\n".join(section(text, "其他路径"))    # an unquoted sed script is no path
    sections, _ = parse_previous(text)
    assert sections["Files edited"] == ["src/app/main.py (edited: `s/uid/user_id/`)"]
    assert sections["Errors"] == ["Fixed: KeyError: 'uid' (in `python check.py`; fix: edited `src/app/main.py`)"]


def test_a_result_the_engine_already_archived_is_reported_as_archived_not_quoted():
    placeholder = locales.section("REDUCTION", "en")["cleared_placeholder"].format(
        tool_name="Edit", tool_call_id="t1", chars="2,334", tokens="600", handle="ar_1",
        load_call='session_load(handle="ar_1")')
    transcript = session(*[
        "[user]: Tidy up src/cli.py.",
        "[assistant]: " + call("Edit", {"file_path": "src/cli.py", "old_string": "a", "new_string": "b"}),
        f"[Edit returned: {placeholder}]",
    ])

    commands = section(summarize_text(transcript, None, 300), "Commands and outcomes")

    assert "Edit: src/cli.py → ran (output archived)" in commands


@pytest.mark.parametrize("language", locales.available())
def test_a_user_message_the_engine_kept_from_before_is_read_without_its_marker(language):
    """A folded summary reads earlier re-inserted user messages; the engine's own
    "kept verbatim" label on them is not the user's request and stays out of the summary."""
    marker = locales.texts(language)["preserved_marker"]
    transcript = session(*[
        f"[user]: {marker}\nRename the --out flag of tools/export.sh to --output.",
        "[assistant]: " + call("bash", {"command": "sed -i 's/--out /--output /' tools/export.sh"}),
        "[bash returned: <returncode>0</returncode>]",
        "[assistant]: Renamed the flag.",
    ])

    text = summarize_text(transcript, None, 200)

    assert marker not in text
    assert "Rename the --out flag of tools/export.sh to --output." in text


def test_the_exact_command_the_instructions_require_is_kept_with_its_constraint():
    instructions = ("[user]: Fix the rounding bug in billing/totals.py.\n\nWhen you are done, submit.\n"
                    "You MUST use this EXACT command to submit:\n\n```bash\n"
                    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt\n```\n\n"
                    "Do not edit the tests.")
    transcript = session(instructions, "[assistant]: I will read billing/totals.py because the bug is there.")

    constraints = [t for t in section(summarize_text(transcript, None, 300), "Task and constraints")
                   if t.startswith("Constraint:")]

    assert any("EXACT command to submit" in t and "`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat patch.txt`" in t
               for t in constraints), constraints


def test_a_list_introduced_by_a_colon_is_still_no_constraint_of_its_own():
    transcript = session("[user]: Fix billing/totals.py. You must check these files:\n\n- a.py\n- b.py",
                         "[assistant]: I will read billing/totals.py because the bug is there.")

    constraints = [t for t in section(summarize_text(transcript, None, 300), "Task and constraints")
                   if t.startswith("Constraint:")]

    assert not [t for t in constraints if "check these files" in t]


def test_names_the_agent_just_read_in_a_tool_result_are_kept_after_its_own():
    source = "\n".join(["class LedgerEntry:", "    def apply_rounding_mode(self, amount):",
                        "        return quantize_half_even(amount)"] + [f"# line {k}" for k in range(40)])
    transcript = session("[user]: Fix the rounding bug in billing/totals.py.",
                         "[assistant]: " + call("bash", {"command": "cat billing/ledger.py"}),
                         f"[bash returned: {source}\n<returncode>0</returncode>]")

    names = ", ".join(section(summarize_text(transcript, None, 300), "Names used")).split(", ")

    assert {"apply_rounding_mode", "quantize_half_even"} <= set(names)


def test_an_outcome_line_of_one_unbroken_run_is_cut_to_its_words_worth():
    blob = "QUJD" * 600   # 2,400 characters without a space: one "word", hundreds of tokens
    transcript = session("[user]: Decode the payload in data/payload.b64.",
                         "[assistant]: " + call("bash", {"command": "cat data/payload.b64"}),
                         f"[bash returned: {blob}\n<returncode>0</returncode>]")

    text = summarize_text(transcript, None, 300)
    line = next(t for t in section(text, "Commands and outcomes") if "payload.b64" in t)

    assert "QUJDQUJD" in line and len(line) < 300
