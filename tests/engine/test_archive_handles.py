"""Archive handles, records and the file backend's edges: what a context quotes (``ar_...``)
names one entry and stays the same run after run, what is stored reads back field for field,
and an unreadable file says where it is broken (test_archive.py covers replay)."""
from __future__ import annotations

import hashlib
import json

import pytest

from compaction.archive import (
    ArchivedItem,
    ArchiveEntry,
    EntryIds,
    FileArchive,
    MemoryArchive,
    backend_has,
    entry_id,
    item_for,
    items_hash,
    replay,
    write_entries,
)
from compaction.errors import ArchiveError, CompactionError
from compaction.messages import Message, Provenance, wrap_originals

RAWS = [{"role": "user", "content": "fix the build"}, {"role": "assistant", "content": "looking"}]


def _items(raws=RAWS, start: int = 0) -> list[ArchivedItem]:
    return [item_for(m) for m in wrap_originals(raws, start)]


def test_a_handle_is_short_stable_and_changes_with_everything_that_places_the_entry():
    items = _items()
    base = entry_id("s1", "evicted", items)
    assert base.startswith("ar_") and len(base) == 19 and int(base[3:], 16) >= 0
    assert entry_id("s1", "evicted", _items()) == base  # the same entry again: the same handle
    others = [
        entry_id("s2", "evicted", items),
        entry_id("s1", "offloaded", items),
        entry_id("s1", "evicted", items, salt="m_summary_1"),
        entry_id("s1", "evicted", _items(start=1)),                               # other ordinals
        entry_id("s1", "evicted", [ArchivedItem("other", 0, RAWS[0]), items[1]]),  # other message id
        entry_id("s1", "evicted", _items([RAWS[0], {"role": "assistant", "content": "looking!"}])),
        entry_id("s1", "evicted", items[:1]),
        entry_id("s1", "evicted", items[::-1]),
    ]
    assert base not in others and len(set(others)) == len(others)
    # where one input ends and the next begins is part of the digest
    assert entry_id("s1", "evicted", items, salt="") != entry_id("s1e", "victed", items)
    # a lone surrogate in an id or in content still gets a handle
    assert entry_id("s\ud800", "evicted", [ArchivedItem("m\udc00", 0, {"role": "user", "content": "\ud800"})])


def test_a_taken_handle_gets_a_counter_and_asking_again_gives_the_same_one():
    items = _items()
    base = entry_id("s", "evicted", items)
    held = {base, f"{base}-2"}
    probes: list[str] = []

    def exists(h: str) -> bool:
        probes.append(h)
        return h in held

    ids = EntryIds("s", exists)
    first = ids.new("evicted", items)
    assert first == f"{base}-3" and probes == [base, f"{base}-2", f"{base}-3"]
    assert ids.new("evicted", items) == first  # a step redone: no second handle
    other = ids.new("evicted", _items(start=5))
    assert other == entry_id("s", "evicted", _items(start=5))
    assert ids.taken == {first, other}
    salted = ids.new("evicted", items, salt="x")
    assert salted == entry_id("s", "evicted", items, salt="x")
    assert EntryIds("s").new("evicted", items) == base  # no backend to ask


def test_two_allocators_do_not_hand_out_one_handle_twice_within_one_run():
    items = _items()
    ids = EntryIds("s")
    ids.taken.add(entry_id("s", "evicted", items))
    assert ids.new("evicted", items) == entry_id("s", "evicted", items) + "-2"


@pytest.mark.parametrize("backend", ["memory", "file"])
def test_the_existence_probe_asks_a_listing_backend_once(backend, tmp_path):
    archive = MemoryArchive() if backend == "memory" else FileArchive(tmp_path)
    entry = ArchiveEntry("ar_0000000000000001", "s", "evicted", _items())
    archive.write(entry)
    calls = []
    listing = archive.entry_ids
    archive.entry_ids = lambda sid: (calls.append(sid), listing(sid))[1]  # type: ignore[method-assign]
    exists = backend_has(archive, "s")
    assert exists(entry.id) is True
    assert exists("ar_ffffffffffffffff") is False
    assert calls == ["s"]
    assert backend_has(archive, "other")(entry.id) is False


def test_the_existence_probe_uses_get_on_a_backend_that_cannot_list():
    class GetOnly:
        def __init__(self) -> None:
            self.inner = MemoryArchive()
            self.asked: list[tuple[str, str]] = []

        def get(self, session_id: str, eid: str) -> ArchiveEntry:
            self.asked.append((session_id, eid))
            return self.inner.get(session_id, eid)

    archive = GetOnly()
    archive.inner.write(ArchiveEntry("ar_1", "s", "evicted", _items()))
    exists = backend_has(archive, "s")  # type: ignore[arg-type]
    assert exists("ar_1") is True and exists("ar_2") is False
    assert archive.asked == [("s", "ar_1"), ("s", "ar_2")]


