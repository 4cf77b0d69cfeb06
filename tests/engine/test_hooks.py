"""Named hooks (pre/post summary, input builder, tool call/result formatters),
chosen by name in a policy or passed as Python callables, with abort-on-error."""
from __future__ import annotations

import pytest

from compaction import CompactionError, Compactor, Hooks, MemoryArchive, Policy, PolicyError
from compaction import hooks as H
from compaction.hooks import get_hook, list_hooks, register_hook, unregister_hook
from tests.support.llm_server import ok
from tests.support.sessions import chat, corpus_messages, runs_with_tools, tool_round

SUMMARY = "The user wants module_0 reviewed."
SECRET = "sk-proj-A1b2C3d4E5f6G7h8I9j0KlMnOpQr"


@pytest.fixture
def scratch_hooks():
    """Register test hooks and remove them afterwards."""
    added: list[tuple[str, str]] = []

    def add(kind, name, fn):
        register_hook(kind, name, fn, replace=True)
        added.append((kind, name))
        return fn
    yield add
    for kind, name in added:
        unregister_hook(kind, name)


def policy(llm_settings, **extra) -> Policy:
    data = {"counter": "approx", "cut": {"keep_messages": 2}, "summarizer": llm_settings()}
    data.update(extra)
    return Policy.load(data)


def sent_prompt(server) -> str:
    return "\n".join(str(m["content"]) for m in server.requests[-1].json["messages"])


# -- the registry -------------------------------------------------------------------------------

def test_registered_hooks_are_found_by_kind_and_name(scratch_hooks):
    fn = scratch_hooks("pre_summary", "test_upper", str.upper)
    assert get_hook("pre_summary", "test_upper") is fn
    assert {"kind": "pre_summary", "name": "test_upper", "description": fn.__doc__.strip().splitlines()[0],
            "builtin": False} in list_hooks("pre_summary")


def test_an_unknown_name_or_kind_is_an_error_that_lists_the_choices():
    with pytest.raises(H.UnknownHookError) as caught:
        get_hook("post_summary", "nope")
    assert "redact_secrets" in str(caught.value)
    with pytest.raises(ValueError):
        get_hook("mid_summary", "x")


def test_a_taken_name_is_not_silently_replaced(scratch_hooks):
    scratch_hooks("post_summary", "test_once", str.strip)
    with pytest.raises(ValueError, match="already registered"):
        register_hook("post_summary", "test_once", str.lower)


def test_register_hook_works_as_a_decorator():
    @register_hook("tool_call_formatter", "test_decorated", description="calls as NAME()")
    def fmt(name, args):
        return f"{name}()"
    try:
        assert get_hook("tool_call_formatter", "test_decorated") is fmt
        assert any(h["description"] == "calls as NAME()" for h in list_hooks("tool_call_formatter"))
    finally:
        unregister_hook("tool_call_formatter", "test_decorated")


def test_every_kind_has_built_ins_for_the_dashboard_to_offer():
    names = {(h["kind"], h["name"]) for h in list_hooks() if h["builtin"]}
    for kind in H.KINDS:
        assert any(k == kind for k, _ in names), kind
    assert ("pre_summary", "redact_secrets") in names and ("pre_summary", "collapse_whitespace") in names


def test_a_policy_naming_an_unknown_hook_fails_when_the_compactor_is_built():
    p = Policy.load({"hooks": {"pre_summary": ["redact_secrets", "does_not_exist"]}})
    with pytest.raises(PolicyError) as caught:
        Compactor(p)
    assert caught.value.field == "hooks.pre_summary.1"


def test_a_single_name_is_accepted_where_a_list_is_expected():
    assert Policy.load({"hooks": {"post_summary": "redact_secrets"}}).hooks.post_summary == ["redact_secrets"]


