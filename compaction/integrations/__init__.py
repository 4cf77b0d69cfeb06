"""Adapters that put the engine or the service inside agent frameworks.

Each framework lives in its own module and is imported only there, so ``import compaction``
never needs one installed: ``compaction.integrations.langchain`` needs ``pip install .[langchain]``,
``compaction.integrations.openai_agents`` ``pip install .[openai-agents]``.
Framework-free pieces they share: :mod:`._common` (the integration-named error, and the check
of a batch of new messages before any of it is appended), :mod:`.remote` (the service's REST
API as a small client) and :mod:`.conversations` (one engine session per conversation, for
the litellm callback).
"""
