"""The offline summary speaks the policy's language and reads its own earlier summaries back."""
from compaction import CompactionSession, Policy
from compaction.summarizer.extractive import parse_previous, summarize_text
from tests.corpus import session

TRANSCRIPT = ("[user]: Fix the failing test in src/app.py. Do not change the public API.\n\n"
              "[assistant]: I will run the tests first.\n\n"
              "[Called tool: bash with args: {\"cmd\": \"pytest tests/test_app.py\"}]\n\n"
              "[bash returned: FAILED tests/test_app.py::test_add - AssertionError: 3 != 4]\n\n"
              "[assistant]: The add function is off by one; I will fix src/app.py.")


def test_chinese_headings_and_label_when_the_language_is_chinese():
    text = summarize_text(TRANSCRIPT, None, 200, "zh")
    assert text.startswith("抽取式摘要（未使用大模型）")
    assert "## 任务与约束" in text and "任务：" in text
    assert "src/app.py" in text
    english = summarize_text(TRANSCRIPT, None, 200, "en")
    assert english.startswith("Extractive summary (no LLM)") and "## Task and constraints" in english


def test_a_chinese_summary_is_folded_into_the_next_one_without_losing_the_task():
    first = summarize_text(TRANSCRIPT, None, 200, "zh")
    sections, ours = parse_previous(first)
    assert ours and any(t.startswith("Task:") for t in sections["Task and constraints"])
    second = summarize_text("[assistant]: Tests pass now.", first, 200, "zh")
    assert second.count("任务：") == 1 and "Fix the failing test" in second


def test_a_chinese_policy_writes_chinese_texts_into_the_context_end_to_end():
    raws = session("minipr__deepseek_bench1__django__django-11099")["messages"]
    s = CompactionSession(Policy.load({"language": "zh", "context_window": 8000,
                                       "trigger": {"kind": "tokens", "threshold": 3000}}))
    for raw in raws:
        if raw["role"] == "assistant" and s.should_compact():
            s.compact()
        s.append(raw)
    summary = next(m for m in s.context() if m["role"] == "user" and "[对话摘要 #" in (m["content"] or ""))
    assert "抽取式摘要" in summary["content"] and "## 任务与约束" in summary["content"]
    assert any(m["role"] == "assistant" and (m["content"] or "").startswith("明白") for m in s.context())