def test_an_item_keeps_the_ordinal_of_originals_only_and_any_raw_or_tool_name_given():
    orig = wrap_originals([{"role": "tool", "tool_call_id": "c1", "content": "out"}], 4)[0]
    item = item_for(orig, tool_name="bash")
    assert (item.message_id, item.ordinal, item.raw, item.tool_call_id, item.tool_name) == (
        orig.id, 4, orig.raw, "c1", "bash")
    assert item_for(orig).tool_name is None
    cut = {"role": "tool", "tool_call_id": "c1", "content": "o"}
    assert item_for(orig, raw=cut).raw == cut
    summary = Message({"role": "user", "content": "summary"}, "m_s", Provenance.SUMMARY, 7)
    assert item_for(summary).ordinal is None


def test_an_entry_reads_back_field_for_field_and_defaults_what_older_lines_lack(tmp_path):
    items = _items() + [item_for(wrap_originals([{"role": "tool", "tool_call_id": "c9", "content": "x"}], 2)[0],
                                 tool_name="grep")]
    entry = ArchiveEntry("ar_1", "s", "offloaded", items, run_id="r7", created_at=12.5, note="cleared")
    assert entry.content_hash == items_hash(items)
    record = entry.to_dict()
    assert set(record) == {"id", "session_id", "kind", "run_id", "created_at", "note", "content_hash", "items"}
    assert record["items"][2] == {"message_id": items[2].message_id, "ordinal": 2, "raw": items[2].raw,
                                  "tool_call_id": "c9", "tool_name": "grep"}
    back = ArchiveEntry.from_dict(json.loads(json.dumps(record)))
    assert back.to_dict() == record
    old = {"id": "ar_2", "session_id": "s", "kind": "evicted",
           "items": [{"message_id": i.message_id, "raw": i.raw} for i in items[:1]]}
    loaded = ArchiveEntry.from_dict(old)
    assert (loaded.run_id, loaded.created_at, loaded.note) == (None, 0.0, "")
    assert loaded.items[0].ordinal is None and loaded.items[0].tool_call_id is None
    assert loaded.content_hash == items_hash(loaded.items)


def test_an_entry_of_an_unknown_kind_or_with_a_wrong_hash_is_refused():
    with pytest.raises(CompactionError, match="unknown archive kind 'deleted'"):
        ArchiveEntry("ar_1", "s", "deleted", _items())
    record = ArchiveEntry("ar_1", "s", "evicted", _items()).to_dict()
    record["content_hash"] = items_hash(_items()[:1])
    with pytest.raises(ArchiveError, match="archive entry ar_1 does not match its content hash"):
        ArchiveEntry.from_dict(record)  # type: ignore[arg-type]


