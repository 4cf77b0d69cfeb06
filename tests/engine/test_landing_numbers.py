"""The landing step's numbers at their edges (compaction/landing.py): settings up to 1 are
shares of the usable window, larger ones tokens; thresholds and warnings are measured against
the usable window (window minus reserved output), not the whole window."""
from compaction.landing import as_tokens, landing_target, threshold_warnings, trigger_threshold
from compaction.policy import Policy

WINDOW, RESERVED = 4000, 1000          # usable window: 3,000 tokens


def trigger(kind: str, value: float):
    field = "fraction" if kind == "window_fraction" else "threshold"
    return Policy.load({"trigger": {"kind": kind, field: value}}).trigger


def test_a_setting_up_to_one_is_a_share_of_the_usable_window_and_above_one_is_tokens():
    assert as_tokens(0.5, 3000) == 1500
    assert as_tokens(1, 3000) == 3000
    assert as_tokens(1.5, 3000) == 1
    assert as_tokens(2000, 3000) == 2000


def test_an_explicit_landing_target_is_a_share_of_the_usable_window():
    assert landing_target(0.5, trigger("tokens", 1_000_000), WINDOW, RESERVED) == 1500


def test_a_window_share_trigger_is_measured_against_the_usable_window():
    assert trigger_threshold(trigger("window_fraction", 0.8), WINDOW, RESERVED) == 2400


def test_only_thresholds_above_the_usable_window_warn():
    assert threshold_warnings(trigger("tokens", 3000), None, WINDOW, RESERVED) == []
    assert threshold_warnings(trigger("window_fraction", 1.0), None, WINDOW, RESERVED) == []
    above = threshold_warnings(trigger("tokens", 3001), None, WINDOW, RESERVED)
    assert len(above) == 1 and "3,001 tokens lies above the usable window of 3,000" in above[0]


def test_a_clearing_trigger_above_the_usable_window_warns_that_the_guard_comes_first():
    assert threshold_warnings(trigger("tokens", 2000), 3000, WINDOW, RESERVED) == []
    assert threshold_warnings(trigger("tokens", 2000), 3001, WINDOW, RESERVED) == [
        "reduction.clearing.trigger_tokens of 3,001 lies above the usable window of 3,000 tokens; "
        "the overflow guard compacts before clearing would"]
