"""The summarizer input is bounded by a share of the summarizer's own window."""
from __future__ import annotations

import re

from summarizer_spans import make_span

from compaction.policy import SummarizerPolicy
from compaction.summarizer import input_budget, summarize
from compaction.tokens import MESSAGE_OVERHEAD
from tests.support.llm_server import ok

MARKER = re.compile(r"\[\.\.\. [\d,]+ characters clipped \.\.\.\]")


def call(cid, name, args="{}"):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def log_lines(prefix: str, n: int) -> str:
    return "\n".join(f"{prefix} line {i}: processed record {i * 7919 % 100003} ok" for i in range(n))


def heavy_span():
    huge = "BEGIN OF BUILD LOG\n" + log_lines("build", 6000) + "\nBUILD FAILED: linker error in src/native/io.c"
    medium = log_lines("test", 120)
    return make_span([
        {"role": "user", "content": "Make the build pass; keep the public API unchanged."},
        {"role": "assistant", "content": "Building first.", "tool_calls": [call("c1", "make", '{"target": "all"}')]},
        {"role": "tool", "tool_call_id": "c1", "content": huge},
        {"role": "assistant", "content": "Running the tests.", "tool_calls": [call("c2", "pytest")]},
        {"role": "tool", "tool_call_id": "c2", "content": medium},
        {"role": "assistant", "content": "Listing sources.", "tool_calls": [call("c3", "ls", '{"path": "src"}')]},
        {"role": "tool", "tool_call_id": "c3", "content": "native/\napi.py\ncli.py"},
        {"role": "assistant", "content": "The linker error comes from src/native/io.c."},
    ]), huge, medium


def sent_tokens(messages, counter) -> int:
    return sum(counter.count_text(m["content"]) + MESSAGE_OVERHEAD for m in messages)


def test_the_largest_tool_output_is_clipped_with_a_marker_and_the_request_fits_the_budget(
        llm_server, http_policy, counter):
    span, huge, medium = heavy_span()
    replaced = sum(t.total for t in counter.count_many(span))
    llm_server.script(ok("The build fails at link time in src/native/io.c."))
    settings = http_policy(input_max_tokens=4000)

    result = summarize(span, settings, counter=counter, replaced_tokens=replaced)

    sent = llm_server.requests[0].json["messages"]
    assert sent_tokens(sent, counter) == result.input_tokens <= 4000
    text = sent[0]["content"]
    block = text[text.index("[make returned: "):text.index("[assistant]: Running the tests.")]
    assert MARKER.search(block)
    assert block.startswith("[make returned: BEGIN OF BUILD LOG")          # head kept
    assert "BUILD FAILED: linker error in src/native/io.c]" in block       # tail kept
    assert medium in text and "native/\napi.py\ncli.py" in text            # smaller outputs intact
    assert [c["message_id"] for c in result.clipped] == [span[2].id]
    clip = result.clipped[0]
    assert clip["tool_name"] == "make" and clip["tokens_after"] < clip["tokens_before"]
    assert clip["chars_clipped"] > len(huge) // 2


def test_the_input_share_of_the_summarizer_window_sets_the_budget(counter):
    span, _, _ = heavy_span()
    replaced = sum(t.total for t in counter.count_many(span))
    settings = SummarizerPolicy(context_window=10_000, input_share=0.3)

    result = summarize(span, settings, counter=counter, replaced_tokens=replaced)

    assert input_budget(settings, 128_000) == 3000
    assert result.input_tokens <= 3000 and result.clipped


def test_the_window_comes_from_the_setting_then_litellms_table_then_the_fallback():
    assert input_budget(SummarizerPolicy(context_window=50_000, input_share=0.5), 8000) == 25_000
    assert input_budget(SummarizerPolicy(model="gpt-4o", input_share=0.5), 8000) == 64_000
    assert input_budget(SummarizerPolicy(model="openai/some-local-model", input_share=0.5), 8000) == 4000
    assert input_budget(SummarizerPolicy(model="gpt-4o", input_max_tokens=1000), 8000) == 1000


def test_large_messages_are_clipped_only_once_tool_outputs_are_down_to_a_stub(counter):
    paste = "PASTE START\n" + log_lines("user paste", 800) + "\nPASTE END"
    span = make_span([
        {"role": "user", "content": paste},
        {"role": "assistant", "content": "Looking.", "tool_calls": [call("c1", "cat")]},
        {"role": "tool", "tool_call_id": "c1", "content": log_lines("cat", 300)},
        {"role": "assistant", "content": "Found it."},
    ])
    replaced = sum(t.total for t in counter.count_many(span))
    settings = SummarizerPolicy(input_max_tokens=2500)

    result = summarize(span, settings, counter=counter, replaced_tokens=replaced)

    assert result.input_tokens <= 2500
    kinds = {c["kind"]: c for c in result.clipped}
    assert set(kinds) == {"tool_result", "user"}
    assert kinds["tool_result"]["tokens_after"] < 100          # the tool output went first, to a stub
    prompt = result.prompt_messages[0]["content"]
    assert "PASTE START" in prompt and "PASTE END" in prompt   # the paste keeps its head and tail


def test_keep_last_keeps_only_the_most_recent_messages_like_langchain(counter):
    raws = []
    for i in range(60):
        raws.append({"role": "user", "content": f"Question {i}: what about item-{i}? " + "detail " * 40})
        raws.append({"role": "assistant", "content": f"Answer {i}: item-{i} is fine."})
    span = make_span(raws)
    replaced = sum(t.total for t in counter.count_many(span))
    settings = SummarizerPolicy(input_max_tokens=3000, input_strategy="keep_last")

    result = summarize(span, settings, counter=counter, replaced_tokens=replaced)

    prompt = result.prompt_messages[0]["content"]
    assert result.input_tokens <= 3000
    assert "Answer 59: item-59 is fine." in prompt
    assert "Question 0:" not in prompt
    assert re.search(r"\[\.\.\. \d+ earlier messages omitted", prompt)
    omitted = result.clipped[0]
    assert omitted["kind"] == "omitted" and omitted["messages"] > 40
    assert omitted["message_ids"][0] == span[0].id


def test_a_previous_summary_too_big_for_the_budget_is_clipped_too(counter, span, span_tokens):
    previous = "Earlier facts. " + log_lines("fact", 2000)
    settings = SummarizerPolicy(input_max_tokens=3000)

    result = summarize(span, settings, counter=counter, replaced_tokens=span_tokens + counter.count_text(previous),
                       previous_summary=previous)

    assert result.input_tokens <= 3000
    assert result.clipped[0]["kind"] == "previous_summary"
    assert "Fix the failing test" in result.prompt_messages[0]["content"]


def test_input_within_budget_is_sent_untouched(counter, span, span_tokens):
    result = summarize(span, SummarizerPolicy(), counter=counter, replaced_tokens=span_tokens)

    assert result.clipped == []
    assert "KeyError: 'user_id'" in result.prompt_messages[0]["content"]
