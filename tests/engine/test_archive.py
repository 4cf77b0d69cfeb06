"""Archive backends and replay: originals come back exactly, corruption is detected."""
import itertools
import json
import os

import pytest

from compaction.archive import (
    ArchiveEntry,
    FileArchive,
    MemoryArchive,
    item_for,
    replay,
)
from compaction.compactor import Compactor
from compaction.errors import ArchiveError
from compaction.messages import Message, Provenance, canonical_json, wrap_originals
from tests.engine.helpers import coding_run

_handles = itertools.count(1)


def next_handle() -> str:
    """A fresh handle for entries these tests write by hand."""
    return f"ar_{next(_handles):016x}"


@pytest.fixture(params=["memory", "file"])
def archive(request, tmp_path):
    return MemoryArchive() if request.param == "memory" else FileArchive(tmp_path / "archive")


def test_entries_come_back_in_write_order_and_by_id(archive):
    msgs = wrap_originals(coding_run(rounds=3))
    first = ArchiveEntry(next_handle(), "s1", "evicted", [item_for(m) for m in msgs[:3]])
    second = ArchiveEntry(next_handle(), "s1", "evicted", [item_for(m) for m in msgs[3:5]])
    archive.write(first)
    archive.write(second)
    archive.write(ArchiveEntry(next_handle(), "other", "evicted", [item_for(msgs[0])]))
    assert [e.id for e in archive.entries("s1")] == [first.id, second.id]
    got = archive.get("s1", second.id)
    assert [i.raw for i in got.items] == [m.raw for m in msgs[3:5]]
    with pytest.raises(ArchiveError, match="no archive entry"):
        archive.get("s1", "ar_missing")


def test_replay_rebuilds_the_original_from_evicted_entries_and_live_context(archive):
    raws = coding_run(rounds=4)
    msgs = wrap_originals(raws)
    archive.write(ArchiveEntry(next_handle(), "s", "evicted", [item_for(m) for m in msgs[1:6]]))
    summary = Message({"role": "user", "content": "summary"}, "sum-1", Provenance.SUMMARY)
    live = [msgs[0], summary] + msgs[6:]
    assert canonical_json(replay(archive.entries("s"), live)) == canonical_json(raws)


def test_replay_prefers_the_offloaded_original_of_a_reduced_message(archive):
    raws = coding_run(rounds=2)
    msgs = wrap_originals(raws)
    entry = ArchiveEntry(next_handle(), "s", "offloaded", [item_for(msgs[3])])
    archive.write(entry)
    cleared = msgs[3].with_raw({**msgs[3].raw, "content": "[cleared]"}, reduction={"kind": "cleared", "archive_ref": entry.id})
    live = msgs[:3] + [cleared] + msgs[4:]
    assert replay(archive.entries("s"), live) == raws


def test_replay_reports_a_gap_instead_of_guessing():
    msgs = wrap_originals(coding_run(rounds=2))
    with pytest.raises(ArchiveError, match="missing original message"):
        replay([], [msgs[0]] + msgs[2:])


def test_replay_refuses_two_different_versions_of_one_original(archive):
    """An archived copy and the live copy of the same original disagree (an edit that bypassed
    the reduction bookkeeping): replay says so instead of returning either one as the original."""
    raws = coding_run(rounds=3)
    msgs = wrap_originals(raws)
    archive.write(ArchiveEntry(next_handle(), "s", "evicted", [item_for(m) for m in msgs[1:5]]))
    same = msgs[:]                                  # an overlap that agrees is fine
    assert replay(archive.entries("s"), same) == raws
    edited = msgs[:3] + [msgs[3].with_raw({**msgs[3].raw, "content": "edited in place"})] + msgs[4:]
    with pytest.raises(ArchiveError, match="two different versions of original message 3"):
        replay(archive.entries("s"), edited)


def test_replay_refuses_a_reduced_message_whose_original_was_never_archived(archive):
    """A cleared tool result without its offloaded original: replay must not hand back the
    cleared text as if it were what the agent sent."""
    raws = coding_run(rounds=2)
    msgs = wrap_originals(raws)
    cleared = msgs[3].with_raw({**msgs[3].raw, "content": "[cleared]"},
                               reduction={"kind": "cleared", "archive_ref": "ar_never_written"})
    with pytest.raises(ArchiveError, match=f"message {msgs[3].id} was reduced but its original is not in the archive"):
        replay(archive.entries("s"), msgs[:3] + [cleared] + msgs[4:])


def test_a_tampered_file_entry_is_detected(tmp_path):
    archive = FileArchive(tmp_path)
    msgs = wrap_originals(coding_run(rounds=1))
    entry = ArchiveEntry(next_handle(), "s", "evicted", [item_for(m) for m in msgs])
    archive.write(entry)
    path = archive.path("s")
    data = json.loads(path.read_text())
    data["items"][0]["raw"]["content"] = "edited"
    path.write_text(json.dumps(data) + "\n")
    with pytest.raises(ArchiveError, match="content hash"):
        archive.entries("s")


def test_non_ascii_content_round_trips_through_the_file_backend(tmp_path):
    archive = FileArchive(tmp_path)
    raw = {"role": "user", "content": "患者名は山田太郎です。한국어로 답해 주세요 \u2028 end"}
    msg = wrap_originals([raw])[0]
    archive.write(ArchiveEntry(next_handle(), "s", "evicted", [item_for(msg)]))
    assert archive.entries("s")[0].items[0].raw == raw


def test_one_compaction_makes_all_its_archive_entries_durable_with_one_fsync(tmp_path, monkeypatch):
    """Counts fsync calls through a wrapper; the real fsync still runs."""
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    archive = FileArchive(tmp_path / "archive")
    Compactor("default", archive=archive, session_id="s").compact(
        coding_run(rounds=40, output_chars=20_000), force=True)
    entries = archive.entries("s")
    assert len(entries) > 10 and {e.kind for e in entries} == {"offloaded", "evicted"}
    assert len(calls) == 1
