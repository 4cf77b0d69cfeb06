"""The seed presets behave as their seed documents say, and the agent-loop entry points
(CompactionSession.append, one-shot Compactor.compact) honour what the seeds define there:
per-tool truncate handlers, truncation of oversized tool outputs, pinned messages."""
from __future__ import annotations

import pytest

from compaction import CompactionSession, Compactor
from compaction.errors import PolicyError, SummaryError
from compaction.locales import texts
from compaction.outcome import Outcome, Skipped
from compaction.policy import Policy
from compaction.presets import get_preset
from compaction.run_context import Hooks
from compaction.simulate import run_simulation
from compaction.tokens import usage_total
from tests.engine.conftest import KEY_ENV
from tests.engine.helpers import chat, coding_run, counted, tool_round
from tests.support.llm_server import error, ok

# -- deepagents: the trigger measures the whole window -------------------------------------------


def _grow_until_fired(session: CompactionSession, limit: int = 2000) -> int:
    """Append 100-token user/assistant pairs until the trigger fires; the total then."""
    for i in range(limit):
        session.append({"role": "user" if i % 2 == 0 else "assistant", "content": "w" * 397})
        if session.should_compact():
            return session.total_tokens
    raise AssertionError("the trigger never fired")


def test_deepagents_fires_at_85_percent_of_the_whole_32k_window_not_of_the_window_minus_the_reserve():
    session = CompactionSession("deepagents")
    assert session.compactor.window == 32_768
    fired_at = _grow_until_fired(session)
    # 0.85 x 32,768 = 27,853; with the 4,096 reserve taken off it would fire at 24,371.
    assert 27_853 < fired_at <= 27_853 + 100


def test_deepagents_keeps_its_4096_tokens_for_the_summary_generation():
    deep = get_preset("deepagents")
    assert deep.summarizer.params["max_tokens"] == 4096


# -- trpc: the word-limit placeholder, the 300-word default, forced single-turn runs ------------


def test_trpc_refuses_a_prompt_without_the_word_limit_placeholder_naming_the_field():
    with pytest.raises(PolicyError) as caught:
        get_preset("trpc").with_overrides({"summarizer.prompt": "Summarize:\n{conversation_text}"})
    assert caught.value.field == "summarizer.prompt"
    assert "{max_summary_words}" in str(caught.value)


def test_trpc_accepts_the_placeholder_in_the_prompt_or_the_system_prompt_or_no_limit():
    trpc = get_preset("trpc")
    trpc.with_overrides({"summarizer.prompt": "At most {max_summary_words} words:\n{conversation_text}"})
    trpc.with_overrides({"summarizer.prompt": "{conversation_text}",
                         "summarizer.system_prompt": "Use at most {max_summary_words} words."})
    trpc.with_overrides({"summarizer.prompt": "{conversation_text}", "summarizer.max_summary_words": 0})


def test_other_policies_keep_accepting_a_prompt_without_the_placeholder():
    Policy.load({"summarizer": {"prompt": "Summarize:\n{conversation_text}"}})


def test_trpc_states_a_300_word_limit():
    assert get_preset("trpc").summarizer.max_summary_words == 300


def _single_request_run() -> list[dict]:
    return coding_run(rounds=12, output_chars=300, task="Fix the failing test in src/app.py")


def test_a_forced_trpc_run_summarizes_a_single_request_run():
    out = Compactor("trpc").compact(_single_request_run(), force=True)
    assert isinstance(out, Outcome) and out.summarized and out.evicted_messages > 0
    assert any("forced_any_boundary" in n for n in out.notes)


def test_deepagents_still_cannot_cut_a_single_request_run_even_when_forced():
    out = Compactor("deepagents").compact(_single_request_run(), force=True)
    assert isinstance(out, Skipped) and "user_turn=require" in out.reason


# -- sagents: the agent's own model, failures keep the messages ---------------------------------


def _sagents(llm_server, **policy) -> dict:
    data = get_preset("sagents").to_json()
    data["summarizer"].update({"api_base": llm_server.api_base, "api_key_env": KEY_ENV, "timeout_seconds": 5,
                               "require_shrink": False})
    data.update(policy)
    return data


