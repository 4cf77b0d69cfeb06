"""Trace exports (Langfuse, Phoenix, LangSmith) become sessions: one conversation per session
id else per trace, each call's resent history stored once, and bad records refused whole.

The fixtures in ``fixtures/traces/`` follow the exporters' documented shapes (their README
says where each shape comes from); all record the same three-call conversation."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.errors import SessionValidationError
from compaction.formats import FORMATS, convert, convert_many, detect_format

FIX = Path(__file__).parent / "fixtures" / "traces"

SYSTEM = "You are a travel assistant. Use the tools when you need facts."
CALL = {"id": "call_w1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Lisbon", "day": "tomorrow"}'}}
WHOLE = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What's the weather in Lisbon tomorrow?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_w1", "content": '{"forecast": "sunny", "high_c": 24}'},
    {"role": "assistant", "content": "Tomorrow in Lisbon: sunny, up to 24 °C."},
    {"role": "user", "content": "Should I pack an umbrella?"},
    {"role": "assistant", "content": "No umbrella needed: the forecast is dry."},
]
USAGE = {"input_tokens": 52 + 80 + 101, "output_tokens": 18 + 14 + 11}


def read(name: str) -> bytes:
    return (FIX / name).read_bytes()


def lines(name: str) -> list[dict]:
    return [json.loads(x) for x in read(name).decode().splitlines() if x.strip()]


def as_jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def test_the_trace_formats_are_import_formats():
    assert {"langfuse", "phoenix", "langsmith"} <= set(FORMATS)


@pytest.mark.parametrize("name, fmt, external_id, model", [
    ("langfuse_observations_v2.jsonl", "langfuse", "lisbon-trip", "gpt-4o-mini"),
    ("phoenix_spans.json", "phoenix", "lisbon-trip", "gpt-4o-mini-2024-07-18"),
    ("phoenix_spans_dataframe.jsonl", "phoenix", "lisbon-trip", "gpt-4o-mini-2024-07-18"),
    ("langsmith_runs.jsonl", "langsmith", "lisbon-trip", "gpt-4o-mini"),
    ("langsmith_wrap_openai.json", "langsmith", "lisbon-trip", "gpt-4o-mini"),
])
def test_a_whole_conversation_folds_into_one_session(name, fmt, external_id, model):
    """Three calls over two traces of one session: the history each call resends is stored
    once, in order, the tool call joined to its result, system first."""
    raw = read(name)
    assert detect_format(raw) == fmt
    [session] = convert_many(raw, source=name)
    assert session.format == fmt
    assert list(session.messages) == WHOLE
    assert (session.external_id, session.model) == (external_id, model)
    assert session.title == "What's the weather in Lisbon tomorrow?"
    assert session.metadata["trace"]["usage"] == USAGE
    assert session.metadata["trace"]["calls"] == 3
    assert len(session.metadata["trace"]["trace_ids"]) >= 2


def test_tools_recorded_with_the_calls_become_the_sessions_tools():
    for name in ("langfuse_trace.json", "phoenix_spans.json", "langsmith_runs.jsonl", "langsmith_wrap_openai.json"):
        [session] = convert_many(read(name), source=name)
        assert [t["function"]["name"] for t in session.tools] == ["get_weather"], name


def test_a_langfuse_trace_download_reads_its_observations_and_the_traces_session_id():
    [session] = convert_many(read("langfuse_trace.json"), source="trace.json")
    assert session.format == "langfuse" and session.external_id == "lisbon-trip"
    assert list(session.messages) == WHOLE[:5]
    assert session.metadata["trace"]["usage"] == {"input_tokens": 132, "output_tokens": 32}


def test_observations_without_a_session_id_are_grouped_by_trace():
    [session] = convert_many(read("langfuse_api_observations.json"), source="api.json")
    assert session.external_id == "7c1e2b1a-0f4e-4a3a-9a57-3d6f1b2c9e01"
    assert list(session.messages) == WHOLE[:5]


@pytest.mark.parametrize("name", ["langfuse_observations_v2.jsonl", "phoenix_spans_dataframe.jsonl",
                                  "langsmith_runs.jsonl"])
def test_the_order_of_the_file_does_not_matter(name):
    records = lines(name)
    expected = convert(read(name), source=name)
    for order in (records[::-1], records[1::2] + records[0::2]):
        again = convert(as_jsonl(order), source=name)
        assert list(again.messages) == list(expected.messages)
        assert again.metadata == expected.metadata


def test_the_phoenix_api_page_lists_spans_newest_first_and_still_reads_in_time_order():
    page = json.loads(read("phoenix_spans.json"))
    starts = [s["start_time"] for s in page["data"]]
    assert starts == sorted(starts, reverse=True)
    assert list(convert(read("phoenix_spans.json")).messages) == WHOLE


@pytest.mark.parametrize("name", ["langfuse_observations_v2.jsonl", "phoenix_spans_dataframe.jsonl",
                                  "langsmith_runs.jsonl"])
def test_a_record_delivered_twice_counts_once(name):
    records = lines(name)
    doubled = records + records[:2]
    session = convert(as_jsonl(doubled), source=name)
    assert list(session.messages) == list(convert(read(name)).messages)
    assert session.metadata["trace"]["usage"] == convert(read(name)).metadata["trace"]["usage"]


def test_one_id_with_two_different_contents_is_refused_naming_both_lines():
    records = lines("langfuse_observations_v2.jsonl")
    changed = dict(records[0], output=json.dumps({"role": "assistant", "content": "something else"}))
    with pytest.raises(SessionValidationError) as exc:
        convert(as_jsonl(records + [changed]), source="obs.jsonl")
    assert exc.value.fault == "duplicate_span"
    text = str(exc.value)
    assert "obs-gen-1" in text and "line 4" in text and "line 1" in text and "obs.jsonl" in text


def test_a_retried_call_with_another_id_adds_nothing():
    runs = lines("langsmith_runs.jsonl")
    retry = dict(runs[1], id="1ef9a6b2-3c4d-6e5f-8a9b-0c1d2e3f4a99")  # the first llm run again
    session = convert(as_jsonl(runs + [retry]))
    assert list(session.messages) == WHOLE
    assert session.metadata["trace"]["calls"] == 4


def test_a_call_with_its_own_prompt_becomes_a_second_session_of_the_group():
    """A summarizer call inside the agent's trace continues no conversation of the trace."""
    spans = lines("phoenix_spans_dataframe.jsonl")
    side = dict(spans[1])
    side.update({"context.span_id": "c0ffee0000000001", "attributes.llm.input_messages": [
        {"message.role": "user", "message.content": "Summarise: sunny, 24 C"}],
        "attributes.llm.output_messages": [{"message.role": "assistant", "message.content": "Sunny and warm."}],
        "start_time": spans[1]["start_time"] + 5})
    sessions = convert_many(as_jsonl(spans + [side]))
    assert [s.external_id for s in sessions] == ["lisbon-trip", "lisbon-trip#2"]
    assert list(sessions[0].messages) == WHOLE
    assert [m["content"] for m in sessions[1].messages] == ["Summarise: sunny, 24 C", "Sunny and warm."]


