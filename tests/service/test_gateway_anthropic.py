"""``POST /v1/messages`` (Anthropic-compatible), driven by the real ``anthropic`` SDK against a
live test server. The upstream is the scripted OpenAI-compatible server over real HTTP: the
gateway reaches any upstream through litellm in OpenAI's form, so an Anthropic-format client
is served by the operator's zero-setup upstream."""
from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from compaction import Policy, get_preset
from compaction.messages import Message, Provenance
from dashboard.gateway.anthropic_wire import to_openai_messages
from dashboard.models import CompactionRun, GatewayCall, GatewaySession, Session, StoredMessage
from dashboard.services.common import counter_for
from dashboard.services.policies import activate_policy, create_policy
from tests.service.test_gateway import Client, gateway  # noqa: F401 - the live server fixture, reused
from tests.support import gateway_writes
from tests.support.llm_server import error, ok, slow, tool_call

MODEL = "claude-sonnet-4-6"
WINDOW = 6000
TOOLS = [{"name": "read_file", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
COMPACT_BETA = "compact-2026-01-12"


def sdk(live_server, key: str, **kw) -> anthropic.Anthropic:
    """The Anthropic SDK pointed at the gateway; a call returns once the gateway has stored
    its reply (see tests.support.gateway_writes)."""
    return anthropic.Anthropic(base_url=live_server.url, api_key=key, max_retries=0,
                               http_client=gateway_writes.http2_client(), **kw)


def _policy(window: int, **changes) -> Policy:
    data = get_preset("default").to_json()
    data["context_window"] = window
    data.update(changes)
    return Policy.load(data)


@pytest.fixture
def wide(project):
    """A project policy with a 200,000-token window, whose own trigger stays far away, so
    what happens is what the request's context_management edits asked for."""
    policy = _policy(200_000).with_overrides({"reduction.enabled": False})  # so a compaction summarizes
    activate_policy(project, create_policy(project, "wide window", policy))


def _tool_output(i: int, lines: int = 40) -> str:
    return f"# src/module_{i}.py\n" + "\n".join(f"def helper_{i}_{k}(x):\n    return x * {k}  # line {k}"
                                                for k in range(lines))


def _tokens(messages: list[dict], tools: list[dict]) -> int:
    counter = counter_for(_policy(WINDOW, model=MODEL))
    msgs = [Message(raw, f"m{i}", Provenance.ORIGINAL, i) for i, raw in enumerate(messages)]
    return sum(t.total for t in counter.count_many(msgs)) + counter.count_tools(tools)


def _as_param(message) -> dict:
    """What an agent appends after an answer: the assistant message with its blocks as sent."""
    return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]}


def _ask(client, stream: bool, **kw):
    """(message, response headers), streamed through the SDK's stream helper or not."""
    if stream:
        with client.messages.stream(**kw) as s:
            return s.get_final_message(), s.response.headers
    raw = client.messages.with_raw_response.create(**kw)
    return raw.parse(), raw.headers


def agent_loop(client, server, turns: int, stream: bool) -> tuple[list[dict], list]:
    """An Anthropic agent that knows nothing of compaction: it keeps its whole history and
    sends all of it every turn. Returns (its history, the response headers of every turn)."""
    history: list[dict] = [{"role": "user", "content": "Read every module of the project and summarise it."}]
    headers = []
    for i in range(turns + 1):
        last = i == turns
        server.script(ok("All modules read.") if last
                      else ok("", tool_calls=[tool_call("read_file", {"path": f"src/module_{i}.py"}, f"call_{i}")]))
        message, h = _ask(client, stream, model=MODEL, max_tokens=1024, system="You are a careful coding agent.",
                          messages=history, tools=TOOLS)
        headers.append(h)
        history.append(_as_param(message))
        if last:
            assert message.stop_reason == "end_turn"
            break
        assert message.stop_reason == "tool_use"
        use = next(b for b in message.content if b.type == "tool_use")
        assert use.input == {"path": f"src/module_{i}.py"}
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                      "content": _tool_output(i)}]})
    return history, headers


