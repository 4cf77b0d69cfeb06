"""The OpenAI-compatible gateway, driven by the real ``openai`` SDK against a live test
server, with the scripted OpenAI-compatible server (over real HTTP) as the upstream."""
from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from django.test import Client as DjangoClient

from compaction import Policy, get_preset
from compaction.messages import Message, Provenance
from dashboard.gateway.wire import broken_pair
from dashboard.models import CompactionRun, GatewaySession, Session, StoredMessage
from dashboard.services.common import counter_for
from dashboard.services.policies import activate_policy, create_policy
from tests.support import gateway_writes
from tests.support.llm_server import ScriptedLLMServer, error, ok, slow, tool_call

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
    """The OpenAI SDK pointed at the gateway; a call returns once the gateway has stored
    its reply (which it does after answering: see tests.support.gateway_writes)."""
    return openai.OpenAI(base_url=live_server.url + "/v1", api_key=key, max_retries=0,
                         http_client=gateway_writes.http_client(), **kw)


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
    # The header names runs that did something, never one that found nothing to do.
    assert set(CompactionRun.objects.filter(pk__in=runs).values_list("status", flat=True)) == {"succeeded"}
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
    assert requests[-1].messages[-1]["tool_call_id"] == "call_59", "the newest message is forwarded, not a stale context"

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


# -- who may use which session -----------------------------------------------------------------

def test_a_wrong_key_gets_401_and_another_project_never_reaches_the_session(gateway, project, other_project,
                                                                             llm_server):
    with pytest.raises(openai.AuthenticationError) as bad:
        sdk(gateway, "not-a-key").chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert bad.value.status_code == 401
    assert not llm_server.requests

    history = [{"role": "user", "content": "a private plan"}]
    llm_server.script(ok("noted"), ok("who are you?"))
    mine = sdk(gateway, project.test_key).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=history, extra_headers={"X-Session-Id": "shared-name"})
    theirs = sdk(gateway, other_project.test_key).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=history + [{"role": "assistant", "content": "noted"}, {"role": "user", "content": "?"}],
        extra_headers={"X-Session-Id": "shared-name"})
    mine_id, theirs_id = int(mine.headers["x-compaction-session"]), int(theirs.headers["x-compaction-session"])
    assert mine_id != theirs_id
    assert Session.objects.get(pk=mine_id).project_id == project.pk
    assert Session.objects.get(pk=theirs_id).project_id == other_project.pk
    assert StoredMessage.objects.filter(session_id=mine_id).count() == 2  # its message and the reply, nothing more
    # The other project's key cannot read the first project's session through the API.
    assert Client(other_project).get(f"/api/sessions/{mine_id}").status_code == 404


def test_a_key_whose_project_was_just_deleted_gets_401_not_500(gateway, project, llm_server, settings):
    """Keys are cached for API_KEY_CACHE_SECONDS: within that time a deleted project's key
    still authenticates, and every path that then reads the project must refuse it."""
    settings.API_KEY_CACHE_SECONDS = 60
    oai = sdk(gateway, project.test_key)
    with pytest.raises(openai.BadRequestError):  # authenticates (and caches the key), stores nothing
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "wizard", "content": "x"}])
    type(project).objects.filter(pk=project.pk).delete()
    for model in ("gpt-4o", "a-local-model-litellm-does-not-know"):  # the second needs the project's window
        with pytest.raises(openai.AuthenticationError) as gone:
            oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}])
        assert gone.value.status_code == 401
        assert "no longer exists" in gone.value.message
    assert not llm_server.requests


# -- what the client's history says about its session -----------------------------------------

def test_identity_header_metadata_user_and_leading_messages(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(*[ok(f"r{i}") for i in range(6)])
    base = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task one"}]

    def call(messages, **kw):
        return int(oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, **kw)
                   .headers["x-compaction-session"])

    by_digest = call(base)
    # No identity given: the leading messages find the session this history extends.
    assert call(base + [{"role": "assistant", "content": "r0"}, {"role": "user", "content": "more"}]) == by_digest
    by_header = call(base, extra_headers={"X-Session-Id": "agent-7"})
    by_metadata = call(base, metadata={"session_id": "agent-8"}, store=False)
    by_user = call(base, user="alice")
    assert len({by_digest, by_header, by_metadata, by_user}) == 4
    assert Session.objects.get(pk=by_metadata).metadata == {"metadata": {"session_id": "agent-8"}}
    assert call(base + [{"role": "assistant", "content": "r2"}, {"role": "user", "content": "x"}],
                extra_headers={"X-Session-Id": "agent-7"}) == by_header


