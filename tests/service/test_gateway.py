"""The OpenAI-compatible gateway, driven by the real ``openai`` SDK against a live test
server, with the scripted OpenAI-compatible server (over real HTTP) as the upstream."""
from __future__ import annotations

import json

import openai
import pytest
from django.test import Client as DjangoClient

from compaction import Policy, get_preset
from compaction.messages import Message, Provenance
from dashboard.models import GatewaySession, Session, StoredMessage
from dashboard.services.common import counter_for
from dashboard.services.policies import activate_policy, create_policy
from tests.support.llm_server import error, ok, tool_call

WINDOW = 6000
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                           "parameters": {"type": "object",
                                                          "properties": {"path": {"type": "string"}}}}}]


def _policy(**changes) -> Policy:
    data = get_preset("default").to_json()
    data["context_window"] = WINDOW
    data.update(changes)
    return Policy.load(data)


@pytest.fixture
def gateway(live_server, transactional_db, project, llm_server, settings):
    """The operator's default upstream is the scripted server; the project's policy keeps
    contexts under a 6,000-token window (so a loop of a few dozen turns must compact)."""
    settings.GATEWAY_API_BASE = llm_server.api_base
    settings.GATEWAY_API_KEY = "operator-upstream-key"
    activate_policy(project, create_policy(project, "gateway tests", _policy()))
    return live_server


def sdk(live_server, key: str, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=live_server.url + "/v1", api_key=key, max_retries=0, **kw)


def _tool_output(i: int) -> str:
    return f"# src/module_{i}.py\n" + "\n".join(f"def helper_{i}_{k}(x):\n    return x * {k}  # line {k}"
                                                for k in range(40))


def _assemble(stream) -> dict:
    """What an agent does with a streamed answer: put the message back together."""
    content, calls = [], {}
    for chunk in stream:
        for choice in chunk.choices:
            d = choice.delta
            if d.content:
                content.append(d.content)
            for tc in d.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "type": "function",
                                                   "function": {"name": "", "arguments": ""}})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["function"]["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    slot["function"]["arguments"] += tc.function.arguments
    msg = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return msg


def agent_loop(oai: openai.OpenAI, server, turns: int, stream: bool) -> tuple[list[dict], list]:
    """An agent that knows nothing of compaction: it keeps its whole history and sends all of
    it every turn. Returns (its history, the raw responses)."""
    history: list[dict] = [{"role": "system", "content": "You are a careful coding agent."},
                           {"role": "user", "content": "Read every module of the project and summarise it."}]
    answers = []
    for i in range(turns + 1):
        last = i == turns
        server.script(ok("All modules read.") if last
                      else ok("", tool_calls=[tool_call("read_file", {"path": f"src/module_{i}.py"}, f"call_{i}")]))
        raw = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=history, tools=TOOLS,
                                                            stream=stream)
        answers.append(raw)
        if stream:
            message = _assemble(raw.parse())
        else:
            message = raw.parse().choices[0].message.model_dump(exclude_none=True)
        history.append(message)
        if last:
            break
        history.append({"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": _tool_output(i)})
    return history, answers


def _tokens(messages: list[dict], tools: list[dict]) -> int:
    counter = counter_for(_policy(model="gpt-4o"))
    msgs = [Message(raw, f"m{i}", Provenance.ORIGINAL, i) for i, raw in enumerate(messages)]
    return sum(t.total for t in counter.count_many(msgs)) + counter.count_tools(tools)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_long_agent_loop_is_compacted_without_the_client_changing_anything(gateway, project, llm_server, stream):
    oai = sdk(gateway, project.test_key)
    history, answers = agent_loop(oai, llm_server, turns=60, stream=stream)

    sessions = {a.headers["x-compaction-session"] for a in answers}
    assert len(sessions) == 1, "every turn continued the same stored session"
    runs = {a.headers["x-compaction-run"] for a in answers if a.headers.get("x-compaction-run")}
    assert runs, "compaction ran before some model calls"
    assert history[-1]["content"] == "All modules read."

    requests = llm_server.requests
    assert len(requests) == len(answers)
    usable = WINDOW - min(get_preset("default").reserved_output_tokens, WINDOW // 4)
    for req in requests:
        assert _tokens(req.messages, req.json.get("tools") or []) <= usable
        assert req.headers["authorization"] == "Bearer operator-upstream-key"
        assert project.test_key not in req.body.decode()
    assert len(requests[-1].messages) < len(history) - 1, "the last call got the compacted context"
    assert requests[-1].messages[-1]["role"] == "tool"

    # The session holds the client's whole history, each message once, and the archive
    # gives it back byte for byte.
    sid = int(sessions.pop())
    stored = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))
    assert len(stored) == len(history)
    replay = Client(project).get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] is True
    assert [json.dumps(m, sort_keys=True) for m in replay["messages"]] == [json.dumps(m, sort_keys=True) for m in stored]
    # The provider's usage of each reply is kept with it.
    assert all("usage" in raw for raw in stored if raw["role"] == "assistant")


class Client:
    """The Django test client with a project's key (for the JSON API)."""

    def __init__(self, project):
        self.c = DjangoClient()
        self.key = project.test_key

    def get(self, path):
        return self.c.get(path, HTTP_AUTHORIZATION=f"Bearer {self.key}")