# 200 turns once; streaming relays the same loop, so 60 turns (several compactions) show it
@pytest.mark.parametrize(("stream", "turns"), [(False, 200), (True, 60)], ids=["plain", "stream"])
def test_a_200_turn_anthropic_agent_loop_is_compacted_without_the_client_changing_anything(
        gateway, project, llm_server, stream, turns):  # noqa: F811 - the imported fixture
    history, headers = agent_loop(sdk(gateway, project.test_key), llm_server, turns=turns, stream=stream)

    sessions = {h["x-compaction-session"] for h in headers}
    assert len(sessions) == 1, "every turn continued the same stored session"
    runs = {h["x-compaction-run"] for h in headers if h.get("x-compaction-run")}
    assert len(runs) > 3, "compaction ran before several model calls"
    assert set(CompactionRun.objects.filter(pk__in=runs).values_list("status", flat=True)) == {"succeeded"}
    assert history[-1]["content"] == [{"type": "text", "text": "All modules read."}]

    requests = llm_server.requests
    assert len(requests) == len(headers)
    usable = WINDOW - min(get_preset("default").reserved_output_tokens, WINDOW // 4)
    for req in requests:
        assert _tokens(req.messages, req.json.get("tools") or []) <= usable
        assert req.headers["authorization"] == "Bearer operator-upstream-key"
        assert project.test_key not in req.body.decode()
        assert req.model == MODEL and req.json["max_tokens"] == 1024
    last = requests[-1].messages
    assert last[0] == {"role": "system", "content": "You are a careful coding agent."}
    assert last[-1]["role"] == "tool" and last[-1]["tool_call_id"] == f"call_{turns - 1}"
    assert len(last) < 20, "the last call got the compacted context, not 400 messages"

    # The session holds the whole history in OpenAI's form (system, task, then a call and
    # its result per turn, the final answer), each message once; the archive gives it back
    # byte for byte.
    sid = int(sessions.pop())
    stored = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))
    assert len(stored) == 2 + 2 * turns + 1
    assert [m["role"] for m in stored[:4]] == ["system", "user", "assistant", "tool"]
    replay = Client(project).get(f"/api/sessions/{sid}/archive/replay").json()
    assert replay["matches_history"] is True
    assert [json.dumps(m, sort_keys=True) for m in replay["messages"]] == [json.dumps(m, sort_keys=True) for m in stored]


# -- context_management ---------------------------------------------------------------------------

def _long_history(rounds: int, lines: int) -> list[dict]:
    history: list[dict] = [{"role": "user", "content": "Audit the code base."}]
    for i in range(rounds):
        history.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {"path": f"src/module_{i}.py"}}]})
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                      "content": _tool_output(i, lines)}]})
    return history


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_compact_edit_pauses_after_the_compaction_block_and_the_next_request_continues(
        gateway, project, llm_server, wide, stream):  # noqa: F811
    client = sdk(gateway, project.test_key)
    history = _long_history(rounds=30, lines=170)  # about 60,000 tokens: over a 50,000 trigger
    edits = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000},
                        "pause_after_compaction": True}]}
    kw = dict(model=MODEL, max_tokens=512, messages=history, tools=TOOLS, betas=[COMPACT_BETA],
              context_management=edits)
    if stream:
        with client.beta.messages.stream(**kw) as s:
            paused, headers = s.get_final_message(), s.response.headers
    else:
        raw = client.beta.messages.with_raw_response.create(**kw)
        paused, headers = raw.parse(), raw.headers
    assert paused.stop_reason == "compaction"
    assert [b.type for b in paused.content] == ["compaction"]
    run = CompactionRun.objects.get(pk=int(headers["x-compaction-run"]))
    assert paused.content[0].content == run.summary and "src/module_" in run.summary
    assert not llm_server.requests, "a paused answer does not call the model"

    # The agent appends the answer as Anthropic documents and sends again: the session goes
    # on (nothing forked), the model gets the compacted context, no second compaction.
    history.append(_as_param(paused))
    llm_server.script(ok("Audit done."))
    raw = client.beta.messages.with_raw_response.create(**dict(kw, messages=history))
    answer = raw.parse()
    assert [b.type for b in answer.content] == ["text"] and answer.content[0].text == "Audit done."
    assert raw.headers["x-compaction-session"] == headers["x-compaction-session"]
    assert "x-compaction-forked-from" not in raw.headers and "x-compaction-run" not in raw.headers
    sent = llm_server.requests[-1].messages
    assert _tokens(sent, TOOLS) < 50_000
    assert any(run.summary in str(m.get("content")) for m in sent), "the summary stands for the evicted blocks"
    sid = int(headers["x-compaction-session"])
    assert StoredMessage.objects.filter(session_id=sid).count() == 1 + 60 + 1  # the reply, nothing of the pause


