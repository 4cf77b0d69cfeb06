"""The offline extractive summarizer: used when no model is configured."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from summarizer_spans import CORPUS, make_span

from compaction import _env
from compaction.errors import SummaryError
from compaction.messages import wrap_originals
from compaction.policy import SummarizerPolicy
from compaction.summarizer import (
    EXTRACTIVE_MODEL,
    build_prompt_messages,
    render_conversation,
    summarize,
)
from compaction.summarizer.extractive import LABEL, count_words, register, summarize_text
from tests.corpus import require_corpus

DJANGO = "minipr__deepseek_bench1__django__django-11099.json"


def corpus_span(name: str):
    data = json.loads((CORPUS / name).read_text(encoding="utf-8"))
    messages = wrap_originals(data["messages"])
    return [m for m in messages if m.role != "system"]


@pytest.fixture(scope="module")
def django_span():
    return corpus_span(DJANGO)


def tokens_of(span, counter) -> int:
    return sum(t.total for t in counter.count_many(span))


def test_without_a_model_the_summary_is_extractive_and_says_so(django_span, counter):
    events: list[dict] = []

    result = summarize(django_span, SummarizerPolicy(), counter=counter,
                       replaced_tokens=tokens_of(django_span, counter), on_event=events.append)

    assert result.extractive and result.model == EXTRACTIVE_MODEL
    assert result.text.startswith(LABEL)
    assert [(e["phase"], e["model"], e["error"]) for e in events] == [("primary", EXTRACTIVE_MODEL, None)]
    assert result.usage["completion_tokens"] > 0


def test_the_extractive_summary_is_byte_for_byte_deterministic(django_span, counter):
    settings = SummarizerPolicy(max_summary_words=300)
    replaced = tokens_of(django_span, counter)

    first = summarize(django_span, settings, counter=counter, replaced_tokens=replaced).text
    second = summarize(django_span, settings, counter=counter, replaced_tokens=replaced).text

    assert first.encode() == second.encode()


@pytest.mark.parametrize("budget", [60, 150, 300, 600])
def test_the_extractive_summary_stays_within_the_word_budget(django_span, counter, budget):
    result = summarize(django_span, SummarizerPolicy(max_summary_words=budget), counter=counter,
                       replaced_tokens=tokens_of(django_span, counter))

    assert len(result.text.split()) <= budget
    assert count_words(result.text) <= budget


def test_the_extractive_summary_keeps_the_request_the_files_and_the_errors_of_a_real_session(django_span, counter):
    result = summarize(django_span, SummarizerPolicy(max_summary_words=600), counter=counter,
                       replaced_tokens=tokens_of(django_span, counter))
    text = result.text

    assert "UsernameValidator allows trailing newline in usernames" in text       # the user's request
    edited = text.split("## Files edited", 1)[1].split("\n## ", 1)[0]
    assert "django/contrib/auth/validators.py (rewritten: `regex" in edited          # the file that was fixed
    assert "ModuleNotFoundError: No module named 'pytz'" in text                   # errors met on the way
    assert "ImproperlyConfigured: The SECRET_KEY setting must not be empty." in text
    assert "No module named pytest" in text                                        # a failed command's outcome
    for heading in ("## Task and constraints", "## Files edited", "## Files read", "## Commands and outcomes",
                    "## Errors", "## Decisions", "## Current state", "## Next step"):
        assert heading in text
    assert "The patch looks correct" in text                                       # the last state


def test_a_previous_extractive_summary_is_merged_into_the_next_one(django_span, counter):
    first_half, second_half = django_span[:30], django_span[30:]
    settings = SummarizerPolicy(max_summary_words=500)
    first = summarize(first_half, settings, counter=counter, replaced_tokens=tokens_of(first_half, counter)).text

    second = summarize(second_half, settings, counter=counter, previous_summary=first,
                       replaced_tokens=tokens_of(second_half, counter) + counter.count_text(first)).text

    assert "previous summary folded in" in second.splitlines()[0]
    assert "UsernameValidator allows trailing newline" in second    # the task from the first run survives
    assert "No module named 'pytz'" in second                       # so does an early error
    assert "The patch looks correct" in second                      # and the new state is there
    assert len(second.split()) <= 500


def test_a_previous_llm_summary_is_kept_as_an_earlier_summary_section(django_span, counter):
    previous = "The team chose PostgreSQL 16 for the service. Deployment runs on Fridays only."
    span = django_span[:20]

    result = summarize(span, SummarizerPolicy(), counter=counter, previous_summary=previous,
                       replaced_tokens=tokens_of(span, counter) + counter.count_text(previous))

    assert "## Earlier summary" in result.text
    assert "PostgreSQL 16" in result.text and "Fridays only" in result.text


def cjk_span():
    log = "\n".join(f"[{i:03d}] 正在处理用户记录 {i}，状态正常。" for i in range(120))
    return make_span([
        {"role": "user", "content": "请修复 src/app/main.py 中的登录错误，不要修改测试文件。"},
        {"role": "assistant", "content": "我将先运行测试，因为需要看到具体的错误。",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "bash", "arguments": '{"command": "pytest tests/test_login.py"}'}}]},
        {"role": "tool", "tool_call_id": "c1",
         "content": log + "\n<returncode>1</returncode>\nTraceback (most recent call last):\n  File \"src/app/main.py\", "
                    "line 3\nUnicodeDecodeError: 'ascii' codec can't decode byte 0xe7\n"},
        {"role": "assistant", "content": "错误原因是文件编码。我决定在读取时指定 utf-8 编码。"},
        {"role": "user", "content": "ありがとう。ログも日本語で出してください。"},
        {"role": "assistant", "content": "알겠습니다. 로그 메시지를 일본어로 바꾸겠습니다."},
    ])


def test_cjk_conversations_are_summarized_with_their_own_text(counter):
    span = cjk_span()
    settings = SummarizerPolicy(max_summary_words=200)

    result = summarize(span, settings, counter=counter, replaced_tokens=tokens_of(span, counter))

    text = result.text
    assert "请修复 src/app/main.py 中的登录错误，不要修改测试文件。" in text
    assert "ログも日本語で出してください" in text
    assert "src/app/main.py" in text
    assert "UnicodeDecodeError: 'ascii' codec can't decode byte 0xe7" in text
    assert "我决定在读取时指定 utf-8 编码" in text
    assert "로그 메시지를 일본어로 바꾸겠습니다" in text
    assert count_words(text) <= 200


def test_a_tiny_span_that_a_summary_cannot_shrink_is_refused(counter):
    span = make_span([{"role": "user", "content": "Rename parse_cfg to parse_config."},
                      {"role": "assistant", "content": "Done."}])

    with pytest.raises(SummaryError) as caught:
        summarize(span, SummarizerPolicy(), counter=counter, replaced_tokens=tokens_of(span, counter))

    assert len(caught.value.attempts) == 1  # the extractive answer would not change on a retry
    assert "not smaller than what it replaces" in caught.value.attempts[0].error


def test_a_megabyte_transcript_is_summarized_within_budget(counter):
    # Build a ~1 MB run from a real session repeated; no clock assertions, only a generous guard.
    span = corpus_span(DJANGO)
    text = render_conversation(span)
    big = "\n\n".join([text] * (1_000_000 // len(text) + 1))

    summary = summarize_text(big, None, 400)

    assert len(big) > 1_000_000
    assert summary == summarize_text(big, None, 400)
    assert len(summary.split()) <= 400 and "django/contrib/auth/validators.py" in summary


def test_the_extractive_provider_answers_through_litellm_completion():
    litellm = _env.litellm()
    register(litellm)
    register(litellm)  # registering twice is harmless
    messages = build_prompt_messages("[user]: Add a --dry-run flag to tools/deploy.sh\n\n[assistant]: I will add it.",
                                     SummarizerPolicy(max_summary_words=80))

    response = litellm.completion(model=EXTRACTIVE_MODEL, messages=messages)

    content = response.choices[0].message.content
    assert content.startswith(LABEL)
    assert "tools/deploy.sh" in content
    assert sum(1 for item in litellm.custom_provider_map if item["provider"] == "extractive") == 1


def test_the_word_budget_reaches_the_provider_even_with_a_custom_prompt(django_span, counter):
    settings = SummarizerPolicy(prompt="Summarize:\n{conversation_text}", max_summary_words=70)

    result = summarize(django_span, settings, counter=counter, replaced_tokens=tokens_of(django_span, counter))

    assert len(result.text.split()) <= 70
    assert "UsernameValidator" in result.text


def test_every_corpus_session_gets_a_labelled_summary_within_budget(counter):
    require_corpus()
    for path in sorted(CORPUS.glob("*.json")):
        span = corpus_span(path.name)
        text = summarize_text(render_conversation(span), None, 250)
        assert text.startswith(LABEL), path.name
        assert count_words(text) <= 250, path.name


def test_an_offline_replay_summarizes_without_importing_litellm():
    """A replay on the offline summarizer (the CLI's, a sweep's, a worker's with no model
    configured) never pays litellm's seconds-long, 165 MB import: the extractive model
    answers in process. A fresh interpreter shows what a user's process would load."""
    require_corpus(DJANGO)
    script = (
        "import json, sys\n"
        "from compaction import get_preset, simulate\n"
        f"data = json.loads(open({str(CORPUS / DJANGO)!r}, encoding='utf-8').read())\n"
        "policy = get_preset('default').with_overrides({'context_window': 8000})\n"
        "report = simulate(data['messages'], policy)\n"
        "print(json.dumps([len(report['compactions']), 'litellm' in sys.modules]))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    compactions, imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert compactions > 0 and imported is False
