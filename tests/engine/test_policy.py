"""Policies: documented, validated on load naming the field, presets faithful and JSON-clean."""
import json
from pathlib import Path

import pytest

from compaction import PRESETS, Policy, PolicyError, get_preset
from compaction.policy_docs import markdown, policy_fields

DOCS = Path(__file__).resolve().parents[2] / "docs" / "POLICY.md"


def test_every_setting_is_documented():
    undocumented = [path for path, _, desc in policy_fields() if not desc.strip()]
    assert undocumented == []


def test_the_settings_reference_in_docs_matches_the_code():
    assert DOCS.read_text(encoding="utf-8") == markdown() + "\n", \
        "docs/POLICY.md is stale: run `python -m compaction policy --docs > docs/POLICY.md`"


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_round_trip_through_json(name):
    policy = get_preset(name)
    assert Policy.load(json.dumps(policy.to_json())) == policy
    assert policy.name == name


def test_seed_presets_carry_their_documented_defaults():
    eino = get_preset("eino")
    assert eino.trigger.threshold == 160_000 and eino.finalize.preserve_user_max_tokens == 160_000 // 3
    assert eino.summarizer.retry.max_retries == 0
    deep = get_preset("deepagents")
    assert (deep.trigger.fraction, deep.fallback_context_window, deep.cut.keep_messages, deep.cut.keep_fraction,
            deep.summarizer.params["max_tokens"]) == (0.85, 32_768, 6, 0.25, 4096)
    assert deep.cut.user_turn == "require"
    trpc = get_preset("trpc")
    assert trpc.trigger.kind == "window_fraction_since_summary" and trpc.trigger.fraction == 0.5
    assert trpc.finalize.injection == "system"
    sag = get_preset("sagents")
    assert sag.trigger.threshold == 170_000 and sag.cut.keep_messages == 6 and sag.cut.search == "backward"
    lc = get_preset("langchain")
    assert lc.cut.keep_messages == 20 and lc.summarizer.input_max_tokens == 4000
    assert lc.summarizer.input_strategy == "keep_last"


def test_unknown_preset_lists_the_choices():
    with pytest.raises(PolicyError, match="choose one of default, eino"):
        get_preset("fast")


@pytest.mark.parametrize("data, field", [
    ({"cut": {"keep_fraction": 1.5}}, "cut.keep_fraction"),
    ({"summarizer": {"retry": {"max_retries": -1}}}, "summarizer.retry.max_retries"),
    ({"finalize": {"injection": "assistant"}}, "finalize.injection"),
    ({"trigger": {"kind": "all", "conditions": [{"kind": "messages", "threshold": 0}]}}, "trigger.conditions.0.threshold"),
    ({"unknown_knob": 1}, "unknown_knob"),
    ({"encoding": "gpt2"}, None),
])
def test_invalid_values_are_rejected_naming_the_field(data, field):
    with pytest.raises(PolicyError) as err:
        Policy.load(data)
    if field:
        assert err.value.field == field


@pytest.mark.parametrize("prompt, message", [
    ("Summarize please.", "must contain the {conversation_text}"),
    ("{conversation_text} in {language}", "unknown placeholder"),
    ("{conversation_text} {", "not a valid template"),
])
def test_custom_prompts_are_validated_when_the_policy_loads(prompt, message):
    with pytest.raises(PolicyError, match="summarizer.prompt") as err:
        Policy.load({"summarizer": {"prompt": prompt}})
    assert message in str(err.value)


def test_a_valid_custom_prompt_is_accepted():
    p = Policy.load({"summarizer": {"prompt": "Prior: {previous_summary}\n{conversation_text}\nMax {max_summary_words} words. Use {{braces}}."}})
    assert "{conversation_text}" in p.summarizer.prompt


def test_system_prompt_must_not_carry_the_conversation():
    with pytest.raises(PolicyError, match="summarizer.system_prompt"):
        Policy.load({"summarizer": {"system_prompt": "{conversation_text}"}})


def test_overrides_apply_dotted_paths_and_revalidate():
    p = get_preset("default").with_overrides({"cut.keep_messages": 3, "summarizer.model": "gpt-4o-mini"})
    assert p.cut.keep_messages == 3 and p.summarizer.model == "gpt-4o-mini"
    with pytest.raises(PolicyError, match="cut.keep_messages"):
        get_preset("default").with_overrides({"cut.keep_messages": "many"})
    with pytest.raises(PolicyError, match="no such setting"):
        get_preset("default").with_overrides({"cut.bogus": 1})