def test_an_edited_history_starts_a_new_session_and_leaves_the_stored_one_alone(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("first"), ok("second"), ok("third"))
    h = {"X-Session-Id": "editor"}
    history = [{"role": "user", "content": "write a poem"}]
    r1 = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=history, extra_headers=h)
    sid = int(r1.headers["x-compaction-session"])
    history += [{"role": "assistant", "content": "first"}, {"role": "user", "content": "shorter"}]
    oai.chat.completions.create(model="gpt-4o", messages=history, extra_headers=h)
    before = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))

    edited = [{"role": "user", "content": "write a song"}, {"role": "assistant", "content": "first"},
              {"role": "user", "content": "shorter"}]
    r3 = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=edited, extra_headers=h)
    new_sid = int(r3.headers["x-compaction-session"])
    assert new_sid != sid
    assert r3.headers["x-compaction-forked-from"] == str(sid)
    assert "(message #0 was edited)" in r3.headers["x-compaction-notice"]
    after = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))
    assert after == before
    assert GatewaySession.objects.get(session_id=new_sid).forked_from_id == sid
    assert [m["content"] for m in llm_server.requests[-1].messages] == ["write a song", "first", "shorter"]


# -- upstream failures -----------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_upstream_errors_reach_the_client_as_the_sdk_expects(gateway, project, llm_server, stream):
    oai = sdk(gateway, project.test_key)
    history = [{"role": "user", "content": "hello"}]
    h = {"X-Session-Id": f"errors-{stream}"}
    llm_server.script(error(429, "slow down", retry_after=7))
    with pytest.raises(openai.RateLimitError) as limited:
        out = oai.chat.completions.create(model="gpt-4o", messages=history, stream=stream, extra_headers=h)
        list(out) if stream else None
    assert limited.value.status_code == 429
    assert limited.value.response.headers["retry-after"] == "7"
    assert "slow down" in limited.value.message

    llm_server.script(error(500, "upstream broke"))
    with pytest.raises(openai.InternalServerError) as broke:
        out = oai.chat.completions.create(model="gpt-4o", messages=history, stream=stream, extra_headers=h)
        list(out) if stream else None
    assert broke.value.status_code == 500

    # The client's message was stored before forwarding, once; its retry adds nothing new.
    sid = GatewaySession.objects.get(identity=f"id:errors-{stream}").session_id
    assert StoredMessage.objects.filter(session_id=sid).count() == 1
    llm_server.script(ok("hi there"))
    out = oai.chat.completions.create(model="gpt-4o", messages=history, stream=stream, extra_headers=h)
    text = _assemble(out)["content"] if stream else out.choices[0].message.content
    assert text == "hi there"
    roles = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("role", flat=True))
    assert roles == ["user", "assistant"]


def test_a_bad_body_or_an_unknown_model_is_a_400_naming_what_to_fix(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    with pytest.raises(openai.BadRequestError) as bad:
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "wizard", "content": "x"}])
    assert bad.value.body["param"] == "messages[0]"
    with pytest.raises(openai.BadRequestError) as unknown:
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}],
                                    extra_body={"api_base": "http://169.254.169.254/"})
    assert unknown.value.body["param"] == "api_base"
    with pytest.raises(openai.BadRequestError) as two:
        oai.chat.completions.create(model="gpt-4o", n=2, messages=[{"role": "user", "content": "x"}])
    assert two.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError) as unmapped:
        oai.chat.completions.create(model="anthropic/claude-sonnet-4-5", messages=[{"role": "user", "content": "x"}])
    assert unmapped.value.body["param"] == "model"
    assert "COMPACTION_CONNECTIONS" in unmapped.value.message
    with pytest.raises(openai.BadRequestError) as pairs:
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"},
                                                            {"role": "tool", "tool_call_id": "nope", "content": "y"}])
    assert "orphan" in pairs.value.message
    assert not llm_server.requests
    assert not Session.objects.exists()


