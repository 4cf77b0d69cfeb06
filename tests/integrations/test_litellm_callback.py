"""The litellm callback: requests leave litellm with the compacted context of their
conversation, the caller's history is never touched, and a message the engine refuses is
one error naming the integration, the index and the fault, with nothing changed.

What litellm sends is observed two ways: with litellm's ``mock_response`` (a second
callback, registered after ours, records the messages litellm hands on) and over real HTTP
to the scripted OpenAI-compatible server (the request body the provider receives)."""
from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import litellm
import pytest
from litellm.integrations.custom_logger import CustomLogger

from compaction import Policy, get_preset
from compaction.compactor import counter_for
from compaction.integrations._common import IntegrationError
from compaction.integrations.litellm import APPLIED_KEY, CompactionCallback
from tests.integrations.conftest import off_the_event_loop, run_async
from tests.service.helpers import chat
from tests.support.llm_server import ScriptedLLMServer, ok

WINDOW = 6000
SUMMARY_MARK = "[Conversation summary"


def small_window_policy() -> Policy:
    data = get_preset("default").to_json()
    data["context_window"] = WINDOW
    return Policy.load(data)


class SeenBySender(CustomLogger):
    """Registered after the compaction callback: records the messages litellm passes on."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[list[dict]] = []

    async def async_pre_call_deployment_hook(self, kwargs, call_type):
        self.sent.append(kwargs["messages"])
        return None


@pytest.fixture
def handler():
    handler = CompactionCallback(small_window_policy())
    seen = SeenBySender()
    before = list(litellm.callbacks)
    litellm.callbacks = [handler, seen]
    handler.seen = seen
    yield handler
    litellm.callbacks = before


def _tokens(messages: list[dict]) -> int:
    counter = counter_for(small_window_policy())
    return sum(counter.count_raw(m).total for m in messages)


def _summary_in(messages: list[dict]) -> bool:
    return any(SUMMARY_MARK in (m.get("content") or "") for m in messages if isinstance(m.get("content"), str))


def test_acompletion_sends_the_compacted_context_of_a_growing_conversation(handler):
    history = chat(50)
    untouched = copy.deepcopy(history)

    async def agent_loop() -> None:
        for end in range(5, len(history) + 1, 4):
            await litellm.acompletion(model="gpt-4o-mini", messages=history[:end], mock_response="done",
                                      metadata={"conversation_id": "run-1"})

    run_async(agent_loop())
    sent = handler.seen.sent
    assert sent[0] == history[:5]                       # short: sent as it is
    assert not _summary_in(sent[0])
    assert _summary_in(sent[-1])                        # long: a summary stands for the old turns
    assert len(sent[-1]) < len(history) // 2
    assert max(_tokens(s) for s in sent) <= WINDOW
    assert sent[-1][-1] == history[-1]                  # the newest message goes out verbatim
    assert history == untouched                         # the caller's history is never modified
    assert handler.conversations.session("run-1").outcomes


def _on_the_wire(message: dict) -> dict:
    """litellm leaves out fields that are null (an assistant tool call's ``content: None``)."""
    return {k: v for k, v in message.items() if v is not None}


@pytest.mark.parametrize("injection", ["user", "system", "first_user"])
def test_every_call_sends_what_a_full_render_of_the_context_gives(injection):
    """Between compactions the context sent is extended rather than re-rendered: it must
    stay exactly the engine's rendering, whatever the summary's placement."""
    policy = small_window_policy().with_overrides({"finalize.injection": injection})
    handler = CompactionCallback(policy)
    history = chat(40)[1:]        # no system prompt: a 'system' summary then stands on its own ...
    # ... until a developer message arrives after it, which the summary then merges into
    history.insert(4 * 38, {"role": "developer", "content": "Now also run the tests."})
    for end in range(3, len(history) + 1, 3):
        sent = handler.compact_request({"messages": history[:end], "metadata": {"conversation_id": "c"}})["messages"]
        assert sent == handler.conversations.session("c").context()
    assert handler.conversations.session("c").outcomes


def test_the_provider_receives_the_compacted_messages_over_http():
    history = chat(40)
    handler = CompactionCallback(small_window_policy())
    before = list(litellm.callbacks)
    litellm.callbacks = [handler]
    try:
        with ScriptedLLMServer() as server:
            server.script(ok("one"), ok("two"))

            async def calls() -> None:
                for end in (9, len(history)):
                    await litellm.acompletion(model="openai/agent", api_base=server.api_base, api_key="test",
                                              messages=history[:end])

            run_async(calls())
            first, last = (r.messages for r in server.requests)
    finally:
        litellm.callbacks = before
    assert first == [_on_the_wire(m) for m in history[:9]]
    assert _summary_in(last) and len(last) < len(history) // 2
    assert last[-1] == history[-1]


def test_plain_litellm_completion_naming_the_compaction_prompt_id_is_compacted_over_http():
    """Synchronous ``litellm.completion`` runs no request hook; the callback is also a prompt
    manager, which litellm asks for the messages when the call names a ``prompt_id``."""
    history = chat(40)
    handler = CompactionCallback(small_window_policy())
    before = list(litellm.callbacks)
    litellm.callbacks = [handler]
    try:
        with ScriptedLLMServer() as server:
            server.script(ok("one"), ok("two"), ok("three"))
            for end in (9, len(history)):
                litellm.completion(model="openai/agent", api_base=server.api_base, api_key="test",
                                   messages=history[:end], prompt_id="compaction:sync-1")
            # a call that does not ask for compaction is sent as it is
            litellm.completion(model="openai/agent", api_base=server.api_base, api_key="test", messages=history)
            first, last, untouched = server.requests
    finally:
        litellm.callbacks = before
    assert first.messages == [_on_the_wire(m) for m in history[:9]]
    assert _summary_in(last.messages) and len(last.messages) < len(history) // 2
    assert last.messages[-1] == history[-1] and _tokens(last.messages) <= WINDOW
    assert last.messages == [_on_the_wire(m) for m in handler.conversations.session("sync-1").context()]
    assert untouched.messages == [_on_the_wire(m) for m in history]
    assert b"prompt_id" not in first.body and b"compaction:sync-1" not in last.body  # not sent upstream


def test_an_asynchronous_call_naming_the_prompt_id_is_compacted_once(handler):
    history = chat(40)

    async def calls() -> None:
        for end in (9, len(history)):
            await litellm.acompletion(model="gpt-4o-mini", messages=history[:end], mock_response="ok",
                                      prompt_id="compaction:async-1")

    run_async(calls())
    first, last = handler.seen.sent
    conversation = handler.conversations.session("async-1")
    assert first == history[:9]
    # the conversation saw the caller's history, not an already compacted list fed back to it
    assert max(m.ordinal for m in conversation.live.messages if m.is_original) == len(history) - 1
    assert last == conversation.context() and _summary_in(last) and last[-1] == history[-1]


def test_a_router_call_is_compacted_too(handler):
    router = litellm.Router(model_list=[{"model_name": "agent",
                                         "litellm_params": {"model": "gpt-4o-mini", "mock_response": "ok"}}])
    history = chat(40)

    async def calls() -> None:
        for end in (9, len(history)):
            await router.acompletion(model="agent", messages=history[:end], metadata={"conversation_id": "r1"})

    run_async(calls())
    first, last = handler.seen.sent
    assert first == history[:9]
    assert _summary_in(last) and last[-1] == history[-1] and _tokens(last) <= WINDOW


def test_synchronous_callers_use_the_completion_helper():
    history = chat(40)
    handler = CompactionCallback(small_window_policy())
    with ScriptedLLMServer() as server:
        server.script(ok("answer"))
        reply = handler.completion(model="openai/agent", api_base=server.api_base, api_key="test",
                                   messages=history, metadata={"conversation_id": "sync-1"})
        sent = server.requests[0].messages
    assert reply.choices[0].message.content == "answer"
    assert _summary_in(sent) and _tokens(sent) <= WINDOW


def test_the_proxy_hook_compacts_the_request_once(handler):
    history = chat(40)
    data = {"model": "agent", "messages": history, "metadata": {"user_api_key_alias": "team-a"}}
    out = run_async(handler.async_pre_call_hook(None, None, data, "completion"))
    assert _summary_in(out["messages"]) and _tokens(out["messages"]) <= WINDOW
    assert out["metadata"]["user_api_key_alias"] == "team-a" and out["metadata"][APPLIED_KEY]
    assert data["messages"] is history and APPLIED_KEY not in data["metadata"]   # the request given is untouched
    # the proxy's router then calls acompletion: the deployment hook leaves it as it is
    again = run_async(handler.async_pre_call_deployment_hook(out, litellm.types.utils.CallTypes.acompletion))
    assert again["messages"] == out["messages"]
    # an embedding request carries no chat messages: left alone
    emb = {"model": "e", "input": ["x"]}
    assert run_async(handler.async_pre_call_hook(None, None, emb, "embeddings")) is emb


def test_conversations_without_an_id_are_told_apart_by_their_first_messages():
    handler = CompactionCallback(small_window_policy())
    a = [{"role": "system", "content": "agent A"}, {"role": "user", "content": "hello"}]
    b = [{"role": "system", "content": "agent B"}, {"role": "user", "content": "hello"}]
    handler.compact_request({"messages": a})
    handler.compact_request({"messages": b})
    grown = a + [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}]
    assert handler.compact_request({"messages": grown})["messages"] == grown
    assert len(handler.conversations._conversations) == 2


