"""The OpenAI Agents SDK against the gateway with its default model settings: the model is
the SDK's default for a plain model name (``OpenAIResponsesModel``, so ``POST
/v1/responses``), nothing set but the client's base URL and key. The scripted
OpenAI-compatible server stands in for the model (over real HTTP); the tool runs for real."""
from __future__ import annotations

import asyncio
import json
import os

import httpx
import pytest
from openai import AsyncOpenAI

from compaction import get_preset
from dashboard.models import CompactionRun, GatewayCall, GatewaySession, StoredMessage
from tests.integrations.conftest import run_async
from tests.service import test_gateway
from tests.service.test_gateway import WINDOW, Client, _tokens
from tests.support import gateway_writes
from tests.support.llm_server import ok, tool_call

if os.environ.get("CI", "").lower() == "true":
    import agents
else:
    agents = pytest.importorskip("agents", reason="openai-agents is not installed (pip install .[openai-agents])")

from agents import Agent, ModelSettings, RunConfig, Runner, function_tool  # noqa: E402
from agents.models.openai_provider import OpenAIProvider  # noqa: E402
from agents.models.openai_responses import OpenAIResponsesModel  # noqa: E402

gateway = test_gateway.gateway  # the fixture: the scripted server as the operator's upstream

TURNS = 30


def _module(path: str) -> str:
    """A long tool output (about 700 tokens)."""
    return f"# {path}\n" + "\n".join(f"def helper_{k}(value):\n    return value * {k}  # {path} line {k}"
                                     for k in range(40))


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return _module(path)


def _client(live_server, key: str) -> AsyncOpenAI:
    async def wait_for_write(_response) -> None:  # see tests.support.gateway_writes
        await asyncio.to_thread(gateway_writes.wait)

    return AsyncOpenAI(base_url=live_server.url + "/v1", api_key=key, max_retries=0,
                       http_client=httpx.AsyncClient(event_hooks={"response": [wait_for_write]}))


def _script(server) -> None:
    for i in range(TURNS):
        server.script(ok("", tool_calls=[tool_call("read_file", {"path": f"src/module_{i}.py"}, f"call_{i}")]))
    server.script(ok("All modules read."))


@pytest.mark.parametrize("mode", ["plain", "stream", "context_management"])
def test_a_thirty_turn_tool_loop_with_default_model_settings(gateway, project, llm_server, mode, client,
                                                             django_user_model):
    _script(llm_server)
    provider = OpenAIProvider(openai_client=_client(gateway, project.test_key))
    settings = (ModelSettings(context_management=[{"type": "compaction", "compact_threshold": 3000}])
                if mode == "context_management" else ModelSettings())
    agent = Agent(name="coder", instructions="You are a careful coding agent.", model="gpt-4o", tools=[read_file],
                  model_settings=settings)
    config = RunConfig(model_provider=provider, tracing_disabled=True)
    assert isinstance(provider.get_model("gpt-4o"), OpenAIResponsesModel), "the SDK's default is the Responses API"

    async def run():
        if mode == "stream":
            result = Runner.run_streamed(agent, "Read every module of the project.", max_turns=TURNS + 5,
                                         run_config=config)
            async for _event in result.stream_events():
                pass
            return result
        return await Runner.run(agent, "Read every module of the project.", max_turns=TURNS + 5, run_config=config)

    result = run_async(run())
    gateway_writes.wait()
    assert result.final_output == "All modules read."
    calls = [i for i in result.new_items if i.type == "tool_call_item"]
    assert len(calls) == TURNS

    # every turn reached the upstream once and succeeded, never above the window
    requests = llm_server.requests
    assert len(requests) == TURNS + 1 and all(r.behaviour == "ok" for r in requests)
    usable = WINDOW - min(get_preset("default").reserved_output_tokens, WINDOW // 4)
    sizes = [_tokens(r.messages, r.json.get("tools") or []) for r in requests]
    assert max(sizes) <= usable
    assert "module_0.py line 3" not in json.dumps(requests[-1].messages), "the first outputs were compacted away"

    # one session holds the whole loop; its compactions and calls are on the API and the page
    gateway_session = GatewaySession.objects.get(project=project)
    sid = gateway_session.session_id
    assert StoredMessage.objects.filter(session_id=sid).count() == 2 + 2 * TURNS + 1
    calls_rows = GatewayCall.objects.filter(session_id=sid)
    assert calls_rows.count() == TURNS + 1 and set(calls_rows.values_list("endpoint", "status_code")) == \
        {("responses", 200)}
    runs = Client(project).get(f"/api/sessions/{sid}/runs").json()["items"]
    succeeded = [r for r in runs if r["status"] == "succeeded"]
    assert succeeded and CompactionRun.objects.filter(session_id=sid, status="succeeded").count() == len(succeeded)
    client.force_login(django_user_model.objects.create_superuser("root", password="a long password 1"))
    page = client.get(f"/sessions/{sid}/")
    assert page.status_code == 200
    assert f"/runs/{succeeded[0]['id']}/" in page.content.decode(), "the session page links its compactions"
    assert "responses" in client.get(f"/sessions/{sid}/calls/").content.decode(), "the calls table lists them"
    if mode == "context_management":
        kept = [i for i in result.new_items if i.type == "compaction_item"]
        assert kept, "the compaction items reached the SDK, and it sent them back"

