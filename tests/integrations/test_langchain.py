"""The LangChain v1 middleware inside a real ``create_agent`` loop.

The chat model is LangChain's own ``GenericFakeChatModel`` (scripted answers; no model can
run here), extended only to accept tools and to record what each call was sent. Everything
else is real: the agent graph, the tool node, the engine, the archive on disk and, in
remote mode, the service over HTTP (pytest-django's live server).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integrations.conftest import off_the_event_loop, require, run_async

require("langchain", "langchain")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from compaction import FileArchive, get_preset, replay
from compaction.compactor import counter_for
from compaction.context import check_tool_pairs
from compaction.integrations._common import IntegrationError
from compaction.integrations.langchain import CompactionMiddleware, from_openai, to_openai
from compaction.messages import wrap_originals
from dashboard.models import CompactionRun, Session, StoredMessage

REPO = Path(__file__).resolve().parents[2]
WINDOW = 8000


class LoopModel(GenericFakeChatModel):
    """The fake chat model, able to take tools; ``calls`` keeps each request's messages."""

    calls: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


def tool_loop_script(steps: int, tag: str = "") -> list[AIMessage]:
    calls = [AIMessage(content="", id=f"ai{tag}-{i}", tool_calls=[
        {"name": "read_file", "args": {"path": f"src/module_{i}.py"}, "id": f"call{tag}_{i}", "type": "tool_call"}])
        for i in range(steps)]
    return calls + [AIMessage(content="All modules read.", id=f"ai{tag}-final")]


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    return f"# {path}\n" + "\n".join(f"def helper_{k}(x):\n    return x * {k}  # {path}" for k in range(50))


def policy(window: int = WINDOW) -> dict:
    data = get_preset("default").to_json()
    data["context_window"] = window
    return data


def run_agent(middleware, steps: int, tag: str = ""):
    """Drive a ``steps``-call tool loop; returns (model, every original message in order)."""
    model = LoopModel(messages=iter(tool_loop_script(steps, tag)), calls=[])
    agent = create_agent(model, [read_file], middleware=[middleware])
    originals, seen = [], set()
    first = HumanMessage("Read every module and report.", id=f"user{tag}-0")
    for state in agent.stream({"messages": [first]}, {"recursion_limit": 10 * steps + 20}, stream_mode="values"):
        for m in state["messages"]:
            # what the agent produced, in order; summaries the middleware wrote are not originals
            if m.id not in seen and not m.id.startswith(f"{middleware.session_id}:"):
                seen.add(m.id)
                originals.append(m)
    return model, originals


def model_input_tokens(middleware, messages) -> int:
    counter = counter_for(middleware.policy)
    return sum(counter.count(m).total for m in wrap_originals([to_openai(x) for x in messages]))


# -- conversion -------------------------------------------------------------------------

