"""Small message spans shared by the summarizer tests (imported as a plain module:
this directory is on sys.path while its tests run)."""
from __future__ import annotations

from compaction.messages import Message, Provenance, original_id
from tests.corpus import CORPUS_DIR

CORPUS = CORPUS_DIR  # the shared corpus; the CORPUS_DIR environment variable moves it


def make_span(raws: list[dict], provenances: dict[int, Provenance] | None = None) -> list[Message]:
    provenances = provenances or {}
    out = []
    for i, raw in enumerate(raws):
        prov = provenances.get(i, Provenance.ORIGINAL)
        ordinal = i if prov in (Provenance.ORIGINAL, Provenance.PINNED) else None
        out.append(Message(raw, original_id(i) if ordinal is not None else f"x{i}", prov, ordinal))
    return out


def small_coding_span() -> list[Message]:
    """A short agent run: request, a tool call, its result, a conclusion."""
    return make_span([
        {"role": "user", "content": "Fix the failing test in tests/test_api.py without touching the fixtures."},
        {"role": "assistant", "content": "I'll run the test first.",
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "bash", "arguments": '{"command": "pytest tests/test_api.py -x"}'}}]},
        {"role": "tool", "tool_call_id": "c1",
         "content": "FAILED tests/test_api.py::test_get - KeyError: 'user_id'\n1 failed, 11 passed in 0.52s"},
        {"role": "assistant", "content": "The handler in src/api/views.py reads user_id before checking the session; "
                                         "I will guard it because anonymous requests have no user_id."},
    ])
