"""Adapters that put the engine inside agent frameworks.

Each framework lives in its own module and is imported only there, so ``import compaction``
never needs one installed: ``compaction.integrations.langchain`` needs ``pip install .[langchain]``.
Framework-free pieces they share: :mod:`.intake` (checking a batch of new messages before
any of it is appended) and :mod:`.remote` (the service's REST API as a small client).
"""
