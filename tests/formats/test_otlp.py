"""OTLP spans: the protobuf reader agrees with OpenTelemetry's own encoder, and OTLP JSON files
(one export request a line, as the collector's file exporter writes them) import as sessions."""
from __future__ import annotations

import base64
import json

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from compaction.errors import SessionValidationError
from compaction.formats import convert_many, detect_format
from compaction.formats._otlp_proto import ProtobufError, decode_export_request
from compaction.formats.otlp import calls_of

SYSTEM = "Answer briefly."
TURNS = [
    ([{"role": "user", "parts": [{"type": "text", "content": "Capital of Peru?"}]}],
     {"role": "assistant", "parts": [{"type": "text", "content": "Lima."}]}),
    ([{"role": "user", "parts": [{"type": "text", "content": "Capital of Peru?"}]},
      {"role": "assistant", "parts": [{"type": "text", "content": "Lima."}]},
      {"role": "user", "parts": [{"type": "text", "content": "And of Chile?"}]}],
     {"role": "assistant", "parts": [{"type": "text", "content": "Santiago."}]}),
]


def recorded_spans():
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests")
    for n, (inputs, output) in enumerate(TURNS):
        with tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.conversation.id": "peru",
                "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
                "gen_ai.input.messages": json.dumps(inputs), "gen_ai.output.messages": json.dumps([output]),
                "gen_ai.usage.input_tokens": 10 + n, "gen_ai.usage.output_tokens": 2,
                "ratio": 0.5, "flags": [1, 2], "ok": True}) as span:
            span.add_event("gen_ai.note", {"n": n})
    return memory.get_finished_spans()


def hex_ids(value):
    """MessageToDict writes ids in base64; OTLP/JSON spells them in hex."""
    if isinstance(value, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else hex_ids(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [hex_ids(v) for v in value]
    return value


def test_the_protobuf_reader_reads_what_the_sdk_encodes_as_its_json_encoding_says():
    request = encode_spans(recorded_spans())
    decoded = decode_export_request(request.SerializeToString())
    as_json = hex_ids(MessageToDict(request))
    source = "proto"
    assert [(c.id, c.input, c.output, c.usage, c.start) for c in calls_of(decoded, source)] == \
           [(c.id, c.input, c.output, c.usage, c.start) for c in calls_of(as_json, source)]
    span = decoded["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    json_span = as_json["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for key in ("traceId", "spanId", "name", "startTimeUnixNano", "endTimeUnixNano"):
        assert span[key] == json_span[key], key
    values = {kv["key"]: kv["value"] for kv in span["attributes"]}
    assert values["ratio"] == {"doubleValue": 0.5} and values["ok"] == {"boolValue": True}
    assert values["flags"] == {"arrayValue": {"values": [{"intValue": "1"}, {"intValue": "2"}]}}
    assert span["events"][0]["name"] == "gen_ai.note"


@pytest.mark.parametrize("cut", [3, 17, 40])
def test_cut_off_protobuf_is_refused(cut):
    data = encode_spans(recorded_spans()).SerializeToString()
    with pytest.raises(ProtobufError):
        decode_export_request(data[:cut])


def test_an_otlp_json_lines_file_imports_one_session_per_conversation():
    requests = [decode_export_request(encode_spans([s]).SerializeToString()) for s in recorded_spans()]
    text = "".join(json.dumps(r) + "\n" for r in reversed(requests))
    assert detect_format(text) == "otlp"
    [session] = convert_many(text, source="traces.jsonl")
    assert session.format == "otlp" and session.external_id == "peru" and session.model == "m"
    assert [(m["role"], m["content"]) for m in session.messages] == [
        ("system", SYSTEM), ("user", "Capital of Peru?"), ("assistant", "Lima."), ("user", "And of Chile?"),
        ("assistant", "Santiago.")]
    assert session.metadata["trace"]["usage"] == {"input_tokens": 21, "output_tokens": 4}


def test_a_cut_off_messages_attribute_in_a_file_is_refused_naming_the_span():
    request = decode_export_request(encode_spans(recorded_spans()).SerializeToString())
    span = request["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    for kv in span["attributes"]:
        if kv["key"] == "gen_ai.input.messages":
            kv["value"]["stringValue"] = kv["value"]["stringValue"][:50]
    with pytest.raises(SessionValidationError) as exc:
        convert_many(json.dumps(request), source="t.json")
    assert exc.value.fault == "bad_span"
    assert span["spanId"] in str(exc.value) and "gen_ai.input.messages" in str(exc.value)
