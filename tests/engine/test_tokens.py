"""Token accounting: exact per encoding, images by tiles, categories, O(1) appends."""
import json

import pytest
import tiktoken

from compaction.context import LiveContext
from compaction.images import UNKNOWN_IMAGE_TOKENS
from compaction.messages import wrap_originals
from compaction.tokens import (
    MESSAGE_OVERHEAD,
    SEGMENTED_ENCODINGS,
    SEGMENTED_FROM_CHARS,
    TOOL_CALL_OVERHEAD,
    CharCounter,
    MessageCounter,
    TiktokenCounter,
    encoding_for_model,
    make_counter,
)
from tests.corpus import corpus_files, require_corpus, session


def test_encoding_follows_the_model_family():
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("openai/gpt-5") == "o200k_base"
    assert encoding_for_model("o3-mini") == "o200k_base"
    assert encoding_for_model("gpt-4-turbo") == "cl100k_base"
    assert encoding_for_model("claude-sonnet-4-5") == "cl100k_base"


def test_text_counts_match_tiktoken_exactly_offline():
    text = "def frobnicate(x):\n    return x ** 2  # 二乗を返す"
    for enc in ("o200k_base", "cl100k_base"):
        ours = make_counter(encoding=enc).count_text(text)
        assert ours == len(tiktoken.get_encoding(enc).encode_ordinary(text))


def _long_texts() -> list[str]:
    """Long texts of the kinds a summarizer prompt and a tool output hold: every corpus
    transcript rendered as one text, and hand-made ones with newlines before spaces,
    slashes, punctuation, CJK, emoji and a blank-line run at the very end."""
    require_corpus()
    texts = []
    for path in corpus_files():
        data = json.loads(path.read_text())
        lines = []
        for m in data.get("messages", []):
            content = m.get("content")
            if isinstance(content, list):
                content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
            lines.append(f"[{m.get('role')}]\n{content or ''}")
            for call in m.get("tool_calls") or []:
                lines.append(json.dumps(call, ensure_ascii=False))
        texts.append("\n\n".join(lines))
    tricky = ("x = 1.\n/usr/bin/env\n\n  indented\n\t tab\n'sentence'\n\n\n日本語の行\n🙂 emoji\n"
              "punct!!\n\n/slash\n)\n\r\nwindows\r\nend.\n\n")
    texts.append(tricky * 800)
    texts.append(("a" * 40 + "\n") * 1000 + "\n\n\n")
    return [t for t in texts if len(t) >= SEGMENTED_FROM_CHARS]


@pytest.mark.parametrize("encoding", sorted(SEGMENTED_ENCODINGS))
def test_long_texts_counted_line_by_line_match_a_whole_count_exactly(encoding):
    """Long texts are counted in line segments whose counts are remembered; the sum must be
    what tiktoken says of the whole text, for every corpus transcript and tricky text."""
    enc = tiktoken.get_encoding(encoding)
    texts = _long_texts()
    assert len(texts) >= 10
    for text in texts:
        counter = TiktokenCounter(encoding)
        expected = len(enc.encode_ordinary(text))
        assert counter.count_text(text) == expected
        # the same text inside a prompt: counted again, mostly from remembered lines
        wrapped = "Summarize this.\n<conversation>\n" + text + "\n</conversation>\nNow write it."
        assert counter.count_text(wrapped) == len(enc.encode_ordinary(wrapped))


def test_a_message_costs_its_text_plus_documented_overhead():
    counter = MessageCounter(make_counter(encoding="o200k_base"))
    enc = tiktoken.get_encoding("o200k_base")
    args = '{"path": "src/app.py"}'
    msg = wrap_originals([{"role": "assistant", "content": "Reading it.",
                           "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": args}}]}])[0]
    t = counter.count(msg)
    expected_calls = TOOL_CALL_OVERHEAD + len(enc.encode_ordinary("read_file")) + len(enc.encode_ordinary(args))
    assert t.by_category["tool_calls"] == expected_calls
    assert t.by_category["assistant"] == MESSAGE_OVERHEAD + len(enc.encode_ordinary("Reading it."))
    assert t.total == sum(t.by_category.values())


