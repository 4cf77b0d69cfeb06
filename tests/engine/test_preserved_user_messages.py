"""User messages re-inserted after a summary: marked as earlier messages, each once, never a
copy of what the summary already quotes, never harness boilerplate, and filterable by hooks
(Eino's ``Filter``); or quoted inside the summary in an ``<all_user_messages>`` section."""
from __future__ import annotations

import pytest

from compaction import Compactor, Hooks
from compaction.errors import PolicyError
from compaction.hooks import register_hook, unregister_hook
from compaction.locales import texts
from compaction.messages import Provenance, wrap_originals
from tests.engine.helpers import tool_round

TASK = "Fix the crash in src/parser.py when the input file is empty, and add a regression test."
NAG = "Please always provide EXACTLY ONE action in your response."
ASIDE = "Also keep the public API of parse_file unchanged, other teams import it."
LATEST = "Now handle whitespace-only input as well."


def session(nags: int = 3, aside_copies: int = 2) -> list[dict]:
    raws = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": TASK}]
    for i in range(12):
        raws += tool_round(f"c{i}", f"output {i} " + "y" * 300, args=f'{{"cmd": "cat file_{i}.py"}}')
        if i < nags:
            raws.append({"role": "user", "content": NAG})
        if 4 <= i < 4 + aside_copies:
            raws.append({"role": "user", "content": ASIDE})
    raws.append({"role": "user", "content": LATEST})
    raws += tool_round("z1", "ok")
    return raws


def summary_quoting_the_task(text: str) -> str:
    """A summary that restates the task word for word, as summaries usually do."""
    return f"Task: {TASK}\nRead file_0.py to file_11.py; nothing changed yet."


def compact(raws, hooks: Hooks | None = None, **finalize):
    policy = {"summarizer": {"model": None}, "cut": {"keep_messages": 3},
              "finalize": {"preserve_user_max_tokens": 2000, **finalize}}
    hooks = hooks or Hooks(post_summary=summary_quoting_the_task)
    out = Compactor(policy, hooks=hooks).compact(raws, force=True)
    assert out.summarized
    return out


def preserved(out) -> list:
    return [m for m in out.messages if m.provenance is Provenance.PRESERVED]


def words(m) -> str:
    return m.raw["content"].split("\n", 1)[1]


def test_a_preserved_message_is_marked_as_an_earlier_one_and_says_where_it_came_from():
    out = compact(session())
    kept = preserved(out)
    assert [words(m) for m in kept] == [ASIDE]
    marker = texts("en")["preserved_marker"]
    assert kept[0].raw["content"].startswith(marker + "\n")
    assert kept[0].meta["source_id"] in {m.id for m in wrap_originals(session())}
    assert kept[0].meta["preserved"] is True
    rendered = [m["content"] for m in out.context if m["role"] == "user"]
    assert any(("\n\n" + marker + "\n" + ASIDE) in c for c in rendered)


def test_the_marker_follows_the_language():
    out = compact(session(), language="zh")
    assert preserved(out)[0].raw["content"].startswith(texts("zh")["preserved_marker"])


def test_repeats_are_preserved_once_and_the_quoted_task_statement_not_at_all():
    out = compact(session(nags=0, aside_copies=2))
    texts_kept = [words(m) for m in preserved(out)]
    assert texts_kept.count(ASIDE) == 1
    assert TASK not in texts_kept


def test_the_task_statement_is_preserved_when_the_summary_does_not_quote_it():
    out = compact(session(nags=0, aside_copies=1), hooks=Hooks(post_summary=lambda t: "Read twelve files."))
    assert [words(m) for m in preserved(out)] == [TASK, ASIDE]


def test_harness_boilerplate_sent_three_times_is_not_preserved_but_twice_is():
    assert NAG not in [words(m) for m in preserved(compact(session(nags=3)))]
    assert NAG in [words(m) for m in preserved(compact(session(nags=2)))]


