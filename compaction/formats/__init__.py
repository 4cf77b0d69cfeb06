"""Import formats: turn exported agent sessions and traces into OpenAI chat messages.

One module per format, each defining ``FORMAT`` (a :class:`Format`: ``detect`` and
``convert``); the module's docstring is the format's specification:

``openai`` (``openai.py``), ``openai_jsonl`` (``openai_jsonl.py``), ``anthropic``
(``anthropic.py``, blocks in ``_blocks.py``), ``claude_code_jsonl`` (``claude_code.py``),
and trace exports, whose model calls are folded into conversations by ``_calls.py``:
``langfuse`` (``langfuse.py``), ``phoenix`` (``phoenix.py``, OpenInference spans) and
``langsmith`` (``langsmith.py``).

Every result gets ``title`` (explicit title, else the first line of the first user text,
at most 80 characters), ``external_id`` and ``model`` when the input has them, and is
finally checked with :func:`compaction.messages.validate_session`.

Every fault raises :class:`compaction.errors.SessionValidationError` whose text names the
source file (``source=``), the line (JSONL: ``err.line``) or the input message index
(``err.index``), or the span, run or observation, and the fault (``err.fault``).
"""
from __future__ import annotations

from ._base import (
    METADATA_KEYS,
    TITLE_MAX,
    Format,
    FormatName,
    ImportedSession,
    Options,
    Sample,
    model_name,
    session_metadata,
)
from ._entry import convert, convert_file, convert_many, detect_format
from ._registry import FORMAT_LABELS, FORMATS, REGISTRY
from .openai_jsonl import JsonlMessages

__all__ = [
    "FORMATS", "FORMAT_LABELS", "METADATA_KEYS", "REGISTRY", "TITLE_MAX", "Format", "FormatName",
    "ImportedSession", "JsonlMessages", "Options", "Sample", "convert", "convert_file", "convert_many",
    "detect_format", "model_name", "session_metadata",
]