def test_images_are_charged_by_tiles_not_by_base64_length():
    data = session("claudecode_sessionshare__images-in-tool-results")
    counter = MessageCounter(make_counter(encoding="o200k_base"))
    tool_msg = wrap_originals(data["messages"])[2]
    t = counter.count(tool_msg)
    # a 1369x880 screenshot is 4 tiles: 85 + 4*170; the 600k base64 chars cost nothing as text
    assert 765 + 340 <= t.total < 2000
    remote = wrap_originals([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}])[0]
    assert counter.count(remote).total == MESSAGE_OVERHEAD + UNKNOWN_IMAGE_TOKENS
    low = wrap_originals([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}}]}])[0]
    assert counter.count(low).total == MESSAGE_OVERHEAD + 85


class CountingCounter(CharCounter):
    def __init__(self):
        super().__init__(4.0)
        self.chars_seen = 0

    def count_text(self, text):
        self.chars_seen += len(text)
        return super().count_text(text)


def test_appending_one_message_tokenizes_only_that_message():
    base = CountingCounter()
    live = LiveContext(MessageCounter(base))
    for i in range(2000):
        live.append({"role": "user", "content": f"message number {i} " + "x" * 50})
    before = base.chars_seen
    live.append({"role": "user", "content": "the newest message"})
    assert base.chars_seen - before == len("the newest message")
    assert live.total_tokens == sum(t.total for t in live.tokens)


def test_running_totals_split_by_category_and_include_tool_schemas():
    data = session("minipr__deepseek_bench1__django__django-11099")
    tools = [{"type": "function", "function": {"name": "bash", "description": "run a shell command",
                                               "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]
    live = LiveContext(MessageCounter(make_counter(encoding="o200k_base")), tools=tools)
    live.extend(data["messages"])
    v = live.totals.values
    assert v["tools"] > 10 and v["system"] > 0 and v["user"] > 0
    assert v["tool_results"] > v["assistant"] > 0 and v["tool_calls"] > 0
    assert live.total_tokens == sum(v.values())


def test_identical_messages_are_tokenized_once():
    base = CountingCounter()
    counter = MessageCounter(base)
    msgs = wrap_originals([{"role": "user", "content": "same text"}] * 3)
    counter.count_many(msgs)
    assert base.chars_seen == len("same text")


def test_provider_usage_is_recorded_beside_the_estimate():
    live = LiveContext(MessageCounter(make_counter(encoding="o200k_base")))
    live.append({"role": "user", "content": "hello there"})
    ratio = live.record_usage(reported_prompt_tokens=live.total_tokens * 2)
    assert ratio == 0.5 and live.calibration_ratio == 0.5


@pytest.mark.timeout(300)  # a hang guard, not a speed assertion
def test_hostile_tool_output_is_counted_and_never_crashes():
    counter = make_counter(encoding="o200k_base")
    # a million characters without whitespace makes plain tiktoken panic; a long run of one
    # character is quadratic for BPE; a lone surrogate cannot be encoded at all
    assert counter.count_text("a" * 1_000_000) > 100_000
    assert counter.count_text("=" * 64_000) > 0
    assert counter.count_text("bad \ud800 text") > 0
    msgs = wrap_originals([{"role": "tool", "tool_call_id": "x", "content": "\ud800" + "b" * 300_000}])
    assert MessageCounter(counter).count_many(msgs)[0].total > 0
    assert len(msgs[0].hash) == 64


def test_slicing_hostile_text_stays_within_a_few_tokens_of_the_whole_count():
    counter = make_counter(encoding="o200k_base")
    text = ("log line with some words and numbers 12345\n" * 8000)  # 350k chars: sliced
    whole = len(tiktoken.get_encoding("o200k_base").encode_ordinary(text))
    assert abs(counter.count_text(text) - whole) <= 10