def test_sagents_summarizes_with_the_agent_model_from_the_policy(llm_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test")
    llm_server.script(ok("the summary"))
    out = Compactor(_sagents(llm_server, model="openai/agent-model")).compact(chat(12), force=True)
    assert isinstance(out, Outcome) and out.summary == "the summary" and out.model == "openai/agent-model"
    assert llm_server.requests[0].json["model"] == "agent-model"


def test_sagents_falls_back_to_the_model_recorded_on_the_last_assistant_message(llm_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test")
    llm_server.script(ok("the summary"))
    messages = chat(12)
    messages[-1] = dict(messages[-1], model="openai/recorded-model")
    out = Compactor(_sagents(llm_server)).compact(messages, force=True)
    assert isinstance(out, Outcome) and out.model == "openai/recorded-model"
    assert llm_server.requests[0].json["model"] == "recorded-model"


def test_without_a_known_agent_model_sagents_summarizes_offline():
    out = Compactor("sagents").compact(chat(12), force=True)
    assert isinstance(out, Outcome) and out.extractive


def test_a_failed_sagents_summary_is_reported_and_the_messages_are_kept(llm_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test")
    llm_server.script(error(500))
    events: list[dict] = []
    messages = chat(12)
    out = Compactor(_sagents(llm_server, model="openai/agent-model")).compact(messages, force=True,
                                                                               on_event=events.append)
    assert isinstance(out, Skipped) and "on_failure=keep" in out.reason
    failed = [e for e in events if e["type"] == "summary_failed"]
    assert len(failed) == 1 and failed[0]["attempts"] == 1


def test_a_failed_summary_still_raises_where_the_policy_says_raise(llm_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test")
    llm_server.script(error(500))
    policy = _sagents(llm_server, model="openai/agent-model")
    policy["summarizer"]["on_failure"] = "raise"
    with pytest.raises(SummaryError):
        Compactor(policy).compact(chat(12), force=True)


def test_a_session_goes_on_after_a_failed_sagents_summary(llm_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test")
    llm_server.script(error(500))
    session = CompactionSession(_sagents(llm_server, model="openai/agent-model"))
    session.extend(chat(12))
    before = session.context()
    assert isinstance(session.compact(force=True), Skipped)
    assert session.context() == before


# -- eino: the usage-based counter --------------------------------------------------------------


def _with_usage(total: int) -> dict:
    return {"role": "assistant", "content": "done", "usage": {"prompt_tokens": total - 10, "completion_tokens": 10,
                                                               "total_tokens": total}}


def test_eino_triggers_on_the_reported_usage_plus_what_came_after():
    session = CompactionSession("eino")
    session.append({"role": "user", "content": "hello"})
    session.append(_with_usage(159_990))
    assert not session.should_compact()
    session.append({"role": "user", "content": "x" * 400})   # ~100 more tokens by the estimate
    assert session.should_compact()
    assert Compactor("eino").check(session.context()).fired


def test_without_count_from_usage_the_report_is_ignored():
    policy = get_preset("eino").with_overrides({"count_from_usage": False})
    session = CompactionSession(policy)
    session.append({"role": "user", "content": "hello"})
    session.append(_with_usage(170_000))
    assert not session.should_compact()


def test_a_report_from_before_a_compaction_no_longer_counts():
    policy = get_preset("eino").with_overrides({"trigger.threshold": 5000, "cut.keep_messages": 2,
                                                "cut.keep_fraction": 1.0})
    session = CompactionSession(policy)
    for i in range(6):
        session.append({"role": "user", "content": f"question {i} " + "q" * 400})
        session.append(_with_usage(6000 + i))
    assert session.should_compact()
    out = session.compact()
    assert isinstance(out, Outcome) and out.summarized
    # The kept tail still carries the last report; it describes the context before the summary.
    assert session.context()[-1].get("usage", {}).get("total_tokens") == 6005
    assert not session.should_compact()
    assert not Compactor(policy).check(session.live.messages).fired
    assert usage_total(session.live.messages, session.live.tokens) is None
    session.append({"role": "user", "content": "next"})
    session.append(_with_usage(5200))
    assert session.should_compact()
    assert usage_total(session.live.messages, session.live.tokens) == 5200


def test_a_prompt_only_report_adds_the_estimate_of_the_reporting_message():
    msgs, tokens = counted([{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": "a" * 400, "usage": {"prompt_tokens": 1000}}])
    assert usage_total(msgs, tokens) == 1000 + tokens[1].total


# -- truncation on append and in one-shot compactions --------------------------------------------


BIG = "line of output\n" * 5000   # 75,000 characters, over the 50,000 limit


def test_a_per_tool_truncate_handler_decides_what_session_append_keeps():
    seen: list[str] = []

    def handler(detail):
        seen.append(detail.tool_name)
        return f"[{detail.tool_name} output stored as {detail.handle}]"

    session = CompactionSession("default", hooks=_hooks(truncate_handlers={"grep": handler}))
    for raw in tool_round("c1", BIG, name="grep"):
        session.append(raw)
    assert seen == ["grep"]
    content = session.context()[-1]["content"]
    assert content.startswith("[grep output stored as ") and len(content) < 100


def test_a_one_shot_compaction_truncates_an_oversized_tool_output():
    messages = [{"role": "user", "content": "search"}] + tool_round("c1", BIG) + [
        {"role": "assistant", "content": "found it"}]
    out = Compactor("default").compact(messages)
    assert isinstance(out, Outcome) and out.tokens_truncated > 0
    assert len(out.context[2]["content"]) < 60_000
    assert out.context[2]["content"] != BIG


def test_pinned_messages_survive_a_session_compaction_verbatim():
    session = CompactionSession(get_preset("default").with_overrides({"cut.keep_messages": 2}))
    session.append({"role": "system", "content": "You help."})
    session.append({"role": "user", "content": "Remember: the deploy key is K-42."}, pinned=True)
    for raw in chat(12)[1:]:
        session.append(raw)
    out = session.compact(force=True)
    assert isinstance(out, Outcome) and out.summarized
    contents = [m["content"] for m in session.context()]
    assert "Remember: the deploy key is K-42." in contents
    assert "question 0 " + "q" * 200 not in contents


def _hooks(**reduction):
    return Hooks(reduction=reduction)


# -- issue 21: trpc and deepagents summarize the runs they used to leave to tailoring ------------


def _long_single_request_run() -> list[dict]:
    return coding_run(rounds=80, output_chars=600, task="Fix the failing test in src/app.py")


def test_trpc_summarizes_a_single_request_run_before_the_call_that_nears_the_window():
    """tRPC refreshes the summary synchronously when a request approaches the window; token
    tailoring stays the last resort. Before, the run was never summarized and tailoring dropped
    a round or two on every call (a prompt-cache break each)."""
    policy = get_preset("trpc").with_overrides({"context_window": 8000})
    report = run_simulation(_long_single_request_run(), policy)
    summaries = [c for c in report.compactions if c.summarized]
    assert summaries and all(any("any_boundary_near_window" in n for n in c.notes) for c in summaries)
    assert not [c for c in report.compactions if (c.trigger or "").startswith("token tailoring")]
    assert report.thrash == 0 and report.overflow_calls == 0 and report.integrity.ok
    # the latest round stays verbatim after each summary: the call can go on from its result
    session = CompactionSession(policy)
    for raw in _long_single_request_run():
        if raw["role"] == "assistant":
            out = session.before_model_call()
            if isinstance(out, Outcome) and out.summarized:
                assert out.context[-1]["role"] == "tool" and out.context[-2].get("tool_calls")
                break
        session.append(raw)
    else:
        raise AssertionError("no summary")


def _multi_turn_with_a_long_last_turn(rounds: int = 20) -> list[dict]:
    raws = chat(turns=3, size=1500)
    raws.append({"role": "user", "content": "Now fix the failing test in src/app.py"})
    for i in range(rounds):
        raws += tool_round(f"c{i}", f"output {i} " + "y" * 300, args=f'{{"cmd": "cat file_{i}.py"}}')
    return raws


def test_deepagents_summarizes_a_multi_turn_run_whose_last_turn_is_longer_than_the_tail():
    raws = _multi_turn_with_a_long_last_turn()
    out = Compactor("deepagents").compact(raws, force=True)
    assert isinstance(out, Outcome) and out.summarized
    # the earlier turns are summarized; the tail starts at the last user message, kept whole
    assert out.evicted_messages == 6
    tail_user = [m for m in out.context if m["role"] == "user" and "Now fix" in str(m["content"])]
    assert len(tail_user) == 1
    assert any("cut.user_turn=require" in n for n in out.notes)


def test_deepagents_compacts_such_a_run_when_its_trigger_fires():
    policy = get_preset("deepagents").with_overrides({"context_window": 12_000})
    report = run_simulation(_multi_turn_with_a_long_last_turn(rounds=100), policy)
    assert any(c.summarized for c in report.compactions)
    assert report.integrity.ok


# -- issue 21: eino's section and user-injection alternation -------------------------------------

OWN_SECTION = "<all_user_messages>\n- something the model wrote itself\n</all_user_messages>"


def _users_session() -> list[dict]:
    raws = [{"role": "system", "content": "You help."}]
    for i in range(6):
        raws.append({"role": "user", "content": f"Request number {i}: please look at ticket T-{i} again."})
        raws.append({"role": "assistant", "content": f"Done with ticket T-{i}. " + "a" * 300})
    return raws


def test_eino_puts_the_recent_user_messages_verbatim_in_place_of_the_summary_section():
    hooks = Hooks(post_summary=lambda text: f"Summary before.\n{OWN_SECTION}\nSummary after.")
    out = Compactor("eino", hooks=hooks).compact(_users_session(), force=True)
    assert isinstance(out, Outcome) and out.summarized
    summary = [m for m in out.context if m["role"] == "user"]
    assert len(summary) == 1          # no separate user turns re-inserted
    text = summary[0]["content"]
    assert text.count("<all_user_messages>") == text.count("</all_user_messages>") == 1
    assert "something the model wrote itself" not in text
    for i in range(6):                # originals, verbatim, without the preserved-message marker
        assert f"- Request number {i}: please look at ticket T-{i} again." in text
    assert texts("en")["preserved_marker"] not in text
    # the section stands where the model put it
    assert text.index("Summary before.") < text.index("<all_user_messages>") < text.index("Summary after.")


def test_eino_keeps_its_section_within_the_budget_newest_first():
    hooks = Hooks(post_summary=lambda text: f"Summary.\n{OWN_SECTION}")
    policy = get_preset("eino").with_overrides({"finalize.preserve_user_max_tokens": 40})
    out = Compactor(policy, hooks=hooks).compact(_users_session(), force=True)
    text = [m for m in out.context if m["role"] == "user"][0]["content"]
    assert "ticket T-5 again." in text and "ticket T-0 again." not in text
    assert text.count("<all_user_messages>") == 1


def test_in_user_injection_the_re_inserted_messages_join_the_summary_turn_so_roles_alternate():
    raws = _users_session() + [{"role": "user", "content": "And the last one, T-9."}]
    out = Compactor(get_preset("default").with_overrides({"cut.keep_messages": 1}), hooks=Hooks(
        post_summary=lambda text: "A short summary.")).compact(raws, force=True)
    assert isinstance(out, Outcome) and out.summarized
    roles = [m["role"] for m in out.context]
    assert roles == ["system", "user", "assistant", "user"]
    summary_turn = out.context[1]["content"]
    marker = texts("en")["preserved_marker"]
    assert summary_turn.startswith("A short summary.") or "A short summary." in summary_turn
    assert summary_turn.count(marker) >= 2 and "ticket T-5 again." in summary_turn
    # the copies stay messages of their own, so a later summary can keep them again
    assert sum(1 for m in out.messages if m.provenance.value == "preserved") >= 2
