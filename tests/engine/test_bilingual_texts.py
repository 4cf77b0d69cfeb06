"""Every text the engine writes into a context exists in English and Chinese, is
selected by the policy, and lives in one locale file per language."""
from __future__ import annotations

import string
import sys
import types

import pytest

from compaction import CompactionSession, Compactor, Policy, PolicyError, locales
from compaction.policy import SummarizerPolicy
from compaction.reduction import notices as N
from compaction.summarizer.cache_safe import default_cache_safe_prompt
from compaction.summarizer.prompts import DEFAULT_PROMPT, build_prompt_messages, default_prompt
from tests.support.sessions import chat, corpus_messages, tool_round


def fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


@pytest.mark.parametrize("language", locales.available())
@pytest.mark.parametrize("section", locales.SECTIONS)
def test_every_language_file_has_every_text_with_the_same_placeholders(language, section):
    english = locales.own_section(section, "en")
    other = locales.own_section(section, language)
    assert set(other) == set(english)
    for key, text in english.items():
        assert fields(other[key]) == fields(text), (section, key)


def test_english_and_chinese_are_shipped():
    assert {"en", "zh"} <= set(locales.available())
    assert set(N.LANGUAGES) == set(locales.available())


def test_the_reduction_notices_and_the_default_prompt_come_from_the_locale_files():
    assert N.TEXTS["zh"] is not None and N.TEXTS["zh"] == locales.own_section("REDUCTION", "zh")
    assert DEFAULT_PROMPT == locales.own_section("PROMPTS", "en")["summary"]


def test_one_language_setting_drives_every_section():
    p = Policy.load({"language": "zh"})
    assert (p.finalize.language, p.reduction.language) == ("zh", "zh")
    assert Policy.load(p.to_json()) == p
    # the section settings still work on their own (older policies)
    old = Policy.load({"finalize": {"language": "zh"}})
    assert old.language is None and old.finalize.language == "zh" and old.reduction.language == "en"
    with pytest.raises(PolicyError) as caught:
        Policy.load({"language": "tlh"})
    assert caught.value.field == "language" and "compaction/locales/tlh.py" in str(caught.value)


def test_a_chinese_policy_writes_chinese_summary_turn_acknowledgement_and_prompt():
    p = Policy.load({"language": "zh", "counter": "approx", "cut": {"keep_messages": 2},
                     "finalize": {"preserve_user_messages": False}})
    out = Compactor(p).compact(chat(turns=8), force=True)

    summary, ack = out.context[1]["content"], out.context[2]["content"]
    assert summary.startswith("[对话摘要 #1]\n本对话较早的部分")
    assert "（此摘要由程序从消息中抽取，未使用大模型。）" in summary
    assert summary.rstrip().endswith("[摘要结束]")
    assert ack == locales.texts("zh")["acknowledgement"]
    prompt = out.prompt[-1]["content"]
    assert "## 目标与约束" in prompt and "## Goals and constraints" not in prompt
    assert "<conversation>" in prompt        # tags stay, the offline summarizer reads them


def test_a_chinese_policy_writes_chinese_truncation_and_clearing_notices():
    # landing.min_freed 0: the clearing here frees less than the default minimum
    p = Policy.load({"language": "zh", "counter": "approx", "context_window": 20_000, "summarize": False,
                     "landing": {"min_freed": 0},
                     "reduction": {"enabled": True, "truncation": {"max_chars": 2000},
                                   "clearing": {"trigger_fraction": 0.1, "keep": 1}}})
    session = CompactionSession(p)
    session.append({"role": "system", "content": "agent"})
    session.append({"role": "user", "content": "读取日志"})
    for i in range(4):
        for raw in tool_round(f"c{i}", f"line {i}\n" + "日志内容 " * 900):
            session.append(raw)
    truncated = [m for m in session.context() if m["role"] == "tool" and "为适应上下文，输出已缩短" in m["content"]]
    assert len(truncated) == 4

    out = session.compact()

    cleared = [m for m in out.context if m["role"] == "tool" and "较早的工具结果已归档" in str(m["content"])]
    assert cleared, "old results were cleared with the Chinese placeholder"
    assert not any("Earlier tool result archived" in str(m["content"]) for m in out.context)


def test_english_stays_the_default_everywhere():
    out = Compactor(Policy.load({"counter": "approx", "cut": {"keep_messages": 2}})).compact(chat(turns=8), force=True)
    assert out.context[1]["content"].startswith("[Conversation summary #1]")
    assert "## Goals and constraints" in out.prompt[-1]["content"]


def test_the_default_prompts_in_chinese_keep_the_word_budget():
    text = build_prompt_messages("[user]: 你好", SummarizerPolicy(max_summary_words=120), language="zh")[0]["content"]
    assert "摘要不超过 120 字" in text and "<previous_summary>\nnone\n</previous_summary>" in text
    assert "不超过" not in default_prompt(0, "zh")
    assert "{max_summary_words}" in default_cache_safe_prompt(100, "zh")
    assert "不要调用任何工具" in default_cache_safe_prompt(100, "zh")


def test_a_language_without_a_locale_file_gets_english_texts_asking_for_that_language():
    assert "Write the summary in Japanese." in default_prompt(100, "ja")
    assert default_cache_safe_prompt(100, "ja").endswith("Write the summary in Japanese.")
    assert N.render("omitted_marker", "ja", omitted="3") == N.render("omitted_marker", "en", omitted="3")


def test_adding_a_language_is_one_module(monkeypatch):
    module = types.ModuleType("compaction.locales.eo")
    module.NAME = "Esperanto"
    module.TEXTS = {"acknowledgement": "Komprenite."}
    module.PROMPTS = {"summary": "Resumu: {conversation_text}{length_rule}{language_rule}{none}{previous_open}"
                                 "{previous_close}{conversation_open}{conversation_close}".replace(
                                     "{conversation_text}", "{{conversation_text}}")}
    monkeypatch.setitem(sys.modules, "compaction.locales.eo", module)
    locales.module.cache_clear()
    locales.section.cache_clear()
    try:
        assert locales.texts("eo")["acknowledgement"] == "Komprenite."
        assert locales.texts("eo")["summary_close"] == "[End of summary]"       # gaps fall back to English
        assert default_prompt(0, "eo").startswith("Resumu: {conversation_text}")
        p = Policy.load({"counter": "approx", "cut": {"keep_messages": 2}, "finalize": {"language": "eo"}})
        out = Compactor(p).compact(chat(turns=6), force=True)
        assert out.context[2]["content"] == "Komprenite."
        assert out.prompt[-1]["content"].startswith("Resumu: [user]: question")
    finally:
        locales.module.cache_clear()
        locales.section.cache_clear()


def test_a_chinese_compaction_of_a_corpus_session_writes_no_english_engine_text():
    raws = corpus_messages("claudecode_sessionshare__general-tool-calls.json")
    p = Policy.load({"language": "zh", "counter": "approx", "context_window": 32_000,
                     "reduction": {"enabled": True, "clearing": {"trigger_fraction": 0.2}},
                     "cut": {"keep_messages": 10}})
    out = Compactor(p).compact(raws, force=True)

    written = [m.raw for m in out.messages if not m.is_original] + \
              [m.raw for m in out.messages if m.reduction is not None]
    text = "\n".join(str(r.get("content")) for r in written)
    assert "[对话摘要 #1]" in text and "明白。" in text
    for english in locales.own_section("TEXTS", "en").values():
        assert english.split("{")[0][:25] not in text
    if any(m.reduction for m in out.messages):
        assert "归档" in text
