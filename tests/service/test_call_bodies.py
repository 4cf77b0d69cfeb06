"""What the call inspector keeps of each gateway call (``services/call_bodies``): the body
sent upstream, rebuilt from pieces kept once per session, is byte for byte what the
upstream received; storage does not grow with the history once per call; expired bodies go.
Driven by the real ``openai`` and ``anthropic`` SDKs against a live server, with the
scripted OpenAI-compatible server (real HTTP) as the upstream."""
from __future__ import annotations

import io
import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import anthropic
import openai
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Sum
from django.db.models.functions import Length

from dashboard.models import GatewayCall, GatewayCallBody, GatewayPiece
from dashboard.services import call_bodies
from dashboard.services.call_bodies import CallBody, SentBody, rebuilt, split_array
from dashboard.services.gateway_calls import record_call
from dashboard.services.sessions import convert_payload, import_session
from tests.service import test_gateway
from tests.service.test_gateway import agent_loop, sdk
from tests.support import gateway_writes
from tests.support.llm_server import error, ok

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream


def _bodies(session_id: int) -> list[GatewayCallBody]:
    return list(GatewayCallBody.objects.filter(session_id=session_id).select_related("call").order_by("call_id"))


@pytest.mark.postgres
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_every_call_rebuilds_to_the_bytes_the_upstream_received_through_compactions(gateway, project, llm_server,
                                                                                    stream):
    history, answers = agent_loop(sdk(gateway, project.test_key), llm_server, turns=30, stream=stream)
    sid = int(answers[0].headers["x-compaction-session"])
    assert {a.headers.get("x-compaction-run") for a in answers} - {None}, "the loop compacted"
    received = [r.body for r in llm_server.requests]
    bodies = _bodies(sid)
    assert len(bodies) == len(received) == 31
    for body, sent in zip(bodies, received):
        again = rebuilt(body)
        assert again.verified and again.data == sent
        assert body.sent_exact and body.sent_to.endswith("/chat/completions")
        assert again.client_fields["model"] == "gpt-4o" and again.client_fields["tools"][0]["function"]["name"]
        assert body.reply["message"]["role"] == "assistant"
    assert bodies[-1].reply["message"]["content"] == "All modules read."
    # the reply was stored after the answer: the next call adds only the tool result
    assert bodies[3].client == {"format": "chat", "messages": 8, "added": 1, "upto": 8}

    # Kept as pieces, the bodies take one copy of each message sent (and of the fields before
    # them), not one per call.
    kept = GatewayPiece.objects.filter(session_id=sid).aggregate(n=Sum(Length("text")))["n"]
    distinct = {m for b in received for m in split_array(json.dumps(json.loads(b)["messages"], ensure_ascii=False,
                                                                    separators=(",", ": ")))}
    sent_total = sum(len(b) for b in received)
    print(f"sent {sent_total} bytes in {len(received)} calls; kept {kept} characters of pieces")
    assert kept < sum(len(m) for m in distinct) + 2 * max(len(b) for b in received)
    # Well under one copy per call. The share is what the compactions leave to share: each
    # summary is a new piece, and here (a 4,500-token usable window, 800-token reads) the
    # default compacts every second or third call, its summary a quarter of the window, the
    # latest read kept whole (0.53 of the bytes sent; 0.43 when summaries were a tenth)
    assert kept < 0.6 * sent_total
    # and a call lists its pieces in a few runs of consecutive ids, whatever its length
    assert max(len(b.sent_runs) for b in bodies) <= 6


def test_a_failed_call_keeps_what_was_sent_and_the_error(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(error(429, "slow down"))
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], temperature=0.5)
    body = GatewayCallBody.objects.get()
    assert body.call.status_code == 429
    assert rebuilt(body).data == llm_server.requests[0].body
    assert body.reply["error"]["message"] == "slow down"  # the upstream's error object, as the client got it
    assert rebuilt(body).client_fields["temperature"] == 0.5


def test_the_anthropic_endpoint_keeps_the_anthropic_fields_and_the_body_sent(gateway, project, llm_server):
    client = anthropic.Anthropic(base_url=gateway.url, api_key=project.test_key, max_retries=0,
                                 http_client=gateway_writes.http2_client())
    llm_server.script(ok("Bonjour"))
    client.messages.create(model="gpt-4o", max_tokens=300, system="Answer in French.",
                           messages=[{"role": "user", "content": "Hello"}])
    body = GatewayCallBody.objects.get()
    again = rebuilt(body)
    assert again.verified and again.data == llm_server.requests[0].body
    assert body.client["format"] == "anthropic" and body.call.endpoint == "messages"
    assert again.client_fields["system"] == "Answer in French." and again.client_fields["max_tokens"] == 300
    # the reply as the Anthropic client got it
    assert body.reply["answer"]["content"][0] == {"type": "text", "text": "Bonjour"}


