"""LangChain v1 agent middleware: the policy runs before every model call of ``create_agent``.

    from langchain.agents import create_agent
    from compaction.integrations.langchain import CompactionMiddleware

    agent = create_agent(model, tools, middleware=[CompactionMiddleware("default")])

``before_model`` hands the engine only the messages the agent added since the previous
call (the state's list is our last answer plus what followed), so the check that decides
whether to compact reads running totals instead of recounting the whole list. When a
compaction (or a tool result truncated on arrival) changes the context, the state's
messages are replaced by the compacted ones; otherwise the state is left alone.

Two modes. Local: :class:`compaction.CompactionSession` in this process, with an optional
archive (``FileArchive``) for what was evicted. Remote: ``service_url`` and ``api_key``
name a compaction studio service; the history is imported once and appended to, runs
happen there (the dashboard shows them) and the compacted context is fetched back.

Messages cross between LangChain objects and the engine's OpenAI dicts without loss: tool
calls (arguments as JSON text), tool message ids, names and content blocks map to their
OpenAI fields, and whatever OpenAI has no field for (message ids, metadata, usage, status,
blocks OpenAI does not know) travels under the ``"langchain"`` key of the dict and is
restored from it. In local mode an original message that reaches the context unchanged
is handed back as the very object the agent produced. A tool artifact that is not JSON
is kept in local mode only (the archive and the service store JSON).

A message the engine refuses (an orphan tool result, a role it does not know) raises
:class:`~compaction.integrations._common.IntegrationError` naming this integration,
the message's index in the state's list and the fault; neither the state nor the
middleware's session is changed.

LangChain is imported here only: ``import compaction`` never needs it.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from .. import _env, jsontext
from ..archive import ArchiveBackend
from ..context import render_messages
from ..errors import CompactionError
from ..messages import PART_TYPES, CallTracker, JSONObject, RawMessage, content_hash
from ..outcome import Outcome
from ..policy import Policy
from ..presets import get_preset
from ..session import CompactionSession
from ._common import IntegrationError, check_new_messages
from .remote import ServiceClient

INTEGRATION = "LangChain CompactionMiddleware"
EXTRA_KEY = "langchain"
"""The key of an OpenAI dict under which LangChain-only fields travel."""

_DEFAULT_CLASS = {"system": "system", "developer": "system", "user": "human", "assistant": "ai", "tool": "tool"}
_ROLE_OF_TYPE = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


# -- LangChain message -> OpenAI dict ------------------------------------------------

def to_openai(message: BaseMessage, index: int = 0) -> RawMessage:
    """The OpenAI chat dict of one LangChain message, with what OpenAI cannot say under
    ``"langchain"``. Raises IntegrationError (fault ``unconvertible_message``) for a
    message that has no OpenAI form; roles are passed through for the engine to judge."""
    if isinstance(message, ChatMessage):
        role = message.role
    elif message.type in _ROLE_OF_TYPE:
        role = _ROLE_OF_TYPE[message.type]
        if role == "system" and message.additional_kwargs.get("__openai_role__") == "developer":
            role = "developer"
    else:
        raise IntegrationError(INTEGRATION, f"a {type(message).__name__} (type {message.type!r}) has no OpenAI chat role",
                               index=index, fault="unconvertible_message")
    content, exact = _content_to_openai(message.content)
    raw: RawMessage = {"role": role, "content": content}
    if message.name:
        raw["name"] = message.name
    extra: JSONObject = {}
    if message.id is not None:
        extra["id"] = message.id
    if _DEFAULT_CLASS.get(role) != message.type:
        extra["type"] = message.type
    if not exact:
        extra["content"] = message.content
    _put_json(extra, "additional_kwargs", message.additional_kwargs)
    _put_json(extra, "response_metadata", message.response_metadata)
    if isinstance(message, AIMessage):
        if message.tool_calls:
            raw["tool_calls"] = [_call_to_openai(call, index) for call in message.tool_calls]
        _put_json(extra, "invalid_tool_calls", message.invalid_tool_calls)
        if message.usage_metadata:
            _put_json(extra, "usage_metadata", dict(message.usage_metadata))
            usage = message.usage_metadata
            raw["usage"] = {"prompt_tokens": usage.get("input_tokens", 0),
                            "completion_tokens": usage.get("output_tokens", 0),
                            "total_tokens": usage.get("total_tokens", 0)}
    if isinstance(message, ToolMessage):
        raw["tool_call_id"] = message.tool_call_id
        if message.status != "success":
            extra["status"] = message.status
        if message.artifact is not None:
            _put_json(extra, "artifact", message.artifact)
    if extra:
        raw[EXTRA_KEY] = extra
    return raw


def _call_to_openai(call: Mapping[str, Any], index: int) -> JSONObject:
    try:
        arguments = json.dumps(call.get("args", {}), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise IntegrationError(INTEGRATION, f"tool call {call.get('id')!r} has arguments that are not JSON: {exc}",
                               index=index, fault="unconvertible_message") from None
    return {"id": call.get("id"), "type": "function", "function": {"name": call.get("name"), "arguments": arguments}}


def _put_json(extra: JSONObject, key: str, value: Any) -> None:
    """Keep a non-empty value that JSON can hold (the archive and the service store JSON)."""
    if not value:
        return
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return
    extra[key] = value


def _content_to_openai(content: Any) -> tuple[Any, bool]:
    """(OpenAI content, whether it is exactly the LangChain content). Text and OpenAI parts
    stay as they are; LangChain image blocks become ``image_url`` parts; any other block
    becomes a text part holding its JSON (so it is counted and summarized)."""
    if content is None or isinstance(content, str):
        return content, True
    parts: list[JSONObject] = []
    exact = isinstance(content, list)
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
            exact = False
        elif isinstance(block, dict) and block.get("type") in PART_TYPES:
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "image" and _image_url(block):
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block)}})
            exact = False
        else:
            parts.append({"type": "text", "text": json.dumps(block, ensure_ascii=False, sort_keys=True, default=str)})
            exact = False
    return parts, exact


def _image_url(block: Mapping[str, Any]) -> str | None:
    if isinstance(block.get("url"), str):
        url: str = block["url"]
        return url
    data = block.get("base64") or (block.get("data") if block.get("source_type") == "base64" else None)
    if isinstance(data, str):
        return f"data:{block.get('mime_type') or 'application/octet-stream'};base64,{data}"
    return None


# -- OpenAI dict -> LangChain message ------------------------------------------------

def from_openai(raw: RawMessage, fallback_id: str | None = None) -> AnyMessage:
    """The LangChain message of an OpenAI dict: the exact original when the dict came from
    :func:`to_openai` and its content was not edited since, else the closest message
    (an engine-written summary gets ``fallback_id`` as its id)."""
    extra: JSONObject = raw.get(EXTRA_KEY) or {}
    role = raw["role"]
    content: Any = raw.get("content")
    if "content" in extra and _content_to_openai(extra["content"])[0] == content:
        content = extra["content"]
    elif content is None:
        content = ""
    fields: JSONObject = {"content": content, "id": extra.get("id", fallback_id)}
    if raw.get("name"):
        fields["name"] = raw["name"]
    for key in ("additional_kwargs", "response_metadata"):
        if key in extra:
            fields[key] = extra[key]
    kind = extra.get("type", _DEFAULT_CLASS.get(role, "chat"))
    if kind == "ai":
        calls, invalid = _calls_from_openai(raw.get("tool_calls") or [])
        return AIMessage(**fields, tool_calls=calls, invalid_tool_calls=extra.get("invalid_tool_calls", []) + invalid,
                         usage_metadata=extra.get("usage_metadata"))
    if kind == "tool":
        return ToolMessage(**fields, tool_call_id=raw.get("tool_call_id", ""), status=extra.get("status", "success"),
                           artifact=extra.get("artifact"))
    if kind == "human":
        return HumanMessage(**fields)
    if kind == "system":
        if role == "developer" and "additional_kwargs" not in extra:
            fields["additional_kwargs"] = {"__openai_role__": "developer"}
        return SystemMessage(**fields)
    return ChatMessage(**fields, role=role)


def _calls_from_openai(calls: list[JSONObject]) -> tuple[list[JSONObject], list[JSONObject]]:
    """(tool calls, invalid tool calls): arguments that are not a JSON object (a reduction
    may have shortened them) are handed back as LangChain's invalid tool calls."""
    good: list[JSONObject] = []
    bad: list[JSONObject] = []
    for call in calls:
        fn = call.get("function") or {}
        text = fn.get("arguments") or "{}"
        error: str | None = None
        try:
            args = jsontext.loads(text)
        except ValueError as exc:  # not JSON, nested deeper than jsontext.MAX_DEPTH, or NaN
            args, error = None, f"arguments are not JSON: {exc}"
        if error is None and not isinstance(args, dict):
            error = "arguments are not a JSON object"
        if error is None:
            good.append({"name": fn.get("name", ""), "args": args, "id": call.get("id"), "type": "tool_call"})
        else:
            bad.append({"name": fn.get("name"), "args": text, "id": call.get("id"), "error": error,
                        "type": "invalid_tool_call"})
    return good, bad


