"""The whole pipeline through the public API: outcome, ledger, rolling runs, failures."""
import copy
import dataclasses

import pytest

from compaction import (
    CompactionSession,
    Compactor,
    Hooks,
    MemoryArchive,
    Policy,
    SummaryError,
    get_preset,
)
from compaction.context import tool_pairs_ok
from compaction.ledger import LedgerRow
from compaction.messages import Provenance, canonical_json, wrap_originals
from tests.corpus import session
from tests.engine.helpers import chat, coding_run, tool_round
from tests.support.llm_server import ScriptedLLMServer, error, ok


def small_policy(**over):
    data = {"name": "test", "context_window": 8000, "trigger": {"kind": "tokens", "threshold": 3000},
            "cut": {"keep_messages": 6, "keep_fraction": 0.25}}
    data.update(over)
    return Policy.load(data)


def test_forced_compaction_shrinks_the_context_and_accounts_for_every_message():
    raws = session("minipr__deepseek_bench1__django__django-11099")["messages"]
    before = copy.deepcopy(raws)
    out = Compactor(small_policy(), session_id="s").compact(raws, force=True)
    assert out and out.summarized
    assert raws == before, "the caller's messages must never be modified"
    assert out.tokens_after["total"] < out.tokens_before["total"] / 2
    assert out.tokens_after["summary"] > 0 and out.tokens_before["summary"] == 0
    # the counts are of the messages sent: the re-inserted task statement is rendered inside
    # the summary's user turn, so the engine holds one message more than is sent
    assert out.messages_before == len(raws) and out.messages_after == len(out.context) == len(out.messages) - 1
    assert tool_pairs_ok(out.context)
    assert len(out.ledger) == len(raws)
    fates = {row["fate"] for row in out.ledger}
    assert {"kept", "summarized"} <= fates
    assert all(row["tokens_after"] == 0 for row in out.ledger if row["fate"] == "summarized")
    # the task statement (the only user turn) was evicted and re-inserted verbatim
    assert any(row["fate"] == "preserved" for row in out.ledger)
    assert out.context[0]["role"] == "system" and out.context[1]["role"] == "user"
    assert "[Conversation summary #1]" in out.context[1]["content"]
    assert out.archive_refs[-1] in out.context[1]["content"]
    assert out.extractive and out.model == "extractive/default"
    assert out.retention["referenced"]["total"] > 0
    assert out.compression > 1
    # (the overflow guard cut oversized tool results first: this context is over the window)
    kinds = [e["type"] for e in out.events if not e["type"].startswith("tool_output")]
    assert kinds[0] == "before_summarize" and "generate_summary" in kinds and kinds[-1] == "after_summarize"


def test_below_the_trigger_nothing_happens_and_the_reason_says_why():
    out = Compactor(small_policy()).compact(chat(turns=2))
    assert not out
    assert out.reason.startswith("not triggered: tokens") and "3000" in out.reason


def test_three_rolling_runs_fold_summaries_and_replay_exactly():
    raws = session("minipr__deepseek_bench1__django__django-12113")["messages"]
    s = CompactionSession(small_policy(), session_id="roll")
    done = 0
    for raw in raws:
        if raw["role"] == "assistant" and s.should_compact().fired:
            out = s.compact()
            # the latest round stays whole, so a summary that would free too little waits
            assert out or out.wait_tokens
            done += bool(out)
        s.append(raw)
    assert done >= 3
    summaries = [m for m in s.live.messages if m.provenance is Provenance.SUMMARY]
    assert len(summaries) == 1 and summaries[0].meta["number"] == done
    kinds = [e.kind for e in s.archive.entries("roll")]
    assert kinds.count("previous_summary") == done - 1 and kinds.count("evicted") == done
    assert canonical_json(s.replay()) == canonical_json(raws)
    assert tool_pairs_ok(s.context())