def test_a_prefixed_model_goes_through_the_operators_connection_with_its_key(gateway, project, llm_server):
    llm_server.script(ok("via connection"))
    out = sdk(gateway, project.test_key).chat.completions.create(model="openai/gpt-4o-mini",
                                                                 messages=[{"role": "user", "content": "x"}])
    assert out.choices[0].message.content == "via connection"
    req = llm_server.requests[-1]
    assert req.model == "gpt-4o-mini"
    assert req.headers["authorization"] == "Bearer test-key"  # CS_TEST_LLM_KEY of the "scripted" connection


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_provider_that_is_not_openai_compatible_is_called_through_litellm(gateway, project, llm_server, settings,
                                                                           stream):
    """``hosted_vllm/...`` is a litellm provider (not the gateway's own OpenAI-compatible
    relay): litellm builds the request, here to the scripted server, which speaks its format."""
    settings.COMPACTION_CONNECTIONS = [*settings.COMPACTION_CONNECTIONS, {
        "name": "vllm", "models": ["hosted_vllm/*"], "api_base": llm_server.api_base,
        "api_key_env": "CS_TEST_LLM_KEY", "allow_private_network": True}]
    oai = sdk(gateway, project.test_key)
    h = {"X-Session-Id": f"litellm-{stream}"}
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "one"}]
    for i in range(2):
        llm_server.script(ok(f"answer {i}"))
        out = oai.chat.completions.create(model="hosted_vllm/qwen3", messages=history, stream=stream, extra_headers=h)
        reply = _assemble(out) if stream else out.choices[0].message.model_dump(exclude_none=True)
        assert reply["content"] == f"answer {i}"
        sent = llm_server.requests[-1]
        assert sent.model == "qwen3" and sent.headers["authorization"] == "Bearer test-key"
        assert [m["content"] for m in sent.messages] == [m["content"] for m in history]
        history += [reply, {"role": "user", "content": f"then {i}"}]
    llm_server.script(error(429, "slow down", retry_after=2))
    with pytest.raises(openai.RateLimitError):
        out = oai.chat.completions.create(model="hosted_vllm/qwen3", messages=history, stream=stream, extra_headers=h)
        list(out) if stream else None


def test_an_image_url_is_not_fetched_by_the_gateway_for_a_provider_litellm_would_download_it_for(
        gateway, project, llm_server, settings):
    """litellm downloads image URLs itself for providers such as Anthropic: the gateway would
    fetch an address the client chose from inside the operator's network. Refused, with
    nothing fetched or stored; an OpenAI-compatible upstream gets the URL as it is."""
    settings.COMPACTION_CONNECTIONS = [*settings.COMPACTION_CONNECTIONS, {
        "name": "claude", "models": ["anthropic/*"], "api_base": llm_server.api_base,
        "api_key_env": "CS_TEST_LLM_KEY", "allow_private_network": True}]
    with ScriptedLLMServer() as internal_host:
        url = internal_host.api_base + "/secret.png"
        message = {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                               {"type": "image_url", "image_url": {"url": url}}]}
        oai = sdk(gateway, project.test_key)
        with pytest.raises(openai.BadRequestError) as refused:
            oai.chat.completions.create(model="anthropic/claude-sonnet-4-5", messages=[message])
        assert refused.value.body["param"] == "messages[0].content[1].image_url"
        assert "data: URL" in refused.value.message
        assert not internal_host.requests and not llm_server.requests
        assert not Session.objects.exists()
        # the default OpenAI-compatible upstream receives the URL untouched (its provider fetches it)
        llm_server.script(ok("a picture"))
        oai.chat.completions.create(model="gpt-4o", messages=[message])
        assert llm_server.requests[-1].messages[-1]["content"][1]["image_url"]["url"] == url
        assert not internal_host.requests


# -- the README's promise -----------------------------------------------------------------------

def test_the_readme_snippet_runs_against_the_gateway(gateway, project, llm_server):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it without changing your agent", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "base_url=" in code
    code = code.replace("http://127.0.0.1:8000", gateway.url).replace("YOUR_PROJECT_KEY", project.test_key)
    llm_server.script(ok("Hello back"))
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the documented snippet, as a user runs it
    assert scope["reply"].choices[0].message.content == "Hello back"
    assert llm_server.requests[-1].messages == [{"role": "user", "content": "Hello"}]


