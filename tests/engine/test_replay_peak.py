"""A replay's peak context is the largest context the session held, so it never reads
lower than the final context (messages arriving after the last model call count)."""
from compaction import Policy
from compaction.preview import preview_policy
from compaction.simulate import run_simulation


def ending_with_tool_output() -> list[dict]:
    msgs = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Read the log."},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            # a large result arrives after the last model call
            {"role": "tool", "tool_call_id": "c1", "content": "log line " * 2000}]
    return msgs


def test_peak_is_never_below_final_when_the_history_grows_after_the_last_call():
    report = run_simulation(ending_with_tool_output(), {"name": "p", "trigger": {"kind": "tokens", "threshold": 900000}})
    assert report.final_context_tokens > 2000
    assert report.peak_context_tokens >= report.final_context_tokens


def test_the_no_compaction_peak_of_a_preview_is_never_below_its_final():
    p = preview_policy(ending_with_tool_output(), Policy.load(
        {"name": "p", "trigger": {"kind": "tokens", "threshold": 900000}}))
    assert p.baseline_peak >= p.baseline_final > 2000
