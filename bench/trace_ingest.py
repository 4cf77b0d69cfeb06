"""Trace ingestion: a 10,000-span export imported, and OTLP receiver throughput.

    .venv/bin/python bench/trace_ingest.py [--conversations 200] [--calls 50] [--batch 100]
        [--otlp-conversations N]

The workload: ``conversations`` agent conversations of ``calls`` model calls each (10,000
spans by default). Call k of a conversation resends the k earlier turns (a user message, an
assistant tool call, its result, the answer: the history grows by four messages a call) and
gets one answer, as a tracer records an agent loop; every text differs.

- ``export``: the spans as one Phoenix REST page (``{"data": [...]}``, OpenInference
  attributes) converted by ``compaction.formats.convert_many``: wall and CPU seconds,
  spans/s, sessions and messages out.
- ``otlp``: the same calls as GenAI-semconv (v1.37) OTLP JSON spans, posted to
  ``POST /v1/traces`` in requests of ``batch`` spans through Django's test client (the whole
  request: auth, decoding, folding, the writes) on a throw-away SQLite database unless
  DATABASE_URL is set; the calls go in time order, so each request extends conversations
  stored by earlier ones. Then every request again (an exporter's retries): nothing new.

Output, one line each:

    export spans=<N> seconds=<float> cpu_seconds=<float> spans_per_s=<float> sessions=<N> messages=<N> load=<avg>
    otlp spans=<N> requests=<N> seconds=<float> cpu_seconds=<float> spans_per_s=<float> sessions=<N> messages=<N>
    otlp_retry spans=<N> seconds=<float> spans_per_s=<float> new_messages=<N>

Prints figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from compaction.formats import convert_many  # noqa: E402  (after the path is set)


def conversation(c: int, calls: int) -> list[tuple[list[dict], dict]]:
    """(input messages, answer) of each call of conversation c, in OpenAI form."""
    history: list[dict] = [{"role": "system", "content": f"You are agent {c}. Use tools."}]
    out = []
    for k in range(calls):
        history.append({"role": "user", "content": f"conversation {c} question {k}: what is in file_{k}.py?"})
        call = {"id": f"call_{c}_{k}", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": f"file_{k}.py"})}}
        if k % 2 == 0:
            answer = {"role": "assistant", "content": None, "tool_calls": [call]}
            out.append((list(history), answer))
            history += [answer, {"role": "tool", "tool_call_id": call["id"],
                                 "content": f"def f_{c}_{k}():\n    return {k}\n"}]
        else:
            answer = {"role": "assistant", "content": f"file_{k}.py defines one function ({c}/{k})."}
            out.append((list(history), answer))
            history.append(answer)
    return out


def _oi(prefix: str, messages: list[dict]) -> dict:
    attrs: dict = {}
    for n, m in enumerate(messages):
        base = f"{prefix}.{n}.message"
        attrs[f"{base}.role"] = m["role"]
        if m.get("content") is not None:
            attrs[f"{base}.content"] = m["content"]
        if m.get("tool_call_id"):
            attrs[f"{base}.tool_call_id"] = m["tool_call_id"]
        for j, tc in enumerate(m.get("tool_calls") or []):
            attrs[f"{base}.tool_calls.{j}.tool_call.id"] = tc["id"]
            attrs[f"{base}.tool_calls.{j}.tool_call.function.name"] = tc["function"]["name"]
            attrs[f"{base}.tool_calls.{j}.tool_call.function.arguments"] = tc["function"]["arguments"]
    return attrs


def phoenix_page(conversations: int, calls: int) -> bytes:
    spans = []
    for c in range(conversations):
        for k, (inputs, answer) in enumerate(conversation(c, calls)):
            start = 1_741_082_400 + c * 10_000 + k
            spans.append({"name": "ChatCompletion", "context": {"trace_id": f"{c:032x}", "span_id": f"{c:08x}{k:08x}"},
                          "span_kind": "LLM", "parent_id": None, "start_time": f"{start}",
                          "end_time": f"{start + 1}", "status_code": "OK", "status_message": "", "events": [],
                          "attributes": {"session.id": f"conv-{c}", "llm.model_name": "gpt-4o-mini",
                                         "llm.token_count.prompt": 100 + k, "llm.token_count.completion": 20,
                                         **_oi("llm.input_messages", inputs), **_oi("llm.output_messages", [answer])}})
    return json.dumps({"data": spans, "next_cursor": None}).encode()


def _parts(m: dict) -> dict:
    if m["role"] == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": m["tool_call_id"],
                                           "response": m["content"]}]}
    parts = [{"type": "text", "content": m["content"]}] if m.get("content") else []
    parts += [{"type": "tool_call", "id": tc["id"], "name": tc["function"]["name"],
               "arguments": json.loads(tc["function"]["arguments"])} for tc in m.get("tool_calls") or []]
    return {"role": m["role"], "parts": parts}


def otlp_requests(conversations: int, calls: int, batch: int) -> list[bytes]:
    spans = []
    for k in range(calls):  # time order: each call after the earlier calls of every conversation
        for c in range(conversations):
            inputs, answer = _cached(c, calls)[k]
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": f"conv-{c}",
                     "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 100 + k,
                     "gen_ai.usage.output_tokens": 20,
                     "gen_ai.system_instructions": json.dumps([{"type": "text", "content": inputs[0]["content"]}]),
                     "gen_ai.input.messages": json.dumps([_parts(m) for m in inputs[1:]]),
                     "gen_ai.output.messages": json.dumps([_parts(answer)])}
            start = (1_741_082_400 + k * 10) * 10**9 + c
            spans.append({"traceId": f"{c:016x}{k:016x}", "spanId": f"{c:08x}{k:08x}", "name": "chat",
                          "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 10**6),
                          "attributes": [{"key": key, "value": {"intValue": str(v)} if isinstance(v, int)
                                          else {"stringValue": v}} for key, v in attrs.items()]})
    return [json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans[i:i + batch]}]}]}).encode()
            for i in range(0, len(spans), batch)]


_CACHE: dict[int, list[tuple[list[dict], dict]]] = {}


def _cached(c: int, calls: int) -> list[tuple[list[dict], dict]]:
    if c not in _CACHE:
        _CACHE[c] = conversation(c, calls)
    return _CACHE[c]


def timed(fn):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--otlp-conversations", type=int, default=None,
                        help="conversations sent to the receiver (default: all)")
    args = parser.parse_args()
    n = args.conversations * args.calls
    load = os.getloadavg()[0]

    page = phoenix_page(args.conversations, args.calls)
    sessions, wall, cpu = timed(lambda: convert_many(page, source="bench.json"))
    print(f"export spans={n} seconds={wall:.2f} cpu_seconds={cpu:.2f} spans_per_s={n / wall:.0f} "
          f"sessions={len(sessions)} messages={sum(len(s.messages) for s in sessions)} load={load:.1f}")

    import _service as svc  # noqa: PLC0415  (Django is set up only for the service part)

    svc.setup_django()
    from django.test import Client  # noqa: PLC0415  (needs Django set up)

    from dashboard.models import Session  # noqa: PLC0415
    from dashboard.services.keys import create_api_key, get_or_create_project  # noqa: PLC0415

    project, _ = get_or_create_project("bench-otlp")
    _row, key = create_api_key(project, "bench")
    client = Client()
    sent = args.otlp_conversations or args.conversations
    bodies = otlp_requests(sent, args.calls, args.batch)
    n = sent * args.calls

    def send_all() -> int:
        rejected = 0
        for body in bodies:
            r = client.post("/v1/traces", data=body, content_type="application/json",
                            HTTP_AUTHORIZATION=f"Bearer {key}")
            rejected += int(r.json().get("partialSuccess", {}).get("rejectedSpans", 0)) if r.status_code == 200 else n
        return rejected

    rejected, wall, cpu = timed(send_all)
    stored = Session.objects.filter(project=project)
    messages = sum(s.message_count for s in stored)
    print(f"otlp spans={n} requests={len(bodies)} seconds={wall:.2f} cpu_seconds={cpu:.2f} "
          f"spans_per_s={n / wall:.0f} sessions={stored.count()} messages={messages} rejected={rejected}")
    _, wall, _cpu = timed(send_all)
    again = sum(s.message_count for s in Session.objects.filter(project=project))
    print(f"otlp_retry spans={n} seconds={wall:.2f} spans_per_s={n / wall:.0f} new_messages={again - messages}")


if __name__ == "__main__":
    main()