# -- bad input: refused whole, naming the record -------------------------------------------

def test_an_llm_span_without_messages_is_refused_naming_it():
    page = json.loads(read("phoenix_spans.json"))
    llm = next(s for s in page["data"] if s["context"]["span_id"] == "a1b2c3d4e5f60714")
    llm["attributes"] = {k: v for k, v in llm["attributes"].items()
                         if not k.startswith(("llm.input_messages", "input."))}
    with pytest.raises(SessionValidationError) as exc:
        convert_many(json.dumps(page), source="spans.json")
    assert exc.value.fault == "no_messages"
    assert "a1b2c3d4e5f60714" in str(exc.value) and "spans.json" in str(exc.value)


def test_an_export_without_model_calls_is_refused():
    runs = [r for r in lines("langsmith_runs.jsonl") if r["run_type"] != "llm"]
    with pytest.raises(SessionValidationError) as exc:
        convert_many(as_jsonl(runs), source="runs.jsonl")
    assert exc.value.fault == "no_messages" and "no llm runs" in str(exc.value)


def test_a_message_list_with_a_dropped_entry_is_refused_naming_the_index():
    page = json.loads(read("phoenix_spans.json"))
    llm = next(s for s in page["data"] if s["context"]["span_id"] == "b1b2c3d4e5f60722")
    for key in [k for k in llm["attributes"] if k.startswith("llm.input_messages.2.")]:
        del llm["attributes"][key]
    with pytest.raises(SessionValidationError) as exc:
        convert_many(json.dumps(page))
    assert exc.value.fault == "bad_span"
    assert "b1b2c3d4e5f60722" in str(exc.value) and "llm.input_messages has no entry 2" in str(exc.value)


