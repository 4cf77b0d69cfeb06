"""The transcript the summarizer reads."""
from __future__ import annotations

from summarizer_spans import make_span

from compaction.messages import Provenance
from compaction.summarizer import render_conversation

TINY_PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
            "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def session():
    return make_span([
        {"role": "user", "content": [{"type": "text", "text": "What is in this screenshot?"},
                                     {"type": "image_url", "image_url": {"url": TINY_PNG}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "app.py"}'}},
            {"id": "b", "type": "function", "function": {"name": "grep", "arguments": '{"pattern": "TODO"}'}}]},
        {"role": "tool", "tool_call_id": "b", "content": "app.py:3: # TODO"},
        {"role": "tool", "tool_call_id": "a", "content": "print('hi')"},
        {"role": "assistant", "content": "Done."},
    ])


def test_each_message_becomes_a_labelled_block_with_tool_calls_and_named_results():
    text = render_conversation(session())

    assert text == (
        "[user]: What is in this screenshot?\n[image]\n\n"
        "[assistant]: [Called tool: read_file with args: {\"path\": \"app.py\"}]\n"
        "[Called tool: grep with args: {\"pattern\": \"TODO\"}]\n\n"
        "[grep returned: app.py:3: # TODO]\n\n"
        "[read_file returned: print('hi')]\n\n"
        "[assistant]: Done."
    )


def test_earlier_summaries_and_acknowledgements_are_not_rendered():
    span = make_span([
        {"role": "user", "content": "Summary of the conversation so far: ..."},
        {"role": "assistant", "content": "Understood, continuing."},
        {"role": "user", "content": "Now add logging."},
    ], provenances={0: Provenance.SUMMARY, 1: Provenance.ACKNOWLEDGEMENT})

    assert render_conversation(span) == "[user]: Now add logging."


def test_custom_formatters_replace_or_leave_out_tool_calls_and_results():
    def call_fmt(name, args):
        return "" if name == "grep" else f"<call {name}>"

    def result_fmt(name, content):
        return None if name == "grep" else f"<{name} said {len(content)} chars>"

    text = render_conversation(session(), tool_call_formatter=call_fmt, tool_result_formatter=result_fmt)

    assert "<call read_file>" in text and "Called tool: grep" not in text
    assert "<read_file said 11 chars>" in text
    assert "[grep returned: app.py:3: # TODO]" in text  # None keeps the default


def test_a_result_formatter_returning_empty_text_drops_the_result():
    text = render_conversation(session(), tool_result_formatter=lambda name, content: "")

    assert "returned" not in text and "said" not in text


def test_an_assistant_turn_with_text_and_calls_keeps_both_in_order():
    span = make_span([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x", "content": [{"type": "text", "text": "a.txt"}]},
    ])

    assert render_conversation(span) == (
        "[user]: go\n\n[assistant]: Checking.\n[Called tool: ls with args: {}]\n\n[ls returned: a.txt]")
