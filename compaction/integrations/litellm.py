"""A litellm callback that compacts ``messages`` before litellm sends them.

    from compaction.integrations.litellm import CompactionCallback
    handler = CompactionCallback(policy="default")
    litellm.callbacks = [handler]
    await litellm.acompletion(model=..., messages=history, metadata={"conversation_id": "run-42"})

The caller keeps and resends its full history; each call's ``messages`` are replaced by the
compacted context of that conversation (:mod:`compaction.integrations.conversations`:
in-process, running totals, O(new messages) per call). Which hook does the work:

- ``litellm.acompletion`` and the Router: ``async_pre_call_deployment_hook``;
- the litellm proxy (``litellm_settings.callbacks`` in its config): ``async_pre_call_hook``;
- ``litellm.completion`` (synchronous) runs no request hook, but it does run a prompt
  manager's ``get_chat_completion_prompt`` when the call names a ``prompt_id``: a call with
  ``prompt_id="compaction"`` (or ``"compaction:<conversation id>"``) is compacted there.
  :meth:`CompactionCallback.completion` does the same without the argument.

A request compacted once is marked in its ``metadata`` (``compaction_conversation``), so
the proxy's own deployment hook, retries and fallbacks do not compact it again.

Importing this module imports litellm (seconds); the engine-side work lives in
``conversations.py``, which does not.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import litellm
from litellm.integrations.custom_logger import CustomLogger
from litellm.integrations.custom_prompt_management import CustomPromptManagement

from ..archive import ArchiveBackend
from ..compactor import Hooks
from ..policy import Policy
from .conversations import ConversationCompactor

INTEGRATION = "litellm"
# metadata key a caller sets to name its conversation (else the leading messages do)
CONVERSATION_KEY = "conversation_id"
# metadata key set on a request once its messages are compacted
APPLIED_KEY = "compaction_conversation"
# the prompt_id that asks a synchronous litellm.completion for compaction ("compaction:<id>"
# also names the conversation)
PROMPT_ID = "compaction"
# call types whose request carries chat ``messages``
CHAT_CALL_TYPES = frozenset({"completion", "acompletion"})


class CompactionCallback(CustomPromptManagement):
    """Compacts chat requests in-process with the engine; see the module docstring."""

    def __init__(self, policy: Policy | str | dict[str, Any] = "default", *, archive: ArchiveBackend | None = None,
                 hooks: Hooks | None = None, max_conversations: int = 256) -> None:
        CustomLogger.__init__(self)  # CustomPromptManagement's own __init__ does not chain to it
        super().__init__()
        self.conversations = ConversationCompactor(policy, integration=INTEGRATION, archive=archive, hooks=hooks,
                                                   max_conversations=max_conversations)

    # -- the work, shared by every hook --------------------------------------------------
    def compact_request(self, data: dict[str, Any]) -> dict[str, Any]:
        """A copy of the request ``data`` with its ``messages`` compacted (``data`` itself,
        when there is nothing to do: no chat messages, or compacted already)."""
        messages = data.get("messages")
        metadata = data.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        if not isinstance(messages, list) or not messages or metadata.get(APPLIED_KEY):
            return data
        given = metadata.get(CONVERSATION_KEY) or _conversation_in(data.get("prompt_id"))
        conversation = str(given) if given else None
        tools = data.get("tools")
        compacted = self.conversations.compact(messages, conversation_id=conversation,
                                               tools=tools if isinstance(tools, list) else None)
        out = dict(data)
        if _asks_for_compaction(out.get("prompt_id")):
            # done here: the synchronous call litellm makes inside an asynchronous one must
            # not find it and compact the compacted list again
            del out["prompt_id"]
        out["messages"] = compacted
        out["metadata"] = {**metadata, APPLIED_KEY: conversation or "leading-messages"}
        return out

    # -- litellm's hooks -----------------------------------------------------------------
    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        if _call_type_name(call_type) not in CHAT_CALL_TYPES:
            return None
        # the engine's work (and a summary's model call) must not hold up the event loop
        return await asyncio.to_thread(self.compact_request, kwargs)

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict[str, Any],
                                  call_type: Any) -> dict[str, Any]:
        if _call_type_name(call_type) not in CHAT_CALL_TYPES:
            return data
        return await asyncio.to_thread(self.compact_request, data)

    # -- synchronous litellm.completion: the prompt-management hook ----------------------
    @property
    def integration_name(self) -> str:
        return "compaction"

    def should_run_prompt_management(self, prompt_id: str | None, prompt_spec: Any,
                                     dynamic_callback_params: Any) -> bool:
        return _asks_for_compaction(prompt_id)

    def get_chat_completion_prompt(self, model: str, messages: list[Any], non_default_params: dict[str, Any],
                                   prompt_id: str | None, prompt_variables: dict[str, Any] | None,
                                   dynamic_callback_params: Any, prompt_spec: Any = None,
                                   prompt_label: str | None = None, prompt_version: int | None = None,
                                   ignore_prompt_manager_model: bool | None = False,
                                   ignore_prompt_manager_optional_params: bool | None = False,
                                   ) -> tuple[str, list[Any], dict[str, Any]]:
        if not _asks_for_compaction(prompt_id) or not messages:
            return model, messages, non_default_params
        tools = non_default_params.get("tools")
        compacted = self.conversations.compact(list(messages), conversation_id=_conversation_in(prompt_id),
                                               tools=tools if isinstance(tools, list) else None)
        return model, compacted, non_default_params

    async def async_get_chat_completion_prompt(self, model: str, messages: list[Any], non_default_params: dict[str, Any],
                                               *args: Any, **kwargs: Any) -> tuple[str, list[Any], dict[str, Any]]:
        # Asynchronous calls are compacted by the deployment hook (which sees their metadata):
        # compacting here too would feed a compacted context back as the conversation.
        return model, messages, non_default_params

    # -- synchronous callers -----------------------------------------------------------
    def completion(self, completion: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
        """``litellm.completion(**kwargs)`` with the messages compacted first."""
        call = completion if completion is not None else litellm.completion
        return call(**self.compact_request(kwargs))


def _asks_for_compaction(prompt_id: Any) -> bool:
    return isinstance(prompt_id, str) and (prompt_id == PROMPT_ID or prompt_id.startswith(PROMPT_ID + ":"))


def _conversation_in(prompt_id: Any) -> str | None:
    """The conversation id a ``prompt_id`` of ``compaction:<id>`` names (None otherwise)."""
    if not _asks_for_compaction(prompt_id):
        return None
    return prompt_id.partition(":")[2] or None


def _call_type_name(call_type: Any) -> str:
    """litellm passes a ``CallTypes`` member to one hook and its string value to the other."""
    value = getattr(call_type, "value", call_type)
    return value if isinstance(value, str) else ""
