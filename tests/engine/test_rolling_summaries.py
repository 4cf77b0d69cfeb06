"""The engine's own summary rolls in every injection mode: the next summary folds it in,
so the context the agent sends never holds more than one summary.

Before this held, a summary merged into the system message counted as a pinned system
message: the cut kept it, and summaries piled up in the system prompt ([1], [2,1], [3,2,1]...)
until the window overflowed.
"""
from __future__ import annotations

import re

import pytest

from compaction import CompactionSession, Compactor, get_preset
from compaction.context import render_messages
from compaction.cut import pinned_indices
from compaction.messages import Message, Provenance, wrap_originals
from tests.corpus import load, require_corpus
from tests.engine.helpers import chat, coding_run

SESSION = "claudecode_cctrace__f33cdb42.json"
SUMMARY_OPEN = re.compile(r"\[Conversation summary #(\d+)\]")


def trpc(injection: str, window: int = 8000, trigger: int = 6000):
    policy = get_preset("trpc")
    data = policy.model_dump(mode="json")
    data["trigger"] = {"kind": "tokens", "threshold": trigger}
    data["context_window"] = window
    data["finalize"]["injection"] = injection
    return type(policy).load(data)


def summaries_in(context: list[dict]) -> list[int]:
    text = "\n".join(str(m.get("content")) for m in context)
    return [int(n) for n in SUMMARY_OPEN.findall(text)]


@pytest.mark.parametrize("injection", ["system", "user", "first_user"])
def test_at_most_one_summary_is_ever_sent(injection):
    require_corpus(SESSION)
    data = load(SESSION)
    session = CompactionSession(trpc(injection), session_id="roll", tools=data.get("tools"))
    most = 0
    for raw in data["messages"]:
        if raw["role"] == "assistant":
            session.before_model_call()
            found = summaries_in(session.context())
            assert len(found) <= 1, f"context holds summaries {found}"
            most = max(most, *found, 0)
        session.append(raw)
    assert most >= 3, "the replay must write several summaries for the test to mean anything"
    final = summaries_in(session.context())
    assert final == [most]
    kinds = [e.kind for e in session.archive.entries("roll")]
    assert kinds.count("previous_summary") == most - 1
    assert session.replay() == data["messages"]


def test_the_issue_reproduction_ends_with_one_summary_in_the_system_message():
    """`replay ... --preset trpc --context-window 8000 --trigger-tokens 6000` used to end with
    five summaries in the system message and a 12.7k peak in an 8k window."""
    require_corpus(SESSION)
    data = load(SESSION)
    session = CompactionSession(trpc("system"), session_id="roll")
    for raw in data["messages"]:
        if raw["role"] == "assistant":
            session.before_model_call()
        session.append(raw)
    context = session.context()
    assert context[0]["role"] == "system"
    assert len(SUMMARY_OPEN.findall(context[0]["content"])) == 1
    assert sum(1 for m in context if m["role"] == "system") == 1


def test_a_system_injected_summary_is_not_pinned_but_a_later_system_message_is():
    msgs = wrap_originals([{"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
                           {"role": "system", "content": "note from the harness"}])
    summary = Message({"role": "system", "content": "[Conversation summary #1]"}, "sum-x", Provenance.SUMMARY, None,
                      {"injection": "system"})
    context = [msgs[0], summary, *msgs[1:]]
    assert pinned_indices(context, 1, False) == {3}


def first_user_policy(**finalize):
    return {"finalize": {"injection": "first_user", "preserve_user_messages": False, **finalize},
            "cut": {"keep_messages": 4}, "summarizer": {"model": None}}


def test_first_user_mode_merges_the_summary_into_the_following_user_message():
    raws = chat(turns=8)
    out = Compactor(first_user_policy()).compact(raws, force=True)
    assert out.summarized
    rendered = out.context
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user", "assistant"]
    merged = rendered[1]["content"]
    assert merged.startswith("[Conversation summary #1]")
    assert merged.endswith(raws[-4]["content"])      # the first kept user turn, whole, after the summary
    assert not any(m.provenance is Provenance.ACKNOWLEDGEMENT for m in out.messages)
    summary = next(m for m in out.messages if m.provenance is Provenance.SUMMARY)
    assert summary.meta["injection"] == "first_user"
    # the stored list keeps the original untouched, so replay stays exact
    assert any(m.raw is raws[-4] or m.raw == raws[-4] for m in out.messages)


def test_first_user_mode_stands_alone_when_no_user_message_follows():
    raws = coding_run(rounds=12)
    out = Compactor(first_user_policy()).compact(raws, force=True)
    assert out.summarized
    rendered = out.context
    assert rendered[1]["role"] == "user" and rendered[1]["content"].startswith("[Conversation summary #1]")
    assert rendered[2]["role"] == "assistant"
    # a user message appended later is not pulled into the summary: the merge target was fixed
    later = out.messages + wrap_originals([{"role": "user", "content": "next"}], start=len(raws))
    again = render_messages(later)
    assert again[-1] == {"role": "user", "content": "next"}
    assert again[1] == rendered[1]


def test_first_user_summaries_roll_too():
    raws = chat(turns=12)
    compactor = Compactor(first_user_policy())
    first = compactor.compact(raws, force=True)
    more = first.messages + wrap_originals(chat(turns=6)[1:], start=len(raws))
    second = compactor.compact(more, force=True)
    assert summaries_in(second.context) == [2]