# -- the agent's chat model as the summarizer ------------------------------------------

PROVIDER = "langchain"
_summarizers: dict[str, BaseChatModel] = {}
_summarizers_lock = threading.Lock()
_numbers = itertools.count(1)


def register_summarizer(model: BaseChatModel) -> str:
    """Make ``model`` callable as a summarizer; returns the model string a policy names
    (``langchain/<name>``). The engine reaches every summarizer through litellm, so the
    chat model is served by a litellm custom provider that calls it."""
    name = f"{type(model).__name__.lower()}-{next(_numbers)}"
    with _summarizers_lock:
        _summarizers[name] = model
    _install_provider()
    return f"{PROVIDER}/{name}"


def _install_provider() -> None:
    litellm: Any = _env.litellm()
    if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
        handler = _handler_class(litellm)()
        litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": PROVIDER, "custom_handler": handler}]
    litellm.utils.custom_llm_setup()


def _handler_class(litellm: Any) -> type[Any]:
    # litellm is imported lazily, so its base class is only known at run time.
    class LangChainChatModel(litellm.CustomLLM):  # type: ignore[misc]  # base class of a lazily imported module
        """litellm custom provider ``langchain``: a registered LangChain chat model writes the summary."""

        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            name = model.split("/", 1)[1] if model.startswith(PROVIDER + "/") else model
            with _summarizers_lock:
                chat = _summarizers.get(name)
            if chat is None:
                raise CompactionError(f"no LangChain chat model is registered as summarizer {name!r}")
            prompt = [from_openai({"role": m["role"], "content": m.get("content") or ""}) for m in messages]
            answer = chat.invoke(prompt)
            text = answer.text if isinstance(answer.text, str) else str(answer.content)
            usage = getattr(answer, "usage_metadata", None) or {}
            prompt_tokens = usage.get("input_tokens") or math.ceil(sum(len(str(m.get("content") or ""))
                                                                        for m in messages) / 4)
            completion_tokens = usage.get("output_tokens") or math.ceil(len(text) / 4)
            return litellm.ModelResponse(
                model=f"{PROVIDER}/{name}",
                choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                       "total_tokens": prompt_tokens + completion_tokens})

        async def acompletion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    return LangChainChatModel