def test_a_failed_summary_changes_nothing_and_writes_no_archive(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    raws = coding_run(rounds=20)
    archive = MemoryArchive()
    with ScriptedLLMServer() as server:
        server.script(error(500), error(500))
        # no key configured: a local OpenAI-compatible server is reached without one
        policy = small_policy(summarizer={"model": "openai/test-model", "api_base": server.api_base,
                                          "retry": {"max_retries": 1, "backoff_base": 0.001}})
        s = CompactionSession(policy, archive=archive, session_id="f")
        s.extend(raws)
        before = canonical_json(s.context())
        with pytest.raises(SummaryError) as err:
            s.compact(force=True)
        assert len(err.value.attempts) == 2 and len(server.requests) == 2
    assert canonical_json(s.context()) == before
    assert archive.entries("f") == []


def test_pinned_messages_stay_verbatim_after_the_summary():
    raws = coding_run(rounds=20)
    c = Compactor(small_policy())
    msgs = wrap_originals(raws)
    msgs[7].meta["pinned"] = True
    out = c.compact(msgs, force=True)
    ids = [m.id for m in out.messages]
    assert msgs[6].id in ids and msgs[7].id in ids  # the call and its result
    assert next(m for m in out.messages if m.id == msgs[7].id).provenance is Provenance.PINNED
    assert tool_pairs_ok(out.context)


def test_pin_first_user_message_keeps_the_task_statement_in_place():
    out = Compactor(small_policy(pin_first_user_message=True,
                                 finalize={"preserve_user_messages": False})).compact(coding_run(rounds=20), force=True)
    assert any(row["fate"] == "pinned" for row in out.ledger)
    assert any(m["role"] == "user" and m["content"].startswith("Fix the bug") for m in out.context)


def test_system_injection_merges_the_summary_into_the_system_message():
    out = Compactor(small_policy(finalize={"injection": "system"})).compact(chat(turns=20), force=True)
    assert out.context[0]["role"] == "system"
    assert out.context[0]["content"].startswith("You help.")
    assert "[Conversation summary #1]" in out.context[0]["content"]
    assert sum(1 for m in out.context if m["role"] == "system") == 1
    assert not any(m["role"] == "assistant" and "Understood" in (m["content"] or "") for m in out.context)


def test_a_custom_finalizer_can_wrap_the_default_one():
    seen = {}

    def finalizer(inp, default):
        seen["evicted"] = len(inp.evicted)
        messages = default(inp)
        return messages[:1] + messages[1:]

    out = Compactor(small_policy(), hooks=Hooks(finalizer=finalizer)).compact(chat(turns=20), force=True)
    assert out and seen["evicted"] == out.evicted_messages


def test_a_finalizer_that_breaks_tool_pairs_is_refused_and_nothing_is_written():
    archive = MemoryArchive()

    def broken(inp, default):
        return [m for m in default(inp) if m.role != "tool"]

    # the tail bounds as given (three rounds): the calls before the last lose their results
    policy = small_policy(landing={"move_cut": False})
    with pytest.raises(Exception, match="tool call/result pair"):
        Compactor(policy, archive=archive, hooks=Hooks(finalizer=broken)).compact(coding_run(rounds=20), force=True)
    assert archive.entries("session") == []


def test_skills_loaded_earlier_are_kept_in_the_summary():
    raws = [{"role": "system", "content": "agent"}, {"role": "user", "content": "start"}]
    raws += tool_round("sk1", "SKILL: always run black before committing", name="skill")
    for i in range(20):
        raws += tool_round(f"c{i}", "z" * 600)
    policy = small_policy(finalize={"skills": {"enabled": True, "tool_name": "skill"}})
    out = Compactor(policy).compact(raws, force=True)
    assert "always run black before committing" in out.context[1]["content"]


def test_every_preset_loads_and_compacts_a_chat_when_forced():
    for name in ("default", "eino", "deepagents", "trpc", "sagents", "langchain"):
        policy = get_preset(name).with_overrides({"context_window": 8000})
        out = Compactor(policy).compact(chat(turns=20), force=True)
        assert out and out.summarized, name
        assert tool_pairs_ok(out.context), name


def test_a_span_too_small_to_shrink_is_kept_verbatim_with_a_reason():
    raws = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}, {"role": "user", "content": "ok"}]
    archive = MemoryArchive()
    out = Compactor(small_policy(cut={"keep_messages": 1}), archive=archive).compact(raws, force=True)
    assert not out and "would not be smaller" in out.reason
    assert archive.entries("session") == []


def test_an_llm_summary_over_http_with_a_retry_and_a_failover_lands_in_the_context(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedLLMServer() as server:
        server.script(error(500), error(429), model="primary")
        server.script(ok("Goal: fix src/app.py. Done: read files 0-19. Next: run tests."), model="backup")
        policy = small_policy(summarizer={"model": "openai/primary", "failover_models": ["openai/backup"],
                                          "api_base": server.api_base,
                                          "retry": {"max_retries": 1, "backoff_base": 0.001}})
        out = Compactor(policy).compact(coding_run(rounds=20), force=True)
        sent = server.requests[-1].json
    assert out.model == "openai/backup" and not out.extractive
    assert [(a["phase"], a["ok"]) for a in out.attempts] == [("primary", False), ("primary", False), ("failover", True)]
    assert "Goal: fix src/app.py" in out.context[1]["content"]
    assert out.prompt == sent["messages"]
    gen = [e for e in out.events if e["type"] == "generate_summary"]
    assert len(gen) == 3 and gen[0]["error"] and gen[-1]["error"] is None


def test_a_chat_of_many_short_turns_still_shrinks_when_forced_repeatedly():
    s = CompactionSession(small_policy(cut={"keep_messages": 4}), session_id="short")
    originals = []
    for i in range(40):
        originals += [{"role": "user", "content": f"short question {i} about the build"},
                      {"role": "assistant", "content": f"short answer {i}: run make again"}]
    s.extend(originals)
    sizes = []
    for _ in range(3):
        out = s.compact(force=True)
        if out:
            sizes.append(out.messages_after)
        turn = [{"role": "user", "content": "one more question"}, {"role": "assistant", "content": "one more answer"}]
        s.extend(turn)
        originals += turn
    assert sizes and max(sizes) <= 2 + 4 + 4  # summary + ack, at most 4 preserved users, tail of 4
    assert len([m for m in s.live.messages if m.provenance is Provenance.PRESERVED]) <= 4
    assert canonical_json(s.replay()) == canonical_json(originals)


def test_the_outcome_is_frozen_and_its_typed_ledger_matches_the_stored_form():
    raws = session("minipr__deepseek_bench1__django__django-11099")["messages"]
    out = Compactor(small_policy(), session_id="s").compact(raws, force=True)
    assert out.ledger == [row.to_dict() for row in out.ledger_rows] == out.to_dict()["ledger"]
    assert tuple(LedgerRow.from_dict(d) for d in out.ledger) == out.ledger_rows
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.summary = "changed"