def test_an_upstream_timeout_is_a_504_and_the_stream_reports_usage_when_asked(gateway, project, llm_server, settings):
    oai = sdk(gateway, project.test_key)
    settings.GATEWAY_TIMEOUT = 0.5
    llm_server.script(slow(3, "too late"))
    with pytest.raises(openai.InternalServerError) as late:
        oai.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert late.value.status_code == 504

    settings.GATEWAY_TIMEOUT = 30
    llm_server.script(ok("streamed", usage={"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}))
    raw = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=[{"role": "user", "content": "y"}],
                                                        stream=True, stream_options={"include_usage": True})
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert int(raw.headers["x-context-tokens"]) > 0
    chunks = list(raw.parse())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "streamed"
    assert chunks[-1].usage.prompt_tokens == 11 and chunks[-1].choices == []
    sid = int(raw.headers["x-compaction-session"])
    reply = StoredMessage.objects.filter(session_id=sid, role="assistant").get().raw
    assert reply["usage"] == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}


def test_the_pair_guard_names_what_would_break_upstream():
    assert broken_pair([{"role": "user", "content": "x"}, {"role": "assistant", "content": None,
                        "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "a", "content": "ok"}]) is None
    assert "answers tool call 'b'" in broken_pair([{"role": "tool", "tool_call_id": "b", "content": "x"}])
    assert "not answered" in broken_pair([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "user", "content": "next"}])


def test_a_truncated_history_starts_a_new_session_too(gateway, project, llm_server):
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("one"), ok("two"), ok("three"))
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "count"}]
    sid = int(oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=history)
              .headers["x-compaction-session"])
    history += [{"role": "assistant", "content": "one"}, {"role": "user", "content": "go on"}]
    oai.chat.completions.create(model="gpt-4o", messages=history)
    assert StoredMessage.objects.filter(session_id=sid).count() == 5

    # The agent drops its last exchange and asks something else.
    shorter = history[:2] + [{"role": "assistant", "content": "one"}, {"role": "user", "content": "stop"}]
    raw = oai.chat.completions.with_raw_response.create(model="gpt-4o", messages=shorter)
    assert int(raw.headers["x-compaction-session"]) != sid
    assert raw.headers["x-compaction-forked-from"] == str(sid)
    assert StoredMessage.objects.filter(session_id=sid).count() == 5
    assert [m["content"] for m in llm_server.requests[-1].messages] == ["be brief", "count", "one", "stop"]


def test_a_connection_whose_key_is_not_set_or_whose_address_is_private_is_refused_before_any_call(
        gateway, project, llm_server, settings, monkeypatch):
    """The operator's connection is the only place a key comes from, and its address is
    checked every time a model resolves to it: a missing key variable or a loopback address
    on a connection that does not allow private networks is a 502 naming the connection, and
    nothing reaches the server behind it (here the scripted server, on loopback)."""
    oai = sdk(gateway, project.test_key)
    llm_server.script(ok("must not be sent"), ok("must not be sent"))
    monkeypatch.delenv("CS_TEST_LLM_KEY_UNSET", raising=False)
    settings.COMPACTION_CONNECTIONS = [{"name": "keyless", "models": ["openai/*"], "api_base": llm_server.api_base,
                                        "api_key_env": "CS_TEST_LLM_KEY_UNSET", "allow_private_network": True}]
    with pytest.raises(openai.InternalServerError) as no_key:
        oai.chat.completions.create(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert no_key.value.status_code == 502
    assert "'keyless' has no key" in no_key.value.message and "CS_TEST_LLM_KEY_UNSET" in no_key.value.message
    settings.COMPACTION_CONNECTIONS = [{"name": "loopback", "models": ["openai/*"], "api_base": llm_server.api_base,
                                        "api_key_env": "CS_TEST_LLM_KEY"}]
    with pytest.raises(openai.InternalServerError) as private:
        oai.chat.completions.create(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "x"}])
    assert private.value.status_code == 502
    assert "'loopback' is unusable" in private.value.message and "private" in private.value.message
    assert not llm_server.requests
