"""The clear-at-least guard computes the edit on a copy and abandons it, changing nothing."""
from compaction.archive import MemoryArchive

from .helpers import commit, policy, reduce, run

OUT = "SELECT id, name FROM users WHERE active = 1;\n" * 30  # ~1.4k chars, ~330 tokens


def guarded(at_least, **kw):
    return policy(truncation={"enabled": False},
                  clearing={"trigger_tokens": 500, "keep": 1, "clear_at_least_tokens": at_least, **kw})


def test_the_guard_abandons_when_too_little_would_be_reclaimed_and_changes_nothing():
    raws = run(rounds=3, output=OUT)
    msgs, r = reduce(raws, guarded(50_000))
    assert r.messages is msgs
    assert r.entries == [] and r.ledger == [] and r.tokens_cleared == 0
    assert "clear-at-least guard" in r.abandoned
    (ev,) = [e for e in r.events if e["type"] == "tool_output_clearing_abandoned"]
    assert 0 < ev["tokens_reclaimable"] < 50_000 and ev["clear_at_least_tokens"] == 50_000
    assert all(m.reduction is None for m in msgs)  # the input messages were never touched
    assert not r


def test_the_guard_lets_the_edit_through_when_enough_is_reclaimed():
    raws = run(rounds=3, output=OUT)
    _, small = reduce(raws, guarded(0))
    reclaimable = small.tokens_cleared
    # (entry ids are random, so placeholders differ by a few tokens from run to run)
    _, r = reduce(raws, guarded(reclaimable - 50))
    assert r.abandoned is None and r.tokens_cleared >= reclaimable - 50
    _, r = reduce(raws, guarded(reclaimable + 50))
    assert r.abandoned and r.entries == []


def test_an_abandoned_clearing_leaves_the_archive_untouched():
    archive = MemoryArchive()
    _, r = reduce(run(rounds=3, output=OUT), guarded(50_000))
    commit(r, archive)
    assert archive.entries("s1") == []


def test_the_guard_discards_rewrites_and_post_processing_with_the_clearing():
    calls = []

    def rewrite(call_msg, results):
        calls.append(call_msg.id)
        return [{"role": "user", "content": "<system-reminder>file written</system-reminder>"}]

    def post(result):
        calls.append("post")

    msgs, r = reduce(run(rounds=3, output=OUT), guarded(50_000), hooks={"rewrite": rewrite, "post_process": post})
    assert calls == ["m000002", "m000004"]  # the hook ran on the copy; its edit went away
    assert r.messages is msgs and r.entries == []


def test_passes_that_already_ran_are_kept_when_only_the_clearing_is_abandoned():
    raws = [{"role": "user", "content": "first task"}]
    raws += run(rounds=2, output=OUT * 4)[2:]
    raws += [{"role": "user", "content": "second task"}] + run(rounds=3, output=OUT)[2:]
    raws += [{"role": "user", "content": "third task"}] + run(rounds=1, output=OUT)[2:]
    pol = policy(truncation={"enabled": False},
                 passes={"enabled": True, "keep_recent_requests": 1, "historical_max_tokens": 1000},
                 clearing={"trigger_tokens": 500, "keep": 1, "clear_at_least_tokens": 1_000_000})
    _, r = reduce(raws, pol)
    assert r.abandoned is None
    assert {row["phase"] for row in r.ledger} == {"pass1"} and len(r.ledger) == 2
    assert any(e["type"] == "tool_output_clearing_abandoned" for e in r.events)