# -- the middleware -------------------------------------------------------------------

def _policy_of(policy: Policy | str | dict[str, Any]) -> Policy:
    return get_preset(policy) if isinstance(policy, str) else Policy.load(policy)


class CompactionMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Runs a compaction policy over the agent's messages before each model call.

    ``policy``: a preset name, a policy dict or a :class:`~compaction.Policy`; its
    ``context_window`` (else the window of its ``model``) is the window kept. Local mode
    unless ``service_url`` is given: then ``api_key`` (a project key of the service) is
    required, runs happen in the service and ``archive`` is not used (the service keeps
    the archive). ``session_id`` names the session (the archive's key locally, the stored
    session's title remotely); a later conversation through the same middleware (a list
    that does not continue the last one) gets ``<session_id>-2``, ``-3``, ... ``summarizer``: a LangChain chat model (e.g. the
    agent's own) that writes summaries in local mode instead of the policy's summarizer
    model. ``remote_wait_seconds``: how long a call waits for a run the service queued.
    """

    def __init__(self, policy: Policy | str | dict[str, Any] = "default", *, service_url: str | None = None,
                 api_key: str | None = None, session_id: str | None = None, archive: ArchiveBackend | None = None,
                 summarizer: BaseChatModel | None = None, remote_wait_seconds: float = 30.0) -> None:
        super().__init__()
        self.policy = _policy_of(policy)
        self._policy_given = not (isinstance(policy, str) and policy == "default")
        self.session_id = session_id or "langchain"
        self.remote_wait_seconds = remote_wait_seconds
        self.client: ServiceClient | None = None
        if service_url is not None:
            if archive is not None:
                raise CompactionError(f"{INTEGRATION}: archive is for local mode; with service_url the "
                                      "service keeps the archive")
            if summarizer is not None:
                raise CompactionError(f"{INTEGRATION}: summarizer is for local mode; with service_url the "
                                      "service's policy names the summarizer")
            self.client = ServiceClient(service_url, api_key or "")
        elif api_key is not None:
            raise CompactionError(f"{INTEGRATION}: api_key was given without service_url")
        if summarizer is not None:
            data = self.policy.to_json()
            data["summarizer"]["model"] = register_summarizer(summarizer)
            self.policy = Policy.load(data)
        self.archive = archive
        self._lock = threading.Lock()
        self._conversations = 0
        self.session: CompactionSession | None = None
        # (the agent's message, the dict the engine holds) per ordinal still in the context
        self._originals: dict[int, tuple[AnyMessage, RawMessage]] = {}
        # where the state's list stood after our last answer: its length and last message
        self._known = 0
        self._last: AnyMessage | None = None
        # remote mode: the service's session and its tool-call bookkeeping
        self.remote_session_id: int | None = None
        self._tracker = CallTracker()

    # -- LangChain hooks --------------------------------------------------------------
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.process(state["messages"])

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        # The engine is synchronous (tokenizer, archive writes, summarizer call).
        return await asyncio.to_thread(self.process, state["messages"])

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """The agent's last answer follows no model call: record it (archive, service
        history) without compacting, so the history is whole."""
        return self.process(state["messages"], compact=False)

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.process, state["messages"], compact=False)

    # -- the work ---------------------------------------------------------------------
    def process(self, messages: Sequence[AnyMessage], *, compact: bool = True) -> dict[str, Any] | None:
        """The state update for ``messages`` (the agent state's list): None when the
        context stays as it is, else every message replaced by the compacted context.
        ``compact=False`` only records what is new."""
        if not messages:
            return None
        with self._lock:
            start = self._continues_at(messages)
            new = list(messages[start:])
            raws = [to_openai(m, start + i) for i, m in enumerate(new)]
            if self.client is not None:
                return self._process_remote(messages, start, raws, compact)
            return self._process_local(messages, start, new, raws, compact)

    def _continues_at(self, messages: Sequence[AnyMessage]) -> int:
        """How many leading messages of ``messages`` the engine already holds: our last
        answer when the list still starts with it (an O(1) check of its last message),
        else 0 (a new conversation, or something else rewrote the list)."""
        k = self._known
        if k == 0 or len(messages) < k or self._last is None:
            return 0
        seen = messages[k - 1]
        if self._last.id is not None:
            return k if seen.id == self._last.id else 0
        return k if seen is self._last else 0

    def _remember(self, messages: Sequence[AnyMessage]) -> None:
        self._known = len(messages)
        self._last = messages[-1] if messages else None

    def _conversation_id(self, number: int) -> str:
        """The session id of the ``number``-th conversation through this middleware."""
        return self.session_id if number == 1 else f"{self.session_id}-{number}"

    # local mode
    def _process_local(self, messages: Sequence[AnyMessage], start: int, new: list[AnyMessage],
                       raws: list[RawMessage], compact: bool) -> dict[str, Any] | None:
        session = self.session if start else None
        if session is None:
            session = CompactionSession(self.policy, archive=self.archive,
                                        session_id=self._conversation_id(self._conversations + 1))
        check_new_messages(INTEGRATION, session.live.tracker, raws, start)
        if session is not self.session:  # installed only once its first batch passed the check
            self._conversations += 1
            self.session, self._originals = session, {}
        edited = False
        for message, raw in zip(new, raws):
            held = session.append(raw)
            edited = edited or held.raw is not raw
            assert held.ordinal is not None  # an appended message is an original
            self._originals[held.ordinal] = (message, raw)
        self._remember(messages)  # the messages are the engine's now, whatever compaction does
        if not compact:
            return None
        outcome = session.before_model_call()
        if not edited and not isinstance(outcome, Outcome):
            return None
        return self._replace_with(self._render_local(session))

    def _render_local(self, session: CompactionSession) -> list[AnyMessage]:
        held = session.live.messages
        by_dict = {id(m.raw): m for m in held}
        out: list[AnyMessage] = []
        for raw in render_messages(held):
            m = by_dict.get(id(raw))
            original = self._originals.get(m.ordinal) if m is not None and m.ordinal is not None else None
            if original is not None and original[1] is raw:
                out.append(original[0])  # unchanged: the very object the agent produced
                continue
            tag = m.id if m is not None else content_hash(raw)[:16]
            out.append(from_openai(raw, f"{session.session_id}:{tag}"))
        live = {m.ordinal for m in held if m.ordinal is not None}
        self._originals = {k: v for k, v in self._originals.items() if k in live}
        return out

    def _replace_with(self, context: list[AnyMessage]) -> dict[str, Any]:
        self._remember(context)
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *context]}

    # remote mode
    def _process_remote(self, messages: Sequence[AnyMessage], start: int, raws: list[RawMessage],
                        compact: bool) -> dict[str, Any] | None:
        assert self.client is not None
        session_id = self.remote_session_id
        fresh = start == 0 or session_id is None
        if not raws:
            return None
        tracker = CallTracker() if fresh else self._tracker
        check_new_messages(INTEGRATION, tracker, raws, start)
        if session_id is None or fresh:
            # With a policy of its own the session is checked from the first append on (the
            # import would be checked against the project's policy, before the override).
            self._conversations += 1
            answer = self.client.import_session(raws, title=f"LangChain agent {self._conversation_id(self._conversations)}",
                                                external_id=None, auto_compact=compact and not self._policy_given)
            session_id = self.remote_session_id = int(answer["session"]["id"])
            if self._policy_given:
                name = f"langchain {self.session_id} {content_hash(self.policy.to_json())[:12]}"
                self.client.use_policy(session_id, name, self.policy.to_json())
            run = answer.get("compaction")
        else:
            run = self.client.append(session_id, raws, auto_compact=compact).get("compaction")
        for offset, raw in enumerate(raws):
            tracker.feed(raw, start + offset)
        self._tracker = tracker
        self._remember(messages)
        if not run:
            return None
        self.client.wait_for_run(run, self.remote_wait_seconds)
        served = self.client.context(session_id)
        if served is None:
            return None
        tag = served.tag
        context = [from_openai(raw, f"{self.session_id}:{tag}:{i}") for i, raw in enumerate(served.messages)]
        return self._replace_with(context)

