"""A conversation an OpenTelemetry-instrumented agent exported (the real OTLP/HTTP exporter,
protobuf and gzip, to ``/v1/traces``) opens as a session like any other: system
instructions first, the tool call joined to its result, the provider's model, and every
message in the timeline. The screenshot is the one the trace-ingest docs point to."""
from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from dashboard.models import Session
from dashboard.services.keys import create_api_key
from tests.browser.conftest import settle, shot
from tests.service.test_otlp_receiver import A2, SYSTEM, U1, chat_span

pytestmark = [pytest.mark.browser]


def test_an_exported_trace_opens_as_a_session_with_its_tool_call_joined(page, signed_in, console, project,
                                                                         live_server):
    _row, key = create_api_key(project, "otel exporter")
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", compression=Compression.Gzip,
                                headers={"Authorization": f"Bearer {key}"}, timeout=60)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.browser.otlp")
    for n in range(3):
        chat_span(tracer, n)
    provider.shutdown()
    session = Session.objects.get(project=project)
    assert session.external_id == "lisbon-trip"

    page.goto(signed_in(f"/sessions/{session.pk}/"))
    settle(page)
    shot(page, "trace-session", full_page=True)
    body = page.locator("main").inner_text()
    for text in (SYSTEM, U1, A2, "gpt-4o-mini-2024-07-18", "imported as otlp"):
        assert text in body, text
    # In the transcript the tool result sits right after the call it answers.
    transcript = body[body.index(SYSTEM):]
    assert transcript.index("Tool call get_weather") < transcript.index("Result of get_weather") \
        < transcript.index("sunny, up to 24") < transcript.index(A2), transcript
    console.assert_clean()