def test_a_compaction_call_keeps_its_fields_and_compaction_item(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    items = [{"type": "message", "role": "user", "content": f"step {i}: " + "word " * 300} for i in range(12)]
    oai.responses.compact(model="gpt-4o", input=items, instructions="Be brief.")
    body = GatewayCallBody.objects.get()
    assert body.call.endpoint == "responses/compact" and body.sent_head is None
    assert rebuilt(body).client_fields == {"model": "gpt-4o", "instructions": "Be brief."}
    assert body.client["messages"] == 13  # the instructions and the 12 items
    assert body.reply["object"] == "response.compaction" and body.reply["output_items"] >= 1
    assert all(item["type"] == "compaction" for item in body.reply["output"])


@pytest.mark.postgres
def test_expired_bodies_and_the_pieces_only_they_used_are_deleted(gateway, project, llm_server, settings):
    oai = sdk(gateway, project.test_key)
    history = [{"role": "user", "content": "first question"}]
    for i in range(3):
        llm_server.script(ok(f"answer {i}"))
        # the last call's other temperature makes its fields a piece of its own
        reply = oai.chat.completions.create(model="gpt-4o", messages=history, extra_headers={"X-Session-Id": "old"},
                                            temperature=0.2 if i < 2 else 0.9)
        history += [{"role": "assistant", "content": reply.choices[0].message.content},
                    {"role": "user", "content": f"question {i}"}]
    llm_server.script(ok("other"))
    oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "unrelated session"}])
    old = GatewayCallBody.objects.filter(call__session__gateway__identity="id:old").order_by("call_id")
    sid = old[0].session_id
    assert old.count() == 3
    # the first two are past the retention; the third stays and still needs their common pieces
    GatewayCallBody.objects.filter(pk__in=[b.pk for b in old[:2]]).update(
        created_at=call_bodies.timezone.now() - timedelta(days=settings.GATEWAY_CALL_BODY_DAYS + 1))
    pieces_before = GatewayPiece.objects.filter(session_id=sid).count()

    out = io.StringIO()
    call_command("prune_call_bodies", stdout=out)
    bodies, pieces = (int(w) for w in re.findall(r"\d+", out.getvalue()))
    assert bodies == 2 and pieces >= 1
    assert GatewayPiece.objects.filter(session_id=sid).count() == pieces_before - pieces
    left = GatewayCallBody.objects.get(session_id=sid)
    assert rebuilt(left).verified and rebuilt(left).data == llm_server.requests[2].body
    assert GatewayCall.objects.filter(session_id=sid).count() == 3, "the calls' figures stay"
    assert all(rebuilt(b).verified for b in GatewayCallBody.objects.exclude(session_id=sid))

    # A call sweeps when the last sweep is older than GATEWAY_CALL_BODY_SWEEP.
    GatewayCallBody.objects.filter(session_id=sid).update(created_at=call_bodies.timezone.now() - timedelta(days=30))
    settings.GATEWAY_CALL_BODY_SWEEP = 0
    llm_server.script(ok("new"))
    oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "a third session"}])
    assert not GatewayCallBody.objects.filter(session_id=sid).exists()
    assert not GatewayPiece.objects.filter(session_id=sid).exists()


def test_a_retention_of_zero_keeps_no_body(gateway, project, llm_server, settings):
    settings.GATEWAY_CALL_BODY_DAYS = 0
    llm_server.script(ok("hi"))
    sdk(gateway, project.test_key).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert GatewayCall.objects.count() == 1 and not GatewayCallBody.objects.exists()


def test_an_array_is_cut_at_its_elements_only_when_written_as_the_gateway_writes_it():
    assert split_array('[{"a":1},{"b":"x,]"}]') == ['{"a":1}', '{"b":"x,]"}']
    assert split_array("[]") == []
    assert split_array('[{"a":1}, {"b":2}]') is None  # a space the pieces would not give back
    text = '[{"a":1},{"b":2},{"c":3}]'
    assert split_array(text, len('[{"a":1},')) == ['{"b":2}', '{"c":3}']
    assert json.loads("[" + ",".join(split_array(text)) + "]") == json.loads(text)


@pytest.mark.postgres
def test_parallel_calls_sending_the_same_new_messages_share_their_pieces(transactional_db, project):
    """8 calls of one session recorded at once, each sending the same history with new
    messages the others send too: every body rebuilds, and each text is one piece."""
    session = import_session(project, convert_payload([{"role": "user", "content": "start"}])).session
    shared = [json.dumps({"role": "user", "content": f"shared {i}"}) for i in range(5)]
    arrays = ["[" + ",".join(shared + [json.dumps({"role": "user", "content": f"own {k}"})]) + "]" for k in range(8)]
    barrier = threading.Barrier(8)

    def call(k: int) -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                record_call(session.pk, endpoint="chat/completions", model="gpt-4o", status_code=200,
                            body=CallBody("chat", {"model": "gpt-4o"}, 6, 6, 6,
                                          SentBody('{"model": "gpt-4o", "messages": ', arrays[k], "}")))
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(call, range(8)))
    bodies = GatewayCallBody.objects.filter(session=session)
    assert bodies.count() == 8
    assert sorted(rebuilt(b).data for b in bodies) == sorted(
        ('{"model": "gpt-4o", "messages": ' + a + "}").encode() for a in arrays)
    assert GatewayPiece.objects.filter(session=session).count() == 5 + 8 + 2  # shared, own, the head, the fields
