"""compaction: keep long LLM-agent conversations inside the context window.

    from compaction import Compactor
    outcome = Compactor("default").compact(messages, force=True)
    if outcome:
        send(outcome.context)
"""
from . import _env  # noqa: F401  (offline tokenizer files, local model table)
from .archive import ArchiveBackend, FileArchive, MemoryArchive, replay
from .branches import BranchSummarizer
from .compactor import Compactor, Hooks
from .errors import ArchiveError, CompactionError, PolicyError, SessionValidationError, SummaryError
from .hooks import get_hook, list_hooks, register_hook
from .messages import Message, Provenance
from .outcome import Outcome, Skipped
from .policy import Policy
from .presets import PRESETS, get_preset
from .session import CompactionSession
from .simulate import simulate

__all__ = [
    "ArchiveBackend", "ArchiveError", "BranchSummarizer", "get_hook", "list_hooks", "register_hook", "CompactionError", "CompactionSession", "Compactor", "FileArchive", "Hooks",
    "MemoryArchive", "Message", "Outcome", "PRESETS", "Policy", "PolicyError", "Provenance", "SessionValidationError",
    "Skipped", "SummaryError", "get_preset", "replay", "simulate",
]
