"""Tool-output reduction: truncation on arrival, clearing before a model call, passes.

Pure functions (see :mod:`.pipeline`): they return the new messages and the archive entries
to write; the caller writes them. Recovery of what was archived is :mod:`compaction.archive_tools`.
"""
from .config import (
                     ReductionPolicy,
                     anthropic_clear_tool_uses,
                     default_reduction,
                     eino_reduction,
                     langchain_context_editing,
                     trpc_reduction,
)
from .hooks import ReductionHooks, Replacement, ToolDetail
from .pipeline import ReductionResult, before_call, on_append

__all__ = ["ReductionPolicy", "ReductionResult", "ReductionHooks", "Replacement", "ToolDetail", "on_append",
           "before_call", "default_reduction", "eino_reduction", "trpc_reduction", "anthropic_clear_tool_uses",
           "langchain_context_editing"]
