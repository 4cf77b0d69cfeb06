"""The Agents SDK session over the REST API: ``Runner.run`` with a scripted model (no
network) and a live test server, 50 turns, each model call getting the service's compacted
context; items the engine refuses are one error naming the integration, the position and
the fault, and nothing is written.

The model is a scripted implementation of the SDK's ``Model`` interface: no provider can
run here, and what matters is what the SDK hands it (the session's items)."""
from __future__ import annotations

import json
import os

import pytest

from compaction import Policy, get_preset
from compaction.compactor import counter_for
from compaction.integrations._common import IntegrationError
from compaction.integrations.openai_agents import CompactionServiceSession, items_as_messages
from dashboard.models import Session
from dashboard.services.policies import activate_policy, create_policy
from tests.integrations.conftest import run_async

if os.environ.get("CI", "").lower() == "true":
    import agents
else:
    agents = pytest.importorskip("agents", reason="openai-agents is not installed (pip install .[openai-agents])")

from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_function_web_search import ActionSearch  # noqa: E402

WINDOW = 6000
TURNS = 50
SUMMARY_MARK = "[Conversation summary"
FILLER = " ".join(f"word{i}" for i in range(60))


def _policy() -> Policy:
    data = get_preset("default").to_json()
    data["context_window"] = WINDOW
    return Policy.load(data)


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\ndef helper():\n    return 1\n# {FILLER}"


class ScriptedModel(Model):
    """Each turn: first a call of read_file (when the agent has tools), then, once its
    output is in the input, an answer. Records the input of every call."""

    def __init__(self) -> None:
        self.inputs: list[list[dict]] = []
        self.calls = 0

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        items = [input] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        self.calls += 1
        last = items[-1]
        if not tools or (isinstance(last, dict) and last.get("type") == "function_call_output"):
            out = [ResponseOutputMessage(id=f"msg_{self.calls}", type="message", role="assistant", status="completed",
                                         content=[ResponseOutputText(type="output_text", annotations=[],
                                                                     text=f"Done with step {self.calls}. {FILLER}")])]
        else:
            out = [ResponseFunctionToolCall(id=f"fc_{self.calls}", type="function_call", call_id=f"call_{self.calls}",
                                            name="read_file", status="completed",
                                            arguments=json.dumps({"path": f"src/module_{self.calls}.py"}))]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests run without streaming")


@pytest.fixture
def service(live_server, transactional_db, project):
    activate_policy(project, create_policy(project, "agents sdk tests", _policy()))
    return live_server


def _session(service, project, name: str = "sdk-run") -> CompactionServiceSession:
    return CompactionServiceSession(name, base_url=service.url, api_key=project.test_key)


def _text(item: dict) -> str:
    content = item.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def test_fifty_turns_of_runner_run_get_the_compacted_context(service, project):
    model = ScriptedModel()
    agent = Agent(name="coder", instructions="You are a careful coding agent.", model=model, tools=[read_file])
    session = _session(service, project)
    config = RunConfig(tracing_disabled=True)

    async def run_all():
        answers = []
        for turn in range(TURNS):
            result = await Runner.run(agent, f"Step {turn}: inspect the next module. {FILLER}", session=session,
                                      run_config=config)
            answers.append(result.final_output)
        context, tail = await session.get_items(), await session.get_items(limit=2)
        await session.close()
        return answers, context, tail

    answers, context, tail = run_async(run_all())
    assert len(answers) == TURNS and all(a.startswith("Done with step") for a in answers)
    stored = Session.objects.get(pk=session.service_session)
    assert stored.message_count == 4 * TURNS            # the service keeps the whole history
    assert stored.title == "sdk-run"
    counter = counter_for(_policy())
    sizes = [sum(counter.count_raw(m).total for m in items_as_messages(i)) for i in model.inputs]
    assert max(sizes) <= WINDOW                         # no model call got more than the window
    last_input = model.inputs[-1]
    assert any(SUMMARY_MARK in _text(i) for i in last_input)   # the old turns are a summary
    assert len(last_input) < 4 * TURNS // 2
    assert last_input[-1]["type"] == "function_call_output"    # the current turn is there, verbatim
    assert any(SUMMARY_MARK in _text(i) for i in context)
    assert tail == context[-2:]


