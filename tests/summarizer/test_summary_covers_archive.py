"""A rolling summary names the archive entries it stands for (every one up to
``finalize.archive_refs_max``, then the oldest and the latest with a count), and keeps the
identifiers of what it replaced, on a real session replayed through the default policy."""
from __future__ import annotations

import json

import pytest
from summarizer_spans import CORPUS

from compaction import CompactionSession
from compaction.archive import MemoryArchive
from compaction.messages import Provenance
from compaction.outcome import Outcome
from compaction.presets import get_preset

SESSION = "minipr__deepseek_bench1__django__django-13265"


def replay(window: int, language: str = "en", **finalize) -> tuple[CompactionSession, MemoryArchive, list[Outcome]]:
    data = json.loads((CORPUS / f"{SESSION}.json").read_text(encoding="utf-8"))
    archive = MemoryArchive()
    policy = get_preset("default").with_overrides({"context_window": window, "finalize.language": language,
                                                   **{f"finalize.{k}": v for k, v in finalize.items()}})
    s = CompactionSession(policy, archive=archive, session_id="s")
    summaries = []
    for raw in data["messages"]:
        if raw["role"] == "assistant":
            out = s.before_model_call()
            if isinstance(out, Outcome) and out.summarized:
                summaries.append(out)
        s.append(raw)
    return s, archive, summaries


def summarized_entries(archive: MemoryArchive) -> list[str]:
    """Ids of the entries holding originals that a summary replaced, in the order written."""
    return [e.id for e in archive.entries("s") if e.kind == "evicted" and e.note.startswith("summarized by")]


def live_summary(s: CompactionSession) -> str:
    return next(m["content"] for m in s.context() if isinstance(m.get("content"), str)
                and m["content"].startswith(("[Conversation summary", "[对话摘要")))


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_live_summary_names_every_entry_it_covers_oldest_first(language):
    s, archive, summaries = replay(16_000, language, archive_refs_max=None)
    entries = summarized_entries(archive)
    assert len(summaries) >= 3 and len(entries) == len(summaries)

    text = live_summary(s)

    listed = ", ".join(entries)
    assert listed in text
    assert (f"{len(entries)} entries" if language == "en" else f"{len(entries)} 个条目") in text


@pytest.mark.parametrize("language", ["en", "zh"])
def test_past_the_cap_the_summary_names_the_oldest_and_latest_entries_and_counts_the_rest(language):
    """At an 8k window the session compacts dozens of times; naming every entry grew the
    summary by a handle each time. With a cap of 4 it names the oldest and the latest three
    and says how many more there are, and its size stops growing with the count."""
    s, archive, summaries = replay(8_000, language, archive_refs_max=4)
    entries = summarized_entries(archive)
    assert len(entries) > 8, len(entries)

    text = live_summary(s)

    line = next(part for part in text.splitlines() if entries[-1] in part)
    assert entries[0] in line and ", ".join(entries[-3:]) in line
    assert not any(e in text for e in entries[1:-3])
    hidden = len(entries) - 4
    assert (f"{len(entries)} entries" if language == "en" else f"{len(entries)} 个条目") in line
    assert (f"{hidden} more in between" if language == "en" else f"中间还有 {hidden} 个") in line
    assert "session_search" in line


def test_the_default_cap_keeps_the_handles_line_short_in_a_long_session():
    s, archive, _ = replay(8_000)
    entries = summarized_entries(archive)
    line = next(part for part in live_summary(s).splitlines() if entries[-1] in part)
    assert sum(e in line for e in entries) == 8 < len(entries)


def test_a_first_summary_names_its_one_entry_as_before():
    s, archive, summaries = replay(32_000)
    first = summaries[0].messages
    entry = summarized_entries(archive)[0]
    text = next(m.raw["content"] for m in first if m.provenance is Provenance.SUMMARY)

    assert f"archived as entry {entry};" in text


def test_summaries_keep_most_identifiers_of_what_they_replace_at_a_real_compression():
    _, _, summaries = replay(32_000)

    scores = [o.retention["referenced"]["score"] for o in summaries]
    assert all(o.compression >= 5 for o in summaries)
    assert sum(scores) / len(scores) >= 0.8, scores
