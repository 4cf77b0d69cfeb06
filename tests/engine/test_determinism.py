"""The same session through the same policy gives byte-identical output.

Archive handles are quoted in summaries and cleared-output placeholders, so a random handle
changes token counts, firing points and the bytes a provider's prompt cache keys on. A
replay stamps events and archive entries with its own logical clock (the message position),
so nothing is left out of the comparison.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compaction import get_preset, simulate
from compaction.archive import (
    ArchivedItem,
    ArchiveEntry,
    EntryIds,
    FileArchive,
    MemoryArchive,
    backend_has,
    entry_id,
)
from tests.corpus import load, require_corpus

SESSION = "claudecode_cctrace__f33cdb42.json"
PRESETS = ["default", "trpc", "langchain", "deepagents"]
ROOT = Path(__file__).resolve().parents[2]


def run_once(preset: str, window: int = 8000) -> str:
    """Report, final context, replay and archive of one simulate call, as canonical bytes."""
    data = load(SESSION)
    archive = MemoryArchive()
    policy = get_preset(preset).with_overrides({"context_window": window})
    report = simulate(data["messages"], policy, tools=data.get("tools"), archive=archive,
                      session_id=data["id"], keep_contexts=True, counterfactual=False)
    entries = [e.to_dict() for e in archive.entries(data["id"])]
    return json.dumps({"report": report, "archive": entries}, sort_keys=True, ensure_ascii=False)


@pytest.mark.parametrize("preset", PRESETS)
def test_three_simulate_runs_are_byte_identical(preset):
    require_corpus(SESSION)
    first, second, third = (run_once(preset) for _ in range(3))
    report = json.loads(first)["report"]
    assert report["compactions"], "the session must compact for the comparison to mean anything"
    assert any(c["archive_refs"] for c in report["compactions"])
    assert first == second == third


def test_another_process_with_another_hash_seed_gives_the_same_bytes():
    """Set iteration order changes with PYTHONHASHSEED; nothing written may depend on it."""
    require_corpus(SESSION)
    script = ("import sys; from tests.engine.test_determinism import run_once; "
              "sys.stdout.write(run_once('default'))")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True, encoding="utf-8")
    assert out.stdout == run_once("default")


def item(ordinal: int | None, text: str, message_id: str = "m1") -> ArchivedItem:
    return ArchivedItem(message_id, ordinal, {"role": "user", "content": text})


def test_handles_follow_content_and_position():
    a = entry_id("s1", "evicted", [item(1, "hello")])
    assert a == entry_id("s1", "evicted", [item(1, "hello")])
    assert a.startswith("ar_") and len(a) == 19
    assert len({a, entry_id("s2", "evicted", [item(1, "hello")]), entry_id("s1", "offloaded", [item(1, "hello")]),
                entry_id("s1", "evicted", [item(2, "hello")]), entry_id("s1", "evicted", [item(1, "hello!")]),
                entry_id("s1", "evicted", [item(1, "hello")], salt="sum-x")}) == 6


def test_a_repeated_entry_gets_a_counter_instead_of_a_colliding_handle():
    archive = MemoryArchive()
    first = EntryIds("s1", backend_has(archive, "s1")).new("evicted", [])
    archive.write(ArchiveEntry(first, "s1", "evicted", []))
    ids = EntryIds("s1", backend_has(archive, "s1"))
    second = ids.new("evicted", [])
    assert second == first + "-2"
    archive.write(ArchiveEntry(second, "s1", "evicted", []))
    # asking again for the same entry in one run (a rolled-back step redone) keeps its handle
    assert ids.new("evicted", []) == second
    assert EntryIds("s1", backend_has(archive, "s1")).new("evicted", []) == first + "-3"


def test_a_file_archive_lists_its_handles_for_the_allocator(tmp_path):
    archive = FileArchive(tmp_path)
    first = EntryIds("s1", backend_has(archive, "s1")).new("evicted", [item(1, "x")])
    archive.write(ArchiveEntry(first, "s1", "evicted", [item(1, "x")]))
    assert archive.entry_ids("s1") == {first}
    assert EntryIds("s1", backend_has(archive, "s1")).new("evicted", [item(1, "x")]) == first + "-2"