def test_compact_edit_without_pause_answers_with_the_block_then_the_model_and_instructions_apply(
        gateway, project, llm_server, wide):  # noqa: F811
    client = sdk(gateway, project.test_key)
    llm_server.script(ok("Carrying on."))
    edits = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000},
                        "instructions": "Keep {every} file path."}]}
    with client.beta.messages.stream(model=MODEL, max_tokens=512, messages=_long_history(30, 170), tools=TOOLS,
                                     betas=[COMPACT_BETA], context_management=edits) as s:
        message, headers = s.get_final_message(), s.response.headers
    assert [b.type for b in message.content] == ["compaction", "text"]
    assert message.content[1].text == "Carrying on." and message.stop_reason == "end_turn"
    run = CompactionRun.objects.get(pk=int(headers["x-compaction-run"]))
    assert message.content[0].content == run.summary
    # The edit became the run's policy: the trigger and the client's prompt (its braces as text).
    assert run.policy_snapshot["trigger"] == {"kind": "tokens", "threshold": 50_000}
    assert run.policy_snapshot["summarizer"]["prompt"].startswith("Keep {{every}} file path.")
    assert len(llm_server.requests) == 1


def test_clear_tool_uses_edit_clears_old_results_and_keeps_the_recent_and_excluded_ones(
        gateway, project, llm_server, wide):  # noqa: F811
    client = sdk(gateway, project.test_key)
    history = _long_history(rounds=12, lines=40)
    history[3]["content"][0]["name"] = "pinned_notes"  # the second call: excluded from clearing
    tools = TOOLS + [{"name": "pinned_notes", "input_schema": {"type": "object"}}]
    llm_server.script(ok("ok"))
    edits = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 3000},
                        "keep": {"type": "tool_uses", "value": 2}, "exclude_tools": ["pinned_notes"]}]}
    message = client.beta.messages.create(model=MODEL, max_tokens=64, messages=history, tools=tools,
                                          betas=["context-management-2025-06-27"], context_management=edits)
    results = [m for m in llm_server.requests[-1].messages if m["role"] == "tool"]
    assert len(results) == 12
    kept = [i for i, m in enumerate(results) if str(m["content"]).startswith(f"# src/module_{i}.py")]
    assert kept == [1, 10, 11], "the excluded tool's result and the two most recent are intact"
    # The answer says what was cleared, as Anthropic's applied_edits.
    [applied] = message.context_management.applied_edits
    assert applied.type == "clear_tool_uses_20250919" and applied.cleared_tool_uses == 9
    assert applied.cleared_input_tokens > 3000


def test_context_management_that_cannot_be_honoured_is_a_400_naming_the_field(gateway, project, llm_server):  # noqa: F811
    client = sdk(gateway, project.test_key)
    base = dict(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "x"}], betas=[COMPACT_BETA])
    cases = [
        ({"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 10_000}}]},
         "context_management.edits.0.trigger.value: must be at least 50000"),
        ({"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3}}]},
         "context_management.edits.0.trigger.type"),
        ({"edits": [{"type": "clear_thinking_20251015"}]}, "context_management.edits.0.type"),
        ({"edits": [{"type": "compact_20260112", "pause_after_compaction": "yes"}]},
         "context_management.edits.0.pause_after_compaction"),
    ]
    for value, named in cases:
        with pytest.raises(anthropic.BadRequestError) as bad:
            client.beta.messages.create(**base, context_management=value)
        assert bad.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                             "message": bad.value.body["error"]["message"]}}
        assert bad.value.body["error"]["message"].startswith(named), bad.value.body
    assert not llm_server.requests and not Session.objects.exists()