def test_conversations_compact_side_by_side_from_many_threads():
    handler = CompactionCallback(small_window_policy())
    histories = {f"c{k}": chat(30, tag=f"c{k}") for k in range(4)}

    def agent(cid: str) -> list[dict]:
        history = histories[cid]
        for end in [*range(5, len(history), 5), len(history)]:
            sent = handler.compact_request({"messages": history[:end], "metadata": {"conversation_id": cid}})
        return sent["messages"]

    with ThreadPoolExecutor(max_workers=4) as pool:
        last = dict(zip(histories, pool.map(agent, histories)))
    for cid, sent in last.items():
        assert sent[-1] == histories[cid][-1] and _summary_in(sent)
        assert all(f"call_{cid}_" in m["tool_call_id"] for m in sent if m["role"] == "tool")


def test_a_rewritten_or_cut_history_starts_its_conversation_over():
    handler = CompactionCallback(small_window_policy())
    history = chat(3)
    handler.compact_request({"messages": history, "metadata": {"conversation_id": "c"}})
    rewritten = copy.deepcopy(history)
    rewritten[-1]["content"] = "a different final answer"
    out = handler.compact_request({"messages": rewritten + [{"role": "user", "content": "go on"}],
                                   "metadata": {"conversation_id": "c"}})
    assert out["messages"][-2:] == [rewritten[-1], {"role": "user", "content": "go on"}]
    assert handler.conversations.session("c").live.next_ordinal == len(rewritten) + 1
    cut = history[:5]
    assert handler.compact_request({"messages": cut, "metadata": {"conversation_id": "c"}})["messages"] == cut
    assert handler.conversations.session("c").live.next_ordinal == 5