def test_messages_convert_to_openai_and_back_without_loss():
    messages = [
        SystemMessage("Be brief.", id="s1"),
        SystemMessage("Dev rules.", id="s2", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage(content=[{"type": "text", "text": "Look at this"},
                              {"type": "image", "url": "https://example.test/a.png"},
                              "and this plain string"], id="h1", name="ana"),
        AIMessage(content=[{"type": "reasoning", "reasoning": "think"}, {"type": "text", "text": "Reading."}],
                  id="a1", tool_calls=[{"name": "read_file", "args": {"path": "ü.py", "n": [1, 2.5]}, "id": "c1",
                                        "type": "tool_call"}],
                  usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
                  response_metadata={"model_name": "fake", "finish_reason": "tool_calls"}),
        ToolMessage("boom", tool_call_id="c1", id="t1", name="read_file", status="error", artifact={"rows": 3}),
        ChatMessage("a note", role="user", id="c2"),
    ]
    raws = [to_openai(m) for m in messages]
    assert [r["role"] for r in raws] == ["system", "developer", "user", "assistant", "tool", "user"]
    call = raws[3]["tool_calls"][0]
    assert call == {"id": "c1", "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "ü.py", "n": [1, 2.5]}'}}
    assert raws[3]["usage"]["total_tokens"] == 15
    assert raws[4]["tool_call_id"] == "c1"
    assert raws[2]["content"][1] == {"type": "image_url", "image_url": {"url": "https://example.test/a.png"}}
    check_tool_pairs(raws)  # the engine takes them as they are
    # through JSON (the archive file, the service) and back: equal in every field
    back = [from_openai(json.loads(json.dumps(r)), None) for r in raws]
    assert back == messages
    assert [type(b) for b in back] == [type(m) for m in messages]


def test_an_edited_tool_result_comes_back_with_its_identity_and_the_new_text():
    raw = to_openai(ToolMessage("x" * 500, tool_call_id="c9", id="t9", artifact={"a": 1}))
    edited = dict(raw, content="[truncated]")
    back = from_openai(edited, None)
    assert (back.id, back.tool_call_id, back.content, back.artifact) == ("t9", "c9", "[truncated]", {"a": 1})


# -- the agent loop, local mode ------------------------------------------------------------

def test_hundred_step_tool_loop_stays_in_the_window_and_the_archive_replays_it(tmp_path):
    archive = FileArchive(tmp_path / "archive")
    middleware = CompactionMiddleware(policy(), session_id="loop", archive=archive)
    model, originals = run_agent(middleware, 100)

    assert len(model.calls) == 101
    assert len(middleware.session.outcomes) >= 5, "a 100-step loop over an 8k window must compact"
    usable = middleware.session.usable_window
    for sent in model.calls:
        assert model_input_tokens(middleware, sent) <= usable
        check_tool_pairs([to_openai(m) for m in sent])  # every call answered, no orphan result
    # the agent's history: the user message, then 100 call/result pairs, then the answer
    assert len(originals) == 1 + 2 * 100 + 1
    replayed = FileArchive(tmp_path / "archive").entries("loop")
    assert replay(replayed, middleware.session.live.messages) == [to_openai(m) for m in originals]
    assert [from_openai(r) for r in middleware.session.replay()] == originals


def test_the_summary_can_come_from_the_agents_own_chat_model():
    summarizer = LoopModel(messages=iter(["SUMMARY-FROM-CHAT-MODEL: modules 0 to 20 read."] * 50), calls=[])
    middleware = CompactionMiddleware(policy(), session_id="own-model", summarizer=summarizer)
    model, _ = run_agent(middleware, 30)
    assert summarizer.calls, "the chat model was never asked for a summary"
    assert "src/module_0.py" in "\n".join(str(m.content) for m in summarizer.calls[0])
    last = "\n".join(str(m.content) for m in model.calls[-1])
    assert "SUMMARY-FROM-CHAT-MODEL" in last


def test_a_short_conversation_is_left_alone():
    middleware = CompactionMiddleware(policy(), session_id="short")
    model, originals = run_agent(middleware, 3)
    assert middleware.session.outcomes == []
    assert model.calls[-1] == originals[:-1]  # the model saw the agent's own objects


def test_async_agent_compacts_too():
    middleware = CompactionMiddleware(policy(), session_id="async")
    model = LoopModel(messages=iter(tool_loop_script(40, "a")), calls=[])
    agent = create_agent(model, [read_file], middleware=[middleware])
    run_async(agent.ainvoke({"messages": [HumanMessage("go", id="u")]}, {"recursion_limit": 500}))
    assert middleware.session.outcomes
    assert all(model_input_tokens(middleware, sent) <= middleware.session.usable_window for sent in model.calls)


def test_the_same_messages_through_the_same_policy_give_the_same_contexts():
    def drive(middleware, steps: int) -> list[list]:
        """What the agent loop does with the middleware's answers, messages with fixed ids."""
        state, sent = [HumanMessage("Read every module.", id="u")], []
        for i in range(steps):
            update = middleware.process(state)
            if update is not None:
                state = update["messages"][1:]  # after RemoveMessage(REMOVE_ALL_MESSAGES)
            sent.append(list(state))
            call = tool_loop_script(steps)[i]
            state = state + [call, ToolMessage(read_file.invoke({"path": f"src/module_{i}.py"}),
                                               tool_call_id=call.tool_calls[0]["id"], id=f"tool-{i}")]
        return sent

    first = drive(CompactionMiddleware(policy(), session_id="same"), 40)
    second = drive(CompactionMiddleware(policy(), session_id="same"), 40)
    assert first == second
    assert any(m.id.startswith("same:") for m in first[-1]), "the loop was meant to compact"


def test_a_checkpointed_thread_continues_the_same_session():
    middleware = CompactionMiddleware(policy(), session_id="thread")
    script = tool_loop_script(30, "p") + tool_loop_script(30, "q")
    model = LoopModel(messages=iter(script), calls=[])
    agent = create_agent(model, [read_file], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}, "recursion_limit": 500}
    agent.invoke({"messages": [HumanMessage("first task", id="u1")]}, config)
    session = middleware.session
    agent.invoke({"messages": [HumanMessage("second task", id="u2")]}, config)
    assert middleware.session is session, "the second turn must continue, not start over"
    history = [from_openai(r) for r in session.replay()]
    assert [m.id for m in history if isinstance(m, HumanMessage)] == ["u1", "u2"]
    assert len(history) == 2 * (1 + 2 * 30 + 1)


def test_a_new_conversation_gets_a_session_of_its_own():
    middleware = CompactionMiddleware(policy(), session_id="reuse")
    run_agent(middleware, 3, "x")
    first = middleware.session
    run_agent(middleware, 3, "y")
    assert middleware.session is not first
    assert (first.session_id, middleware.session.session_id) == ("reuse", "reuse-2")


# -- bad input ------------------------------------------------------------------------------

def test_an_orphan_tool_result_is_refused_naming_integration_index_and_fault():
    middleware = CompactionMiddleware(policy(), session_id="bad")
    good = [HumanMessage("hi", id="h"), AIMessage("", id="a", tool_calls=[
        {"name": "read_file", "args": {"path": "x"}, "id": "c1", "type": "tool_call"}]),
        ToolMessage("ok", tool_call_id="c1", id="t")]
    assert middleware.process(good) is None
    state = good + [AIMessage("next", id="a2"), HumanMessage("more", id="h2"),
                    ToolMessage("stray", tool_call_id="nope", id="t2")]
    before = list(state)
    with pytest.raises(IntegrationError) as err:
        middleware.process(state)
    text = str(err.value)
    assert text.startswith("LangChain CompactionMiddleware: message 5: orphan tool result")
    assert "'nope'" in text
    assert (err.value.index, err.value.fault) == (5, "orphan_tool_result")
    assert state == before  # the agent's list is untouched
    # nothing of the refused batch reached the session: the valid part can follow as if it never came
    assert len(middleware.session.live.messages) == 3
    assert middleware.process(state[:5]) is None
    assert len(middleware.session.live.messages) == 5


def test_an_unknown_role_is_refused_and_the_agent_run_stops_with_the_error():
    middleware = CompactionMiddleware(policy(), session_id="role")
    model = LoopModel(messages=iter(tool_loop_script(1)), calls=[])
    agent = create_agent(model, [read_file], middleware=[middleware])
    with pytest.raises(IntegrationError, match=r"CompactionMiddleware: message 1: unknown role 'critic'") as err:
        agent.invoke({"messages": [HumanMessage("hi", id="h"), ChatMessage("meh", role="critic", id="c")]})
    assert err.value.fault == "unknown_role"
    assert model.calls == []  # the model was never called with a context the engine refused
    assert middleware.session is None


def test_arguments_that_are_not_json_are_refused():
    middleware = CompactionMiddleware(policy(), session_id="args")
    bad = AIMessage("", id="a", tool_calls=[{"name": "f", "args": {"when": object()}, "id": "c", "type": "tool_call"}])
    with pytest.raises(IntegrationError, match="message 1: .*not JSON") as err:
        middleware.process([HumanMessage("hi", id="h"), bad])
    assert err.value.fault == "unconvertible_message"


def test_mode_arguments_are_checked():
    with pytest.raises(Exception, match="api_key was given without service_url"):
        CompactionMiddleware(api_key="k")
    with pytest.raises(Exception, match="archive is for local mode"):
        CompactionMiddleware(service_url="http://127.0.0.1:1", api_key="k", archive=FileArchive("/tmp/x"))


# -- remote mode ----------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_remote_mode_compacts_in_the_service_and_the_dashboard_has_the_run(live_server, project):
    middleware = CompactionMiddleware(policy(6000), service_url=live_server.url, api_key=project.test_key,
                                      session_id="remote")
    model, originals = run_agent(middleware, 40)

    session = Session.objects.get(pk=middleware.remote_session_id)
    assert CompactionRun.objects.filter(session=session, status="succeeded").count() >= 3
    assert session.policy_id is not None  # the middleware's policy is the session's override
    assert max(len(sent) for sent in model.calls) < len(originals) / 2
    stored = list(StoredMessage.objects.filter(session=session).order_by("position").values_list("raw", flat=True))
    assert stored == [to_openai(m) for m in originals]  # the service holds the agent's history as it was
    for sent in model.calls:
        check_tool_pairs([to_openai(m) for m in sent])
        assert model_input_tokens(middleware, sent) <= 6000
    assert any("summary" in str(m.content).lower() or m.id.startswith("remote:") for m in model.calls[-1])


@pytest.mark.slow
def test_remote_mode_waits_for_the_run_a_worker_does(live_server, project, start_worker):
    start_worker("filesystem")
    middleware = CompactionMiddleware(policy(6000), service_url=live_server.url, api_key=project.test_key,
                                      session_id="queued", remote_wait_seconds=120)
    model, _ = run_agent(middleware, 25)
    runs = CompactionRun.objects.filter(session_id=middleware.remote_session_id)
    assert runs.filter(status="succeeded", inline=False).exists(), list(runs.values("status", "inline", "error"))
    for sent in model.calls:
        check_tool_pairs([to_openai(m) for m in sent])
        assert model_input_tokens(middleware, sent) <= 6000


def test_remote_mode_names_the_service_when_it_refuses(live_server, transactional_db):
    middleware = CompactionMiddleware(policy(), service_url=live_server.url, api_key="not-a-key")
    with pytest.raises(Exception, match=r"compaction service: importing the session failed \(HTTP 401\)"):
        middleware.process([HumanMessage("hi", id="h")])


# -- the README's example -------------------------------------------------------------------

def test_readme_langchain_example_runs(tmp_path, monkeypatch):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("### LangChain", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    off_the_event_loop(exec, compile(code, "README.md (LangChain)", "exec"), namespace)
    assert namespace["result"]["messages"][-1].content
    assert (tmp_path / "archive").exists()
