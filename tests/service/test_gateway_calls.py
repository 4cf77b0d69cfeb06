"""What the gateway records of each call (``GatewayCall``) and what a client gets when
something fails, driven by the real ``openai`` SDK against a live server, with the scripted
OpenAI-compatible server (real HTTP) as the upstream."""
from __future__ import annotations

import json
from decimal import Decimal

import openai
import pytest

from compaction import _env
from dashboard.models import GatewayCall, SessionContext, StoredMessage
from tests.service import test_gateway
from tests.service.test_gateway import sdk
from tests.support.llm_server import error, ok

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream


def _listed_price(model: str, prompt: int, completion: int) -> Decimal:
    info = _env.litellm().model_cost[model]
    return Decimal(str(round(info["input_cost_per_token"] * prompt + info["output_cost_per_token"] * completion, 8)))


def test_each_call_records_the_providers_usage_beside_our_estimate_and_its_price(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    h = {"X-Session-Id": "costed"}
    history = [{"role": "user", "content": "hello there"}]
    llm_server.script(ok("hi", usage={"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127}))
    first = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=history, extra_headers=h)
    history += [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "and streamed?"}]
    llm_server.script(ok("yes", usage={"prompt_tokens": 150, "completion_tokens": 3, "total_tokens": 153}))
    second = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=history, stream=True,
                                                           extra_headers=h)
    list(second.parse())
    llm_server.script(error(429, "slow down"))
    with pytest.raises(openai.RateLimitError):
        oai.chat.completions.create(model="gpt-4o", messages=history + [{"role": "assistant", "content": "yes"},
                                                                        {"role": "user", "content": "again"}],
                                    extra_headers=h)

    sid = int(first.headers["x-compaction-session"])
    calls = list(GatewayCall.objects.filter(session_id=sid).order_by("id"))
    assert [(c.endpoint, c.status_code) for c in calls] == [("chat/completions", 200)] * 2 + [("chat/completions", 429)]
    plain, streamed, limited = calls
    assert plain.estimated_prompt_tokens == int(first.headers["x-context-tokens"])
    assert (plain.provider_prompt_tokens, plain.provider_completion_tokens) == (120, 7)
    assert plain.cost_usd == _listed_price("gpt-4o", 120, 7) > 0
    assert (streamed.provider_prompt_tokens, streamed.provider_completion_tokens) == (150, 3)
    assert streamed.estimated_prompt_tokens == int(second.headers["x-context-tokens"])
    assert limited.provider_prompt_tokens is None and limited.cost_usd is None
    assert all(c.upstream_ms is not None and c.overhead_ms is not None for c in calls)


def test_every_call_forwards_the_whole_live_context_with_the_messages_added_since(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    history = [{"role": "user", "content": "one"}]
    for i in range(3):
        llm_server.script(ok(f"r{i}"))
        reply = oai.chat.completions.create(model="gpt-4o", messages=history).choices[0].message.content
        history += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"q{i}"}]
    sent = [[m["content"] for m in r.messages] for r in llm_server.requests]
    assert sent == [["one"], ["one", "r0", "q0"], ["one", "r0", "q0", "r1", "q1"]]


def test_a_context_the_policy_cannot_fit_is_refused_recorded_and_its_message_kept(gateway, project, llm_server):
    # System messages are kept whole by every compaction: one over the 6,000-token window cannot fit.
    huge = " ".join(f"rule{i}" for i in range(12000))
    with pytest.raises(openai.BadRequestError) as over:
        sdk(gateway, project.test_key).chat.completions.create(
            model="gpt-4o", messages=[{"role": "system", "content": huge}, {"role": "user", "content": "go"}],
            extra_headers={"X-Session-Id": "too-big"})
    assert over.value.body["code"] == "context_length_exceeded"
    assert not llm_server.requests
    call = GatewayCall.objects.get()
    assert call.status_code == 400 and call.estimated_prompt_tokens > 6000
    stored = StoredMessage.objects.filter(session_id=call.session_id).order_by("position")
    assert [m.raw["content"] for m in stored] == [huge, "go"]


def test_a_model_litellm_has_no_price_for_costs_no_price_not_zero(gateway, project, llm_server):
    llm_server.script(ok("local answer", usage={"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}))
    raw = sdk(gateway, project.test_key).chat.completions.with_raw_response.create(
        model="studio-local-model-7b", messages=[{"role": "user", "content": "x"}])
    call = GatewayCall.objects.get(session_id=int(raw.headers["x-compaction-session"]))
    assert call.provider_prompt_tokens == 40
    assert call.cost_usd is None


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_an_upstream_error_reaches_the_client_with_its_status_and_error_object(gateway, project, llm_server, stream):
    llm_server.script(error(400, "max_tokens is too large for this model"))
    with pytest.raises(openai.BadRequestError) as bad:
        out = sdk(gateway, project.test_key).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}], stream=stream,
            extra_headers={"X-Session-Id": f"upstream-400-{stream}"})
        list(out) if stream else None
    assert bad.value.status_code == 400
    # The upstream's own error object, as it sent it (the scripted server's shape).
    assert bad.value.body == {"message": "max_tokens is too large for this model", "type": "invalid_request_error",
                              "code": 400}
    call = GatewayCall.objects.get()
    assert call.status_code == 400


def test_a_context_with_a_broken_tool_pair_is_never_sent_and_the_clients_messages_are_kept(gateway, project,
                                                                                            llm_server):
    """The stored live context is damaged on purpose (an answer to a call nobody made), as
    a fault in the service could leave it; the guard is what stands between it and the
    upstream."""
    oai = sdk(gateway, project.test_key)
    h = {"X-Session-Id": "damaged"}
    llm_server.script(ok("first"))
    history = [{"role": "user", "content": "start"}]
    sid = int(oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=history, extra_headers=h)
              .headers["x-compaction-session"])
    ctx = SessionContext.objects.get(session_id=sid)
    ctx.rendered = json.dumps(json.loads(ctx.rendered) + [{"role": "tool", "tool_call_id": "ghost", "content": "?"}])
    ctx.save(update_fields=["rendered", "updated_at"])  # stamped, as every write of the texts is

    history += [{"role": "assistant", "content": "first"}, {"role": "user", "content": "my next question"}]
    with pytest.raises(openai.InternalServerError) as refused:
        oai.chat.completions.create(model="gpt-4o", messages=history, extra_headers=h)
    assert "broken tool-call pair" in refused.value.message and "ghost" in refused.value.message
    assert len(llm_server.requests) == 1, "nothing was sent upstream"
    stored = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))
    assert stored[-1]["content"] == "my next question"
    assert GatewayCall.objects.filter(session_id=sid).order_by("-id").first().status_code == 500
