"""What an agent needs to continue from an extractive summary: errors with their status and
what fixed them, a real next step, requests without harness boilerplate, and the task said
once (pointed to when the context keeps it word for word after the summary)."""
from __future__ import annotations

import json

import pytest
from summarizer_spans import CORPUS

from compaction import locales
from compaction.messages import Provenance, wrap_originals
from compaction.policy import SummarizerPolicy
from compaction.presets import get_preset
from compaction.session import CompactionSession
from compaction.summarizer import summarize
from compaction.summarizer.extractive import parse_previous, summarize_text
from compaction.summarizer.extractive.sections import TASK_POINTER
from compaction.tokens import CharCounter, MessageCounter
from tests.corpus import require_corpus
from tests.engine.helpers import tool_round

TASK = ("Fix the crash in src/api/views.py when a request has no user id. Do not change the public "
        "response format, other services parse it.")
REMINDER = "Please always provide EXACTLY ONE action in triple backticks, found 0 actions."


def call(name: str, args: dict) -> str:
    return f"[Called tool: {name} with args: {json.dumps(args)}]"


def transcript(*parts: str) -> str:
    """``parts`` after a long passing test run: the word budget is held below half the input."""
    log = "\n".join(f"tests/test_suite.py::test_case_{k} PASSED" for k in range(400))
    opening = ["[assistant]: " + call("bash", {"command": "pytest -q tests/test_suite.py"}),
               f"[bash returned: {log}\n<returncode>0</returncode>]"]
    return "\n\n".join([parts[0], *opening, *parts[1:]])


def section(text: str, heading: str) -> list[str]:
    if f"## {heading}\n" not in text:
        return []
    body = text.split(f"## {heading}\n", 1)[1].split("\n\n## ", 1)[0]
    return [line[2:] for line in body.splitlines() if line.startswith("- ")]


FAILING_RUN = ("[bash returned: F\n=================================== FAILURES ===================================\n"
               "FAILED tests/test_api.py::test_anonymous - assert 500 == 200\n"
               "==== 1 failed in 0.18s ====\n<returncode>1</returncode>]")


# -- errors -------------------------------------------------------------------------------------

def test_a_test_runners_tally_is_a_result_and_the_failing_test_is_the_error_fixed_by_the_edit():
    text = summarize_text(transcript(
        f"[user]: {TASK}",
        "[assistant]: " + call("bash", {"command": "python -m pytest tests/test_api.py"}), FAILING_RUN,
        "[assistant]: " + call("str_replace_editor", {"command": "str_replace", "path": "src/api/views.py",
                                                      "old_str": "uid = request['user_id']",
                                                      "new_str": "uid = request.get('user_id')"}),
        "[str_replace_editor returned: The file src/api/views.py has been edited.]",
        "[assistant]: " + call("bash", {"command": "python -m pytest tests/test_api.py"}),
        "[bash returned: .\n==== 1 passed in 0.11s ====\n<returncode>0</returncode>]",
    ), None, 400)

    errors = section(text, "Errors")
    assert not [e for e in errors if "failed in" in e or "passed in" in e]
    assert errors == ["Fixed: FAILED tests/test_api.py::test_anonymous - assert 500 == 200 "
                      "(in `python -m pytest`; fix: edited `src/api/views.py`)"]


def test_an_error_still_failing_at_the_end_is_open_and_a_rerun_alone_fixes_nothing_named():
    text = summarize_text(transcript(
        f"[user]: {TASK}",
        "[assistant]: " + call("bash", {"command": "python manage.py check"}),
        "[bash returned: django.core.exceptions.ImproperlyConfigured: SECRET_KEY\n<returncode>1</returncode>]",
        "[assistant]: " + call("bash", {"command": "cat settings.py"}),
        "[bash returned: DEBUG = True]",
        "[assistant]: " + call("bash", {"command": "python manage.py check"}),
        "[bash returned: django.core.exceptions.ImproperlyConfigured: SECRET_KEY\n<returncode>1</returncode>]",
    ), None, 300)

    assert section(text, "Errors") == ["Open: django.core.exceptions.ImproperlyConfigured: SECRET_KEY "
                                       "(in `python manage.py check`, ×2)"]


# -- requests and next step -----------------------------------------------------------------------

def test_a_harness_format_reminder_is_neither_the_latest_request_nor_the_next_step():
    text = summarize_text(transcript(
        f"[user]: {TASK}",
        "[assistant]: I will read the view first, then patch the missing user id.",
        f"[user]: {REMINDER}",
    ), None, 300)

    assert not [line for line in section(text, "Task and constraints") if "EXACTLY ONE action" in line]
    assert "EXACTLY ONE" not in "\n".join(section(text, "Next step") + section(text, "Decisions"))
    assert section(text, "Next step") == ["Plan: I will read the view first, then patch the missing user id."]


def test_nudges_of_one_shape_repeated_more_than_twice_are_not_requests():
    nudges = [f"[user]: Step {k} of 40 done. Continue with the next action." for k in (3, 7, 9)]
    text = summarize_text(transcript(f"[user]: {TASK}", *nudges,
                                     "[user]: Also log the request id when the user id is missing."), None, 300)

    requests = section(text, "Task and constraints")
    assert "Latest request: Also log the request id when the user id is missing." in requests
    assert not [line for line in requests if "Continue with the next action" in line]