def test_a_history_the_client_trimmed_to_its_compaction_block_keeps_the_summary():
    trimmed = [{"role": "assistant", "content": [{"type": "compaction", "content": "Summary: modules 0-9 read."},
                                                  {"type": "text", "text": "Going on."}]},
               {"role": "user", "content": "next"}]
    assert to_openai_messages("sys", trimmed) == [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "Summary: modules 0-9 read."},
        {"role": "assistant", "content": "Going on."}, {"role": "user", "content": "next"}]
    # Further in, the block is the gateway's own and is dropped (the stored session has what it stands for).
    full = [{"role": "user", "content": "start"}] + trimmed
    assert [m["content"] for m in to_openai_messages(None, full)] == ["start", "Going on.", "next"]


# -- keys, identity, forks ------------------------------------------------------------------------

def test_a_wrong_key_gets_401_and_another_project_never_reaches_the_session(gateway, project, other_project,  # noqa: F811
                                                                             llm_server):
    with pytest.raises(anthropic.AuthenticationError) as bad:
        sdk(gateway, "stolen-or-made-up").messages.create(model=MODEL, max_tokens=8,
                                                          messages=[{"role": "user", "content": "x"}])
    assert bad.value.status_code == 401
    assert bad.value.body["error"]["type"] == "authentication_error"
    assert not llm_server.requests

    history = [{"role": "user", "content": "a private plan"}]
    llm_server.script(ok("noted"), ok("who are you?"), ok("bearer works"))
    mine = sdk(gateway, project.test_key).messages.with_raw_response.create(
        model=MODEL, max_tokens=8, messages=history, extra_headers={"X-Session-Id": "shared-name"})
    theirs = sdk(gateway, other_project.test_key).messages.with_raw_response.create(
        model=MODEL, max_tokens=8, extra_headers={"X-Session-Id": "shared-name"},
        messages=history + [{"role": "assistant", "content": "noted"}, {"role": "user", "content": "?"}])
    mine_id, theirs_id = int(mine.headers["x-compaction-session"]), int(theirs.headers["x-compaction-session"])
    assert mine_id != theirs_id
    assert Session.objects.get(pk=theirs_id).project_id == other_project.pk
    assert StoredMessage.objects.filter(session_id=mine_id).count() == 2
    assert Client(other_project).get(f"/api/sessions/{mine_id}").status_code == 404

    # The key as a bearer token works too (clients that send Authorization).
    by_bearer = sdk(gateway, None, auth_token=project.test_key).messages.with_raw_response.create(
        model=MODEL, max_tokens=8, messages=history + [{"role": "assistant", "content": "noted"},
                                                       {"role": "user", "content": "again"}],
        extra_headers={"X-Session-Id": "shared-name"})
    assert int(by_bearer.headers["x-compaction-session"]) == mine_id


def test_an_edited_history_forks_a_new_session_and_says_so(gateway, project, llm_server):  # noqa: F811
    client = sdk(gateway, project.test_key)
    llm_server.script(ok("first"), ok("second"), ok("third"))
    h = {"X-Session-Id": "editor"}
    history = [{"role": "user", "content": "write a poem"}]
    sid = int(client.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=history,
                                                       extra_headers=h).headers["x-compaction-session"])
    history += [{"role": "assistant", "content": [{"type": "text", "text": "first"}]},
                {"role": "user", "content": "shorter"}]
    client.messages.create(model=MODEL, max_tokens=64, messages=history, extra_headers=h)
    before = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))
    assert len(before) == 4, "the resent assistant blocks matched the stored reply"

    edited = [{"role": "user", "content": "write a song"}] + history[1:]
    raw = client.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=edited, extra_headers=h)
    assert int(raw.headers["x-compaction-session"]) != sid
    assert raw.headers["x-compaction-forked-from"] == str(sid)
    assert "(message #0 was edited)" in raw.headers["x-compaction-notice"]
    after = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("raw", flat=True))
    assert after == before
    # each call's row names the endpoint the client called
    assert list(GatewayCall.objects.filter(session_id=sid).values_list("endpoint", flat=True)) == ["messages"] * 2


