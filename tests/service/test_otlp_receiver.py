"""``POST /v1/traces``: the OpenTelemetry SDK's OTLP/HTTP exporter (protobuf, gzip, the project
key as its bearer header) sends GenAI spans and they become sessions; retries add nothing;
JSON bodies, both message shapes of the GenAI conventions, refusals and partial success."""
from __future__ import annotations

import gzip
import json
import threading
import urllib.request

import openai
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from dashboard.models import Session, StoredMessage, TraceSpan
from tests.support.llm_server import ScriptedLLMServer, ok, tool_call

SYSTEM = "You are a travel assistant. Use the tools when you need facts."
U1 = "What's the weather in Lisbon tomorrow?"
ARGS = {"city": "Lisbon", "day": "tomorrow"}
RESULT = '{"forecast": "sunny", "high_c": 24}'
A1 = "Tomorrow in Lisbon: sunny, up to 24 °C."
U2 = "Should I pack an umbrella?"
A2 = "No umbrella needed: the forecast is dry."

# v1.37 GenAI messages: role + parts
P = {
    "u1": {"role": "user", "parts": [{"type": "text", "content": U1}]},
    "a_tc": {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_w1", "name": "get_weather",
                                             "arguments": ARGS}], "finish_reason": "tool_calls"},
    "tool": {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_w1", "response": RESULT}]},
    "a1": {"role": "assistant", "parts": [{"type": "text", "content": A1}], "finish_reason": "stop"},
    "u2": {"role": "user", "parts": [{"type": "text", "content": U2}]},
    "a2": {"role": "assistant", "parts": [{"type": "text", "content": A2}], "finish_reason": "stop"},
}
CALLS = [(["u1"], "a_tc", 52, 18), (["u1", "a_tc", "tool"], "a1", 80, 14),
         (["u1", "a_tc", "tool", "a1", "u2"], "a2", 101, 11)]
EXPECTED = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": U1},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(ARGS)}}]},
    {"role": "tool", "tool_call_id": "call_w1", "content": RESULT},
    {"role": "assistant", "content": A1},
    {"role": "user", "content": U2},
    {"role": "assistant", "content": A2},
]


def chat_span(tracer, n: int, conversation: str | None = "lisbon-trip") -> None:
    """One chat call recorded as an instrumentation following GenAI semconv 1.37 records it."""
    ins, out, used_in, used_out = CALLS[n]
    attributes = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.usage.input_tokens": used_in, "gen_ai.usage.output_tokens": used_out,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
        "gen_ai.input.messages": json.dumps([P[k] for k in ins]),
        "gen_ai.output.messages": json.dumps([P[out]]),
    }
    if conversation:
        attributes["gen_ai.conversation.id"] = conversation
    with tracer.start_as_current_span("invoke_agent travel", kind=SpanKind.INTERNAL,
                                      attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT, attributes=attributes):
            pass


class otel_provider:  # noqa: N801  # the current test's provider (the instrumentation needs it)
    provider: TracerProvider


@pytest.fixture
def otel(live_server, transactional_db, project):
    """A tracer whose spans go to the live server through the real OTLP/HTTP exporter, and
    an in-memory copy of them (to send a batch again, as an exporter's retry does)."""
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", compression=Compression.Gzip,
                                headers={"Authorization": f"Bearer {project.test_key}"}, timeout=30)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    otel_provider.provider = provider
    yield provider.get_tracer("tests.otlp"), exporter, memory
    provider.shutdown()


@pytest.mark.postgres
def test_the_sdk_exporter_sends_a_conversation_that_becomes_one_session(otel, project):
    tracer, exporter, memory = otel
    for n in range(3):  # three calls, each exported as its own request
        chat_span(tracer, n)
    session = Session.objects.get(project=project)
    assert (session.external_id, session.source_format, session.model) == ("lisbon-trip", "otlp",
                                                                          "gpt-4o-mini-2024-07-18")
    stored = [m.raw for m in StoredMessage.objects.filter(session=session).order_by("position")]
    assert stored == EXPECTED
    spans = TraceSpan.objects.filter(project=project).order_by("input_tokens")
    assert [(s.input_tokens, s.output_tokens) for s in spans] == [(52, 18), (80, 14), (101, 11)]

    # The exporter's retry of everything already sent changes nothing.
    assert exporter.export(memory.get_finished_spans()) == SpanExportResult.SUCCESS
    assert Session.objects.count() == 1 and TraceSpan.objects.count() == 3
    assert StoredMessage.objects.filter(session=session).count() == 7


def test_a_wrong_key_is_refused_by_the_exporter(live_server, transactional_db, project):
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    chat_span(provider.get_tracer("t"), 0)
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": "Bearer nope"})
    assert exporter.export(memory.get_finished_spans()) == SpanExportResult.FAILURE
    assert not Session.objects.exists()