def test_an_empty_filter_list_turns_the_default_filter_off():
    out = Compactor({"summarizer": {"model": None}, "cut": {"keep_messages": 3},
                     "finalize": {"preserve_user_max_tokens": 2000}, "hooks": {"user_message_filter": []}},
                    hooks=Hooks(post_summary=summary_quoting_the_task)).compact(session(nags=3), force=True)
    assert NAG in [words(m) for m in preserved(out)]


def test_a_filter_given_in_code_decides_what_is_preserved():
    seen = []

    def no_api_talk(message, context):
        seen.append(len(context))
        return "API" not in message["content"]

    out = compact(session(nags=0), hooks=Hooks(post_summary=summary_quoting_the_task, user_message_filter=no_api_talk))
    assert preserved(out) == []
    assert seen and all(n == len(session(nags=0)) for n in seen)


def test_a_registered_filter_is_chosen_by_name_and_an_unknown_name_is_refused():
    register_hook("user_message_filter", "test_no_api_talk", lambda message, context: "API" not in message["content"],
                  replace=True)
    try:
        out = compact(session(nags=0), hooks=Hooks(post_summary=summary_quoting_the_task))
        assert [words(m) for m in preserved(out)] == [ASIDE]
        named = Compactor({"summarizer": {"model": None}, "cut": {"keep_messages": 3},
                           "hooks": {"user_message_filter": ["test_no_api_talk"]}},
                          hooks=Hooks(post_summary=summary_quoting_the_task)).compact(session(nags=0), force=True)
        assert preserved(named) == []
    finally:
        unregister_hook("user_message_filter", "test_no_api_talk")
    with pytest.raises(PolicyError) as err:
        Compactor({"hooks": {"user_message_filter": ["no_such_filter"]}})
    assert "hooks.user_message_filter" in str(err.value.field or err.value)


def test_a_failing_filter_is_reported_and_skipped():
    def broken(message, context):
        raise RuntimeError("boom")

    events = []
    out = Compactor({"summarizer": {"model": None}, "cut": {"keep_messages": 3}},
                    hooks=Hooks(post_summary=summary_quoting_the_task, user_message_filter=broken)
                    ).compact(session(nags=0), force=True, on_event=events.append)
    assert [words(m) for m in preserved(out)] == [ASIDE]
    assert any(e["type"] == "hook_error" and e["hook"] == "user_message_filter" for e in events)


def test_re_preserving_a_preserved_copy_does_not_stack_markers():
    first = compact(session(nags=0))
    later = first.messages + wrap_originals([m for r in range(8) for m in tool_round(f"d{r}", "z" * 300)],
                                            start=len(session(nags=0)))
    second = Compactor({"summarizer": {"model": None}, "cut": {"keep_messages": 3},
                        "finalize": {"preserve_user_max_tokens": 2000}},
                       hooks=Hooks(post_summary=lambda t: "More files read.")).compact(later, force=True)
    kept = preserved(second)
    marker = texts("en")["preserved_marker"]
    assert ASIDE in [words(m) for m in kept]
    assert all(m.raw["content"].count(marker) == 1 for m in kept)


def test_summary_section_placement_quotes_them_inside_the_summary():
    out = compact(session(nags=3), preserved_user_placement="summary_section")
    assert preserved(out) == []
    summary = next(m for m in out.messages if m.provenance is Provenance.SUMMARY)
    text = summary.raw["content"]
    section = text[text.index("<all_user_messages>"):text.index("</all_user_messages>")]
    assert ASIDE in section and NAG not in section
    assert section.count(ASIDE) == 1
    newest_copy = [m.id for m in wrap_originals(session(nags=3)) if m.raw["content"] == ASIDE][-1]
    fates = {row["message_id"]: row["fate"] for row in out.ledger}
    assert fates[newest_copy] == "preserved"


def test_a_message_the_kept_tail_repeats_is_not_copied_back():
    raws = session(nags=0, aside_copies=1)
    raws += [{"role": "user", "content": ASIDE}] + tool_round("z2", "ok")
    out = compact(raws)
    assert ASIDE not in [words(m) for m in preserved(out)]
    assert sum(1 for m in out.context if m["role"] == "user" and ASIDE in str(m["content"])) == 1