# -- upstream failures and bad input --------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_upstream_errors_reach_the_client_as_the_anthropic_sdk_expects(gateway, project, llm_server, settings,  # noqa: F811
                                                                      stream):
    client = sdk(gateway, project.test_key)
    kw = dict(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hello"}], stream=stream,
              extra_headers={"X-Session-Id": f"errors-{stream}"})
    llm_server.script(error(429, "slow down", retry_after=7))
    with pytest.raises(anthropic.RateLimitError) as limited:
        out = client.messages.create(**kw)
        list(out) if stream else None
    assert limited.value.response.headers["retry-after"] == "7"
    assert limited.value.body["type"] == "error" and limited.value.body["error"]["type"] == "rate_limit_error"
    assert "slow down" in limited.value.message

    settings.GATEWAY_TIMEOUT = 0.5
    for behaviour, status, kind in ((error(500, "upstream broke"), 500, "api_error"),
                                    (slow(3, "too late"), 504, "timeout_error")):
        llm_server.script(behaviour)
        with pytest.raises(anthropic.InternalServerError) as failed:
            out = client.messages.create(**kw)
            list(out) if stream else None
        assert failed.value.status_code == status and failed.value.body["error"]["type"] == kind

    # The client's message was stored once; its retry adds nothing new and is answered.
    settings.GATEWAY_TIMEOUT = 30
    llm_server.script(ok("hi there"))
    if stream:
        with client.messages.stream(**{k: v for k, v in kw.items() if k != "stream"}) as s:
            text = s.get_final_text()
    else:
        text = client.messages.create(**kw).content[0].text
    assert text == "hi there"
    sid = GatewaySession.objects.get(identity=f"id:errors-{stream}").session_id
    roles = list(StoredMessage.objects.filter(session_id=sid).order_by("position").values_list("role", flat=True))
    assert roles == ["user", "assistant"]


def test_a_bad_body_or_an_unknown_model_is_a_400_naming_what_to_fix(gateway, project, llm_server):  # noqa: F811
    client = sdk(gateway, project.test_key)
    user = [{"role": "user", "content": "x"}]

    def refused(**kw) -> str:
        with pytest.raises(anthropic.BadRequestError) as bad:
            client.messages.create(**kw)
        assert bad.value.body["error"]["type"] == "invalid_request_error"
        return bad.value.body["error"]["message"]

    assert refused(model=MODEL, max_tokens=8, messages=[{"role": "wizard", "content": "x"}]).startswith(
        "messages.0.role")
    assert refused(model=MODEL, max_tokens=8, messages=user, extra_body={"api_base": "http://169.254.169.254/"}
                   ).startswith("api_base: Extra inputs are not permitted")
    assert refused(model=MODEL, max_tokens=8, messages=user, extra_body={"top_k": 5}).startswith("top_k: not served")
    assert refused(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "nope", "content": "y"}]}]).startswith("messages")
    assert refused(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "http://169.254.169.254/latest"}}]}]).startswith(
        "messages.0.content.0.source: give a base64 image source")
    unmapped = refused(model="anthropic/claude-sonnet-4-6", max_tokens=8, messages=user)
    assert unmapped.startswith("model: ") and "COMPACTION_CONNECTIONS" in unmapped
    # max_tokens is required, as Anthropic's API has it (the SDK's type says so; send it raw).
    no_max = httpx.post(gateway.url + "/v1/messages", json={"model": MODEL, "messages": user},
                        headers={"x-api-key": project.test_key, "anthropic-version": "2023-06-01"})
    assert no_max.status_code == 400
    assert no_max.json()["error"]["message"].startswith("max_tokens")
    no_version = httpx.post(gateway.url + "/v1/messages", json={"model": MODEL, "max_tokens": 8, "messages": user},
                            headers={"x-api-key": project.test_key})
    assert no_version.status_code == 400 and "anthropic-version" in no_version.json()["error"]["message"]
    assert not llm_server.requests
    assert not Session.objects.exists()