# -- built-ins ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, leaked", [
    (f"export OPENAI_API_KEY={SECRET}", SECRET),
    ("Authorization: Bearer abcdefghijklmnop1234567890", "abcdefghijklmnop1234567890"),
    ('{"password": "hunter2hunter2"}', "hunter2hunter2"),
    ("token: ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("aws AKIAABCDEFGHIJKLMNOP key", "AKIAABCDEFGHIJKLMNOP"),
    ("postgres://admin:s3cretpass@db:5432/app", "s3cretpass"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
])
def test_redact_secrets_hides_the_value_and_keeps_the_context(text, leaked):
    out = H.redact_secrets(text)
    assert leaked not in out and H.REDACTED in out


def test_redact_secrets_leaves_ordinary_text_alone():
    text = "max_tokens=4096 and tokens: 12 in src/token_utils.py; password policy is documented"
    assert H.redact_secrets(text) == text


def test_collapse_whitespace_and_strip_ansi():
    assert H.collapse_whitespace("a   b\t\tc  \n\n\n\nd  ") == "a b c\n\nd"
    assert H.strip_ansi("\x1b[31mred\x1b[0m 50%\r100%\n") == "red 50%100%\n"


# -- in a compaction --------------------------------------------------------------------------------

def test_pre_summary_redact_secrets_keeps_a_key_out_of_the_summary_request(llm_server, llm_settings):
    session = [{"role": "system", "content": "agent"}, {"role": "user", "content": f"deploy with key {SECRET}"}]
    session += tool_round("c1", f"OPENAI_API_KEY={SECRET}\nok") + chat(turns=3)[1:]
    llm_server.script(ok(SUMMARY))

    Compactor(policy(llm_settings, hooks={"pre_summary": ["redact_secrets"]})).compact(session, force=True)

    prompt = sent_prompt(llm_server)
    assert SECRET not in prompt and H.REDACTED in prompt


def test_post_summary_hooks_rewrite_the_summary_in_order(llm_server, llm_settings, scratch_hooks):
    scratch_hooks("post_summary", "test_shout", lambda t: t.upper())
    llm_server.script(ok(f"Summary   with   key {SECRET}"))

    out = Compactor(policy(llm_settings, hooks={"post_summary": ["redact_secrets", "collapse_whitespace",
                                                                 "test_shout"]})).compact(chat(turns=6), force=True)

    assert out.summary == "SUMMARY WITH KEY [REDACTED]"


def test_tool_formatters_by_name_shape_or_exclude_tool_traffic(llm_server, llm_settings):
    session = runs_with_tools(runs=3)
    llm_server.script(ok(SUMMARY))

    Compactor(policy(llm_settings, hooks={"tool_call_formatter": "name_only",
                                          "tool_result_formatter": "omit"})).compact(session, force=True)

    prompt = sent_prompt(llm_server)
    assert "[Called tool: bash]" in prompt
    assert "with args" not in prompt
    assert "returned:" not in prompt and "out r0k0" not in prompt


def test_an_input_builder_has_full_control_of_the_request(llm_server, llm_settings, scratch_hooks):
    seen = {}

    def builder(system_instruction, user_instruction, span_messages):
        seen.update(system=system_instruction, user=user_instruction, span=span_messages)
        return [{"role": "system", "content": "You compress transcripts."},
                *span_messages[:2],
                {"role": "user", "content": "Now summarize the above."}]
    scratch_hooks("input_builder", "test_builder", builder)
    session = chat(turns=6)
    llm_server.script(ok(SUMMARY))

    out = Compactor(policy(llm_settings, summarizer=llm_settings(system_prompt="Be terse."),
                           hooks={"input_builder": "test_builder"})).compact(session, force=True)

    got = dict(seen)
    assert got["system"] == "Be terse."
    assert "<conversation>" in got["user"]
    assert got["span"] == session[1:1 + len(got["span"])]
    assert llm_server.requests[-1].json["messages"] == builder(None, "", got["span"])
    assert out.prompt == llm_server.requests[-1].json["messages"]