def test_a_filler_sentence_is_never_the_next_step():
    text = summarize_text(transcript(
        f"[user]: {TASK}",
        "[assistant]: Next I will add a regression test in tests/test_api.py for a request without user id.",
        "[assistant]: " + call("bash", {"command": "grep -n user_id src/api/views.py"}),
        "[bash returned: 12: uid = request['user_id']]",
        "[assistant]: Let's try this.",
        "[assistant]: " + call("bash", {"command": "python -m pytest tests/test_api.py"}), FAILING_RUN,
        "[assistant]: Let's check if there are other occurrences.",
    ), None, 300)

    assert section(text, "Next step") == [
        "Plan: Next I will add a regression test in tests/test_api.py for a request without user id."]


def test_a_call_still_waiting_for_its_result_is_the_next_step():
    text = summarize_text(transcript(
        f"[user]: {TASK}",
        "[assistant]: Let me run the API tests now.\n" + call("bash", {"command": "python -m pytest tests/test_api.py"}),
    ), None, 300)

    assert section(text, "Next step") == ["Pending call: bash: python -m pytest tests/test_api.py"]


# -- the task once --------------------------------------------------------------------------------

def test_a_task_kept_verbatim_after_the_summary_is_pointed_to_not_repeated():
    span = transcript(f"[user]: {TASK}", "[assistant]: I will read src/api/views.py first.")

    kept = summarize_text(span, None, 300, kept_verbatim=[TASK])
    not_kept = summarize_text(span, None, 300)

    assert section(kept, "Task and constraints") == [TASK_POINTER]
    assert "public response format" not in kept            # neither the excerpt nor its constraint
    assert section(not_kept, "Task and constraints")[0].startswith("Task: Fix the crash in src/api/views.py")


def test_the_pointer_is_written_in_the_summary_language_and_read_back():
    text = summarize_text(transcript(f"[user]: {TASK}", "[assistant]: I will read src/api/views.py first."),
                          None, 300, "zh", kept_verbatim=[TASK])

    assert locales.section("EXTRACTIVE", "zh")["task_pointer"] in text
    sections, ours = parse_previous(text)
    assert ours and sections["Task and constraints"] == [TASK_POINTER]


def test_the_default_prompt_asks_an_llm_to_point_to_the_kept_task():
    counter = MessageCounter(CharCounter(4.0))
    messages = wrap_originals([{"role": "user", "content": TASK}, *tool_round("c1", "x = 1\n" * 200)])

    kept = summarize(messages, SummarizerPolicy(max_summary_words=200), counter=counter, replaced_tokens=10_000,
                     kept_verbatim=(TASK,))
    plain = summarize(messages, SummarizerPolicy(max_summary_words=200), counter=counter, replaced_tokens=10_000)

    rule = locales.section("PROMPTS", "en")["task_kept_rule"].strip()
    assert rule in kept.prompt_messages[-1]["content"] and rule not in plain.prompt_messages[-1]["content"]
    assert TASK_POINTER in kept.text and TASK_POINTER not in plain.text


DJANGO = "minipr__deepseek_bench1__django__django-13964"
# Its first summary quotes the latest request whole, which leaves room to re-insert the task.
CCTRACE = "claudecode_cctrace__f33cdb42"


def first_summary(name: str, preserve: bool) -> tuple[str, list[dict]]:
    require_corpus(f"{name}.json")
    data = json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))
    policy = get_preset("default").with_overrides({"context_window": 32_000,
                                                   "finalize.preserve_user_messages": preserve})
    session = CompactionSession(policy)
    for raw in data["messages"]:
        if raw["role"] == "assistant":
            out = session.before_model_call()
            if out and getattr(out, "summarized", False):
                at = next(i for i, m in enumerate(out.messages) if m.provenance is Provenance.SUMMARY)
                return out.context[at]["content"], out.context[at + 1:]
        session.append(raw)
    raise AssertionError("no summary")


@pytest.mark.parametrize("name", [DJANGO, CCTRACE])
def test_on_a_real_session_the_task_is_in_the_context_once(name):
    require_corpus(f"{name}.json")
    task = next(m["content"] for m in json.loads((CORPUS / f"{name}.json").read_text(encoding="utf-8"))["messages"]
                if m["role"] == "user")
    excerpt = "- Task: " + " ".join(task.split()[:6])

    summary, after = first_summary(name, preserve=True)
    assert TASK_POINTER in summary and excerpt not in summary.replace("<pr_description> Consider the following "
                                                                       "PR description: ", "")
    assert any(task in (m.get("content") or "") for m in after if m["role"] == "user")

    # the other way round: nothing keeps the task after the summary, so the summary carries it
    summary, after = first_summary(name, preserve=False)
    assert TASK_POINTER not in summary and "- Task: " in summary
    assert not any(task in (m.get("content") or "") for m in after if m["role"] == "user")