def test_a_cut_off_json_attribute_is_refused_naming_it():
    spans = lines("phoenix_spans_dataframe.jsonl")
    llm = spans[3]
    del llm["attributes.llm.input_messages"]
    llm["attributes.input.value"] = llm["attributes.input.value"][:120]  # a size limit cut it
    with pytest.raises(SessionValidationError) as exc:
        convert_many(as_jsonl(spans), source="df.jsonl")
    assert exc.value.fault == "bad_span"
    assert "input.value" in str(exc.value) and "cut off" in str(exc.value) and "line 4" in str(exc.value)


def test_a_cut_off_langfuse_input_is_refused_and_nothing_is_returned():
    records = lines("langfuse_observations_v2.jsonl")
    records[2]["input"] = records[2]["input"][:-40]
    with pytest.raises(SessionValidationError) as exc:
        convert_many(as_jsonl(records), source="obs.jsonl")
    assert exc.value.fault == "bad_span" and "obs-gen-3" in str(exc.value) and "line 3" in str(exc.value)


def test_a_tool_result_whose_call_is_missing_is_refused_naming_the_conversation():
    records = lines("langfuse_observations_v2.jsonl")
    body = json.loads(records[1]["input"])
    del body["messages"][2]  # the assistant's tool call vanished from the resent history
    records[1]["input"] = json.dumps(body)
    with pytest.raises(SessionValidationError) as exc:
        convert_many(as_jsonl(records[1:2]), source="obs.jsonl")
    assert exc.value.fault == "orphan_tool_result" and "lisbon-trip" in str(exc.value)


def test_an_unreadable_start_time_is_refused_naming_the_run():
    runs = lines("langsmith_runs.jsonl")
    runs[1]["start_time"] = "yesterday"
    with pytest.raises(SessionValidationError) as exc:
        convert_many(as_jsonl(runs))
    assert exc.value.fault == "bad_span" and "yesterday" in str(exc.value) and runs[1]["id"] in str(exc.value)


def test_traces_alone_count_as_calls_when_their_input_is_a_chat_and_give_sessions_to_observations():
    """The traces table's export: a trace whose observations are not in the file is one call
    when its input is a message list; a trace whose observations are present only lends them
    its session id (here the blob export's rows, stripped of their own session id)."""
    download = json.loads(read("langfuse_trace.json"))
    chat_trace = dict(download["trace"], id="trace-chat", sessionId=None,
                      input=[{"role": "user", "content": "Hi"}], output={"role": "assistant", "content": "Hello!"})
    plain_trace = dict(download["trace"], id="trace-plain", input={"question": "no chat here"})
    records = lines("langfuse_observations_v2.jsonl")
    for r in records:
        del r["session_id"]
    traces = [dict(download["trace"], id=r["trace_id"]) for r in records]  # sessionId "lisbon-trip"
    sessions = convert_many(as_jsonl([chat_trace, plain_trace, *traces, *records]), source="mixed.jsonl")
    by_id = {s.external_id: s for s in sessions}
    assert set(by_id) == {"trace-chat", "lisbon-trip"}
    assert [m["content"] for m in by_id["trace-chat"].messages] == ["Hi", "Hello!"]
    assert list(by_id["lisbon-trip"].messages) == WHOLE


def test_a_langsmith_run_tree_with_messages_as_dicts_is_read():
    """A root run with ``child_runs`` (a run tree), messages in ``messages_to_dict`` form."""
    llm = {"id": "r-llm", "name": "ChatAnthropic", "run_type": "llm", "trace_id": "r-root",
           "start_time": "2025-03-04T10:00:00.5", "end_time": "2025-03-04T10:00:01",
           "inputs": {"messages": [[{"type": "system", "data": {"content": SYSTEM}},
                                    {"type": "human", "data": {"content": "Hi"}}]]},
           "outputs": {"generations": [[{"text": "Hello!", "type": "ChatGeneration",
                                         "message": {"type": "ai", "data": {"content": "Hello!"}}}]]},
           "extra": {"invocation_params": {"model": "claude-sonnet-4-5"}}}
    root = {"id": "r-root", "name": "agent", "run_type": "chain", "trace_id": "r-root", "inputs": {"q": "Hi"},
            "outputs": {"a": "Hello!"}, "start_time": "2025-03-04T10:00:00", "child_runs": [llm]}
    [session] = convert_many(json.dumps(root))
    assert session.format == "langsmith" and session.external_id == "r-root" and session.model == "claude-sonnet-4-5"
    assert list(session.messages) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi"},
                                      {"role": "assistant", "content": "Hello!"}]