def test_one_session_object_serves_turns_run_by_separate_asyncio_runs(service, project):
    """A REPL-style agent runs each turn with its own ``asyncio.run``: the same session object
    must keep working when the event loop of the previous turn is gone (each turn gets the
    history of the earlier ones)."""
    model = ScriptedModel()
    agent = Agent(name="coder", instructions="You are a careful coding agent.", model=model, tools=[read_file])
    session = _session(service, project, "repl")
    config = RunConfig(tracing_disabled=True)
    answers = [run_async(Runner.run(agent, f"Step {turn}: inspect the next module.", session=session,
                                    run_config=config)).final_output for turn in range(3)]
    assert all(a.startswith("Done with step") for a in answers)
    assert Session.objects.get(pk=session.service_session).message_count == 4 * 3
    third_turn_input = " ".join(_text(i) for i in model.inputs[-2])
    assert "Step 0:" in third_turn_input and "Step 1:" in third_turn_input and "Step 2:" in third_turn_input


def test_pop_item_and_clear_session(service, project):
    session = _session(service, project, "popping")

    async def work():
        async with session:
            await session.add_items([{"role": "user", "content": "first"}, {"role": "assistant", "content": "one"},
                                     {"role": "user", "content": "second"}])
            first_id = session.service_session
            popped = await session.pop_item()
            after_pop = await session.get_items()
            await session.add_items([{"role": "user", "content": "again"}])
            again = await session.get_items()
            await session.clear_session()
            return first_id, popped, after_pop, again, await session.get_items(), await session.pop_item()

    first_id, popped, after_pop, again, cleared, nothing = run_async(work())
    assert popped == {"role": "user", "content": "second"}
    assert after_pop == [{"role": "user", "content": "first"}, {"role": "assistant", "content": "one"}]
    assert again[-1] == {"role": "user", "content": "again"} and len(again) == 3
    assert cleared == [] and nothing is None
    assert Session.objects.filter(pk=first_id).exists()            # the record before the pop stays


@pytest.mark.parametrize("bad, fault", [
    ({"type": "function_call_output", "call_id": "call_nobody", "output": "stray"}, "orphan_tool_result"),
    ({"role": "narrator", "content": "meanwhile"}, "unknown_role"),
    ({"type": "web_search_call", "id": "ws_1", "status": "completed"}, "bad_record"),
])
def test_refused_items_name_the_integration_position_and_fault_and_write_nothing(service, project, bad, fault):
    session = _session(service, project, "refusals")

    async def work():
        await session.add_items([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
        before = await session.get_items()
        with pytest.raises(IntegrationError) as err:
            await session.add_items([{"role": "user", "content": "next"}, bad])
        after = await session.get_items()
        await session.close()
        return before, err.value, after

    before, error, after = run_async(work())
    assert str(error).startswith("openai-agents: message 3: ")
    assert error.index == 3 and error.fault == fault
    assert after == before
    assert Session.objects.get(pk=session.service_session).message_count == 2


class HostedSearchModel(Model):
    """Answers after a hosted web search: an item with no chat-message form."""

    async def get_response(self, *args, **kwargs):
        search = ResponseFunctionWebSearch(id="ws_1", status="completed", type="web_search_call",
                                           action=ActionSearch(type="search", query="compaction"))
        answer = ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                       content=[ResponseOutputText(type="output_text", annotations=[], text="found")])
        return ModelResponse(output=[search, answer], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests run without streaming")


def test_a_run_whose_items_are_refused_fails_with_the_error_and_writes_none_of_them(service, project):
    session = _session(service, project, "hosted-search")
    agent = Agent(name="searcher", model=HostedSearchModel())

    async def work():
        with pytest.raises(IntegrationError) as err:
            await Runner.run(agent, "look it up", session=session, run_config=RunConfig(tracing_disabled=True))
        items = await session.get_items()
        await session.close()
        return err.value, items

    error, items = run_async(work())
    assert str(error).startswith("openai-agents: message 1: item 0: item type 'web_search_call'")
    assert error.fault == "bad_record"
    # the SDK stored the run's input before the model answered; none of the refused turn is stored
    assert items == [{"role": "user", "content": "look it up"}]
    assert Session.objects.get(pk=session.service_session).message_count == 1