@pytest.mark.parametrize("bad, fault", [
    ({"role": "tool", "tool_call_id": "call_nobody", "content": "stray"}, "orphan_tool_result"),
    ({"role": "narrator", "content": "meanwhile"}, "unknown_role"),
])
def test_a_refused_message_names_the_integration_index_and_fault_and_changes_nothing(handler, bad, fault):
    history = chat(3)
    run_async(litellm.acompletion(model="gpt-4o-mini", messages=history, mock_response="ok",
                                    metadata={"conversation_id": "c"}))
    session = handler.conversations.session("c")
    before = (session.live.next_ordinal, session.total_tokens, list(session.live.tracker.open))
    broken = history + [{"role": "user", "content": "next"}, bad]
    with pytest.raises(IntegrationError) as err:
        handler.compact_request({"messages": broken, "metadata": {"conversation_id": "c"}})
    assert str(err.value).startswith(f"litellm: message {len(history) + 1}: ")
    assert err.value.index == len(history) + 1 and err.value.fault == fault
    assert (session.live.next_ordinal, session.total_tokens, list(session.live.tracker.open)) == before
    # through litellm the same error reaches the caller, and nothing is sent
    sent_before = len(handler.seen.sent)
    with pytest.raises(IntegrationError, match=f"litellm: message {len(history) + 1}"):
        run_async(litellm.acompletion(model="gpt-4o-mini", messages=broken, mock_response="ok",
                                        metadata={"conversation_id": "c"}))
    assert len(handler.seen.sent) == sent_before
    # the conversation carries on from where it was
    fine = history + [{"role": "user", "content": "next"}]
    assert handler.compact_request({"messages": fine, "metadata": {"conversation_id": "c"}})["messages"] == fine


def test_the_readme_snippet_runs():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    code = readme.split("### litellm", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert 'model="gpt-4o-mini"' in code
    # litellm's mock response stands in for the provider (no network here)
    code = code.replace('model="gpt-4o-mini"', 'model="gpt-4o-mini", mock_response="Reading it now."')
    before = list(litellm.callbacks)
    scope: dict = {}
    try:
        off_the_event_loop(exec, compile(code, "README.md", "exec"), scope)  # noqa: S102 - the documented snippet, as a user runs it
    finally:
        litellm.callbacks = before
    assert scope["reply"].choices[0].message.content == "Reading it now."
    assert scope["handler"].conversations.session("run-42").live.next_ordinal == 2
