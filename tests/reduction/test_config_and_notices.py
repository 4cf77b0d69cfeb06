"""The reduction policy section, its preset fragments, and the bilingual notice texts."""
import string

import pytest
from pydantic import BaseModel, ValidationError

from compaction.errors import PolicyError
from compaction.policy import Policy
from compaction.reduction import config as C
from compaction.reduction import notices as N
from compaction.reduction.edits import FAILURE_WORDS


def _models(model: type[BaseModel]):
    yield model
    for f in model.model_fields.values():
        ann = f.annotation
        for cand in (ann, *getattr(ann, "__args__", ())):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                yield from _models(cand)


def test_every_reduction_setting_has_a_description_and_unknown_keys_are_rejected():
    for model in _models(C.ReductionPolicy):
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name} has no description"
    with pytest.raises(ValidationError):
        C.ReductionPolicy.model_validate({"enabled": True, "truncate_at": 5})
    with pytest.raises(ValidationError):
        C.ReductionPolicy.model_validate({"clearing": {"keep_rounds": 3}})


def test_reduction_is_off_by_default_and_the_class_defaults_follow_the_issue():
    p = C.ReductionPolicy()
    assert p.enabled is False
    assert p.truncation.max_chars == 50_000 and p.clearing.keep == 1 and p.clearing.keep_unit == "rounds"
    assert p.passes.historical_max_tokens == 1024 and p.passes.oversized_max_tokens == 0
    assert p.keep_tools == ["session_load", "session_search"]


def test_policy_errors_name_the_dotted_reduction_field():
    with pytest.raises(PolicyError) as err:
        Policy.load({"reduction": {"clearing": {"keep": -1}}})
    assert err.value.field == "reduction.clearing.keep"
    with pytest.raises(PolicyError) as err:
        Policy.load({"reduction": {"clearing": {"trigger_fraction": None, "trigger_tokens": None}}})
    assert err.value.field.startswith("reduction.clearing")
    with pytest.raises(PolicyError, match="unknown placeholder field 'size'"):
        Policy.load({"reduction": {"clearing": {"placeholder": "[{size} cleared]"}}})
    with pytest.raises(PolicyError, match="non-empty"):
        Policy.load({"reduction": {"keep_tools": [""]}})
    assert Policy.load({"reduction": {"enabled": True, "language": "zh"}}).reduction.language == "zh"


def test_policy_overrides_reach_reduction_settings():
    p = Policy().with_overrides({"reduction.enabled": True, "reduction.clearing.keep": 4})
    assert p.reduction.enabled and p.reduction.clearing.keep == 4


def test_the_default_fragment_truncates_at_50k_and_clears_at_half_the_window_keeping_ten_rounds():
    p = C.default_reduction()
    assert p.enabled and p.truncation.enabled and p.truncation.max_chars == 50_000
    c = p.clearing
    assert c.enabled and c.trigger_fraction == 0.5 and c.trigger_tokens is None
    assert c.keep == 10 and c.keep_unit == "rounds" and c.clear_at_least_tokens == 2000 and c.at_least_mode == "guard"


def test_the_eino_fragment_uses_eino_defaults():
    p = C.eino_reduction()
    assert p.truncation.max_chars == 50_000 and p.clearing.trigger_tokens == 160_000
    assert p.clearing.keep == 1 and p.clearing.clear_at_least_tokens == 0 and p.clearing.clear_tool_inputs
    assert not p.passes.enabled


def test_the_trpc_fragment_runs_passes_only():
    p = C.trpc_reduction()
    assert p.passes.enabled and p.passes.historical_max_tokens == 1024 and p.passes.oversized_max_tokens == 0
    assert not p.truncation.enabled and not p.clearing.enabled
    assert C.trpc_reduction(oversized_max_tokens=8192, force_clean_tools=["shell"]).force_clean_tools == ["shell"]


def test_the_anthropic_fragment_mirrors_clear_tool_uses():
    p = C.anthropic_clear_tool_uses(clear_at_least=5000, exclude_tools=["web_search"], clear_tool_inputs=True)
    c = p.clearing
    assert c.trigger_tokens == 100_000 and c.keep == 3 and c.keep_unit == "tool_uses"
    assert c.clear_at_least_tokens == 5000 and c.at_least_mode == "guard"
    assert c.exclude_tools == ["web_search"] and c.clear_tool_inputs and not p.truncation.enabled
    assert C.anthropic_clear_tool_uses().clearing.clear_tool_inputs is False


def test_the_langchain_fragment_mirrors_clear_tool_uses_edit_defaults():
    c = C.langchain_context_editing().clearing
    assert (c.trigger_tokens, c.keep, c.clear_at_least_tokens, c.placeholder) == (100_000, 3, 0, "[cleared]")
    assert c.keep_unit == "tool_uses" and c.at_least_mode == "stop" and c.clear_tool_inputs is False


def test_every_fragment_round_trips_through_the_policy():
    for make in C.PRESET_FRAGMENTS.values():
        frag = make()
        p = Policy.load({"reduction": frag.model_dump(mode="json")})
        assert p.reduction == frag


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def test_both_languages_have_every_text_with_the_same_fields():
    en, zh = N.TEXTS["en"], N.TEXTS["zh"]
    assert set(en) == set(zh)
    for key in en:
        assert _fields(en[key]) == _fields(zh[key]), key


def test_archive_placeholders_never_read_as_a_failure():
    fields = dict(tool_name="deploy", tool_call_id="call_1", handle="ar_1", chars="1,000", tokens="250",
                  load_call='session_load(handle="ar_1", offset=0, limit=20000)')
    for key in ("cleared_placeholder", "force_cleaned_placeholder", "truncated_notice"):
        text = N.render(key, "en", limit="50,000-character", kept="1,000", images="", **fields).lower()
        assert not any(w in text for w in FAILURE_WORDS), key
        zh = N.render(key, "zh", limit=" 50,000 字符的", kept="1,000", images="", **fields)
        assert not any(w in zh for w in ("失败", "错误", "丢失", "不可用")), key