def test_the_content_hash_separates_items_and_reflects_every_byte():
    a, b = _items()
    assert items_hash([a, b]) != items_hash([b, a])
    assert items_hash([a]) != items_hash([a, a])
    assert items_hash([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # sha256 of nothing
    assert len(items_hash([a])) == 64


def test_the_size_of_an_entry_is_its_canonical_text():
    items = _items()
    assert ArchiveEntry("ar_1", "s", "evicted", items).size_chars == sum(len(i.canonical) for i in items) > 0


def test_entries_of_one_compaction_are_written_together_or_one_by_one():
    class OneByOne:
        def __init__(self) -> None:
            self.written: list[str] = []

        def write(self, entry: ArchiveEntry) -> str:
            self.written.append(entry.id)
            return entry.id

    class Together(OneByOne):
        def write_many(self, entries: list[ArchiveEntry]) -> list[str]:
            self.written.append("+".join(e.id for e in entries))
            return [e.id for e in entries]

    entries = [ArchiveEntry(f"ar_{i}", "s", "evicted", _items(start=2 * i)) for i in range(3)]
    plain, batch = OneByOne(), Together()
    write_entries(plain, entries)
    write_entries(batch, entries)
    assert plain.written == ["ar_0", "ar_1", "ar_2"]
    assert batch.written == ["ar_0+ar_1+ar_2"]
    write_entries(batch, [])
    assert batch.written == ["ar_0+ar_1+ar_2"]  # nothing to write: the backend is not called


def test_a_memory_archive_never_overwrites_an_entry():
    archive = MemoryArchive()
    archive.write(ArchiveEntry("ar_1", "s", "evicted", _items()))
    with pytest.raises(ArchiveError, match="archive entry ar_1 already exists"):
        archive.write(ArchiveEntry("ar_1", "s", "evicted", _items(start=3)))
    archive.write(ArchiveEntry("ar_1", "t", "evicted", _items()))  # another session's bucket
    assert archive.entry_ids("s") == {"ar_1"} and archive.entry_ids("nobody") == set()


def test_file_names_keep_safe_characters_and_replace_the_rest(tmp_path):
    archive = FileArchive(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()
    assert archive.path("Sess-1_v2.x").name == "Sess-1_v2.x.jsonl"
    assert archive.path("../../etc/passwd").name == ".._.._etc_passwd.jsonl"
    assert archive.path("a b/c").parent == tmp_path / "a" / "b"
    assert archive.path("").name == "session.jsonl"
    FileArchive(tmp_path / "a" / "b")  # an existing directory is fine


def test_the_file_archive_writes_one_line_per_entry_and_lists_handles_without_hashing(tmp_path):
    archive = FileArchive(tmp_path)
    assert archive.entries("s") == [] and archive.entry_ids("s") == set()
    archive.write(ArchiveEntry("ar_1", "s", "evicted", _items()))
    archive.write_many([ArchiveEntry("ar_2", "s", "evicted", _items(start=2)),
                        ArchiveEntry("ar_3", "t", "evicted", _items()),
                        ArchiveEntry("ar_4", "s", "previous_summary", _items([{"role": "user", "content": "naïve"}], 4))])
    lines = archive.path("s").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["ar_1", "ar_2", "ar_4"]
    assert all(", " not in line and '": ' not in line for line in lines)  # compact separators
    assert [e.id for e in archive.entries("t")] == ["ar_3"]
    with archive.path("s").open("a", encoding="utf-8") as fh:
        fh.write("\n   \n")  # blank lines (an editor, a crash between lines) are skipped, not the end
    archive.write(ArchiveEntry("ar_5", "s", "evicted", _items([{"role": "user", "content": "résumé ☃"}], 6)))
    assert archive.entry_ids("s") == {"ar_1", "ar_2", "ar_4", "ar_5"}
    assert [e.id for e in archive.entries("s")] == ["ar_1", "ar_2", "ar_4", "ar_5"]
    stored = archive.path("s").read_text(encoding="utf-8")
    assert "naïve" in stored and "résumé ☃" in stored  # stored as text a person can grep, not as escapes
    assert archive.get("s", "ar_2").items[0].ordinal == 2
    with pytest.raises(ArchiveError, match="no archive entry 'ar_3' in session 's'"):
        archive.get("s", "ar_3")


@pytest.mark.parametrize("line", ["not json", '{"kind": "evicted"}', "[1, 2]"])
def test_an_unreadable_archive_line_names_its_file_and_line(tmp_path, line):
    archive = FileArchive(tmp_path)
    archive.write(ArchiveEntry("ar_1", "s", "evicted", _items()))
    with archive.path("s").open("a", encoding="utf-8") as fh:
        fh.write("\n" + line + "\n")
    where = f"{archive.path('s')}:3: unreadable archive line"
    with pytest.raises(ArchiveError, match=where):
        archive.entry_ids("s")
    with pytest.raises(ArchiveError, match=where):
        archive.entries("s")


def test_a_stored_content_hash_is_the_sha256_of_each_canonical_item_and_a_newline():
    """Entries written by earlier versions are verified against this hash on every read, so
    its recipe cannot change."""
    a, b = _items()
    assert items_hash([a, b]) == hashlib.sha256(f"{a.canonical}\n{b.canonical}\n".encode()).hexdigest()
    odd = ArchivedItem("m", 0, {"role": "user", "content": "naïve ☃"})
    assert items_hash([odd]) == hashlib.sha256((odd.canonical + "\n").encode("utf-8")).hexdigest()


def test_replay_skips_engine_written_items_and_accepts_an_original_archived_twice_alike():
    msgs = wrap_originals([{"role": "user", "content": f"u{i}"} for i in range(4)])
    ack = ArchivedItem("m_ack", None, {"role": "assistant", "content": "noted"})
    entries = [
        ArchiveEntry("ar_1", "s", "evicted", [ack, item_for(msgs[0]), item_for(msgs[1])]),
        ArchiveEntry("ar_2", "s", "evicted", [item_for(msgs[1]), item_for(msgs[2])]),  # msgs[1] again, same
    ]
    assert replay(entries, msgs[3:]) == [m.raw for m in msgs]


def test_replay_ignores_a_live_copy_that_is_not_the_original_even_with_its_ordinal():
    msgs = wrap_originals([{"role": "user", "content": "keep the tests green"},
                           {"role": "assistant", "content": "ok"}])
    copy = Message({"role": "user", "content": "[earlier request] keep the tests green"}, "m_p0",
                   Provenance.PRESERVED, 0)
    entries = [ArchiveEntry("ar_1", "s", "evicted", [item_for(msgs[0])])]
    assert replay(entries, [copy, msgs[1]]) == [m.raw for m in msgs]


def test_a_replay_gap_names_the_first_ten_missing_positions():
    msgs = wrap_originals([{"role": "user", "content": f"u{i}"} for i in range(14)])
    with pytest.raises(ArchiveError) as err:
        replay([], msgs[12:])
    assert str(err.value) == f"replay is missing original message(s) at position(s) {list(range(10))}"