def test_the_single_user_message_builder_folds_the_system_prompt_in(llm_server, llm_settings):
    llm_server.script(ok(SUMMARY))
    Compactor(policy(llm_settings, summarizer=llm_settings(system_prompt="Be terse."),
                     hooks={"input_builder": "single_user_message"})).compact(chat(turns=6), force=True)
    sent = llm_server.requests[-1].json["messages"]
    assert len(sent) == 1 and sent[0]["role"] == "user" and sent[0]["content"].startswith("Be terse.\n\n")


def test_a_python_hook_wins_over_the_policy_name(llm_server, llm_settings):
    llm_server.script(ok("summary text"))
    out = Compactor(policy(llm_settings, hooks={"post_summary": ["collapse_whitespace"]}),
                    hooks=Hooks(post_summary=lambda t: "from python")).compact(chat(turns=6), force=True)
    assert out.summary == "from python"


def test_a_failing_hook_is_logged_and_skipped_by_default(llm_server, llm_settings, scratch_hooks):
    def boom(text):
        raise RuntimeError("hook bug")
    scratch_hooks("pre_summary", "test_boom", boom)
    scratch_hooks("post_summary", "test_boom", boom)
    llm_server.script(ok(SUMMARY))

    out = Compactor(policy(llm_settings, hooks={"pre_summary": ["test_boom"], "post_summary": ["test_boom"]})
                    ).compact(chat(turns=6), force=True)

    assert out.summary == SUMMARY
    errors = [e["hook"] for e in out.events if e["type"] == "hook_error"]
    assert errors == ["pre_summary", "post_summary"]


@pytest.mark.parametrize("kind", ["pre_summary", "post_summary", "input_builder"])
def test_abort_on_error_stops_the_run_and_changes_nothing(llm_server, llm_settings, scratch_hooks, kind):
    def boom(*args):
        raise RuntimeError("hook bug")
    scratch_hooks(kind, "test_abort", boom)
    llm_server.script(ok(SUMMARY))
    archive = MemoryArchive()
    session = chat(turns=6)
    names = ["test_abort"] if kind != "input_builder" else "test_abort"

    with pytest.raises(CompactionError, match=f"{kind} hook failed"):
        Compactor(policy(llm_settings, hooks={kind: names, "abort_on_error": True}), archive=archive,
                  session_id="a").compact(session, force=True)

    assert archive.entries("a") == []
    assert session == chat(turns=6)


def test_an_input_builder_returning_garbage_falls_back_to_the_default_request(llm_server, llm_settings,
                                                                              scratch_hooks):
    scratch_hooks("input_builder", "test_garbage", lambda s, u, m: "not a list")
    llm_server.script(ok(SUMMARY))

    out = Compactor(policy(llm_settings, hooks={"input_builder": "test_garbage"})).compact(chat(turns=6), force=True)

    assert "<conversation>" in sent_prompt(llm_server)
    assert any(e["type"] == "hook_error" and e["hook"] == "input_builder" for e in out.events)


def test_on_a_corpus_session_formatters_and_redaction_shape_what_the_offline_summarizer_reads():
    raws = corpus_messages("minipr__deepseek_bench1__django__django-11099.json")
    p = Policy.load({"counter": "approx", "cut": {"keep_messages": 6},
                     "hooks": {"tool_result_formatter": "first_line", "pre_summary": ["strip_ansi", "redact_secrets"]}})
    out = Compactor(p).compact(raws, force=True)

    prompt = out.prompt[-1]["content"]
    results = [m for m in raws[:-6] if m["role"] == "tool"]
    assert results
    longest = max(results, key=lambda m: len(str(m["content"])))
    assert str(longest["content"])[:2000] not in prompt           # only the first line of each result
    assert prompt.count(" returned: ") >= len(results) // 2
    assert out.summarized and out.extractive