# -- JSON bodies through the test client ------------------------------------------------------

def kv(key, value):
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def otlp_json(spans: list[dict]) -> dict:
    return {"resourceSpans": [{"resource": {"attributes": [kv("service.name", "agent")]},
                               "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}]}]}


def json_span(span_id: str, attributes: dict, *, start: int, trace: str = "5b8efff798038103d269b633813fc60c",
              events: list | None = None) -> dict:
    return {"traceId": trace, "spanId": span_id, "name": "chat", "kind": 3,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 1_000_000),
            "attributes": [kv(k, v) for k, v in attributes.items()], "events": events or []}


def post(client, project, body, *, encoding=None, content_type="application/json"):
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    headers = {"HTTP_AUTHORIZATION": f"Bearer {project.test_key}"}
    if encoding == "gzip":
        data = gzip.compress(data)
        headers["HTTP_CONTENT_ENCODING"] = "gzip"
    return client.post("/v1/traces", data=data, content_type=content_type, **headers)


def test_older_spans_with_indexed_attributes_and_events_fold_the_same_way(client, project):
    """OpenLLMetry-style indexed attributes for the first call, per-message events for the
    second: both older shapes, one conversation (grouped by trace: no conversation id)."""
    first = json_span("00f067aa0ba902b1", {
        "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": SYSTEM,
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": U1,
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.tool_calls.0.id": "call_w1",
        "gen_ai.completion.0.tool_calls.0.name": "get_weather",
        "gen_ai.completion.0.tool_calls.0.arguments": json.dumps(ARGS),
        "gen_ai.usage.prompt_tokens": 52, "gen_ai.usage.completion_tokens": 18}, start=1_741_082_400_000_000_000)
    tool_calls = json.dumps([{"id": "call_w1", "type": "function",
                              "function": {"name": "get_weather", "arguments": json.dumps(ARGS)}}])
    events = [{"name": "gen_ai.system.message", "attributes": [kv("content", SYSTEM)]},
              {"name": "gen_ai.user.message", "attributes": [kv("content", U1)]},
              {"name": "gen_ai.assistant.message", "attributes": [kv("tool_calls", tool_calls)]},
              {"name": "gen_ai.tool.message", "attributes": [kv("content", RESULT), kv("id", "call_w1")]},
              {"name": "gen_ai.choice", "attributes": [kv("message", json.dumps({"role": "assistant",
                                                                                  "content": A1}))]}]
    second = json_span("00f067aa0ba902b2", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
                       start=1_741_082_401_000_000_000, events=events)
    r = post(client, project, otlp_json([second, first]), encoding="gzip")  # out of order, gzip
    assert r.status_code == 200, r.content
    assert r.json() == {}
    session = Session.objects.get(project=project)
    assert session.external_id == "5b8efff798038103d269b633813fc60c"
    assert [m.raw for m in StoredMessage.objects.filter(session=session).order_by("position")] == EXPECTED[:5]


@pytest.mark.postgres
def test_a_batch_with_a_bad_span_stores_the_rest_and_answers_partial_success(client, project):
    good = json_span("1111111111111111", {
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c-good",
        "gen_ai.input.messages": json.dumps([P["u1"]]), "gen_ai.output.messages": json.dumps([P["a1"]])},
        start=1_741_082_400_000_000_000)
    cut = json.dumps([P["u1"], P["a_tc"], P["tool"]])[:70]  # an attribute length limit cut it
    bad = json_span("2222222222222222", {
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c-bad", "gen_ai.input.messages": cut},
        start=1_741_082_400_000_000_000)
    r = post(client, project, otlp_json([good, bad]))
    assert r.status_code == 200
    partial = r.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "2222222222222222" in partial["errorMessage"] and "gen_ai.input.messages" in partial["errorMessage"]
    assert list(Session.objects.values_list("external_id", flat=True)) == ["c-good"]
    assert TraceSpan.objects.get().span_id == "1111111111111111"


@pytest.mark.postgres
def test_a_tool_result_without_its_call_refuses_that_conversation_whole(client, project):
    spans = [json_span("3333333333333333", {
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c-orphan",
        "gen_ai.input.messages": json.dumps([P["u1"], P["tool"]]), "gen_ai.output.messages": json.dumps([P["a1"]])},
        start=1_741_082_400_000_000_000)]
    partial = post(client, project, otlp_json(spans)).json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "c-orphan" in partial["errorMessage"]
    assert not Session.objects.exists() and not TraceSpan.objects.exists()


def test_a_chat_span_without_messages_is_refused_naming_it(client, project):
    spans = [json_span("4444444444444444", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
                       start=1_741_082_400_000_000_000)]
    partial = post(client, project, otlp_json(spans)).json()["partialSuccess"]
    assert "4444444444444444" in partial["errorMessage"] and "without input messages" in partial["errorMessage"]


def test_spans_of_other_operations_are_accepted_and_ignored(client, project):
    spans = [json_span("5555555555555555", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x"},
                       start=1_741_082_400_000_000_000),
             json_span("6666666666666666", {"http.method": "GET"}, start=1_741_082_400_000_000_000)]
    r = post(client, project, otlp_json(spans))
    assert r.status_code == 200 and r.json() == {}
    assert not Session.objects.exists()


@pytest.mark.parametrize("body, content_type, encoding, why", [
    (b"{not json", "application/json", None, "not JSON"),
    (b"\x0a\xff\xff", "application/x-protobuf", None, "not an ExportTraceServiceRequest"),
    (b"plain", "application/json", "gzip-broken", "not valid gzip"),
])
def test_an_unreadable_body_is_a_400_saying_why(client, project, body, content_type, encoding, why):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {project.test_key}"}
    if encoding:
        headers["HTTP_CONTENT_ENCODING"] = "gzip"
    r = client.post("/v1/traces", data=body, content_type=content_type, **headers)
    assert r.status_code == 400
    assert why.encode() in r.content
    assert not Session.objects.exists()


def test_without_a_key_the_answer_is_401(client, project):
    r = client.post("/v1/traces", data=b"{}", content_type="application/json")
    assert r.status_code == 401 and r["WWW-Authenticate"].startswith("Bearer")


def test_an_unserved_content_type_is_a_415(client, project):
    r = client.post("/v1/traces", data=b"x", content_type="text/plain",
                    HTTP_AUTHORIZATION=f"Bearer {project.test_key}")
    assert r.status_code == 415


# -- an OpenAI client instrumented by OpenTelemetry's OpenAI instrumentation ---------------------

def test_an_instrumented_openai_client_against_the_scripted_upstream_lands_as_a_session(
        otel, project, monkeypatch):
    """opentelemetry-instrumentation-openai-v2 records each chat call (content captured on the
    span, latest GenAI conventions); two calls of one agent turn, one trace: one session."""
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    tracer, _exporter, memory = otel
    provider = otel_provider.provider
    with ScriptedLLMServer() as upstream:
        upstream.script(ok("", tool_calls=[tool_call("get_weather", ARGS, "call_w1")],
                           usage={"prompt_tokens": 52, "completion_tokens": 18, "total_tokens": 70}),
                        ok(A1, usage={"prompt_tokens": 80, "completion_tokens": 14, "total_tokens": 94}))
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            client = openai.OpenAI(base_url=upstream.api_base, api_key="test-key")
            messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": U1}]
            with tracer.start_as_current_span("invoke_agent travel"):
                first = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
                call = first.choices[0].message.tool_calls[0]
                messages += [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
                    {"role": "tool", "tool_call_id": call.id, "content": RESULT}]
                client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        finally:
            instrumentor.uninstrument()
    chat_spans = [s for s in memory.get_finished_spans() if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chat_spans) == 2 and "gen_ai.input.messages" in chat_spans[1].attributes
    session = Session.objects.get(project=project)
    stored = [m.raw for m in StoredMessage.objects.filter(session=session).order_by("position")]
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert stored[0]["content"] == SYSTEM and stored[4]["content"] == A1
    assert stored[2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert json.loads(stored[2]["tool_calls"][0]["function"]["arguments"]) == ARGS
    assert session.external_id == format(chat_spans[0].context.trace_id, "032x")
    assert sorted(TraceSpan.objects.values_list("input_tokens", "output_tokens")) == [(52, 18), (80, 14)]


@pytest.mark.postgres
def test_two_exporters_sending_one_new_conversation_at_once_make_one_session(live_server, transactional_db,
                                                                             project):
    """Both requests find no session; the one that loses the race on the external id reads
    again and finds its spans stored: no refusal, nothing twice."""
    spans = [json_span(f"77777777777777{n:02d}", {
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "race",
        "gen_ai.input.messages": json.dumps([P[k] for k in CALLS[n][0]]),
        "gen_ai.output.messages": json.dumps([P[CALLS[n][1]]])}, start=1_741_082_400_000_000_000 + n)
        for n in range(3)]
    body = json.dumps(otlp_json(spans)).encode()
    barrier = threading.Barrier(2)
    answers: list[tuple[int, bytes]] = []

    def send() -> None:
        barrier.wait()
        request = urllib.request.Request(f"{live_server.url}/v1/traces", data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {project.test_key}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answers.append((response.status, response.read()))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [(200, b"{}"), (200, b"{}")]
    session = Session.objects.get(project=project)
    assert StoredMessage.objects.filter(session=session).count() == 6
    assert TraceSpan.objects.count() == 3
