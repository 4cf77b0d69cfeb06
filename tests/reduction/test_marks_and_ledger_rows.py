"""Typed reduction marks and ledger rows read and write exactly the stored dict forms."""
import json

import pytest

from compaction.reduction.marks import ReductionMark, mark_of
from compaction.reduction.result import ReductionLedgerRow

from .helpers import call, policy, reduce, run

OUT = "def handler(request):\n    return render(request, 'page.html', context)\n" * 40


def clearing(**kw):
    return policy(truncation={"enabled": False}, clearing={"trigger_tokens": 1000, "trigger_fraction": None,
                                                           "keep": 1, **kw})


def collapse_writes(call_msg, results):
    if call_msg.tool_calls[0]["function"]["name"] != "write_file":
        return None
    return [{"role": "user", "content": "<system-reminder>You wrote a file earlier.</system-reminder>"}]


def marked_messages():
    args = json.dumps({"path": "src/app.py", "content": OUT})
    raws = [{"role": "user", "content": "write it"}]
    for i in range(4):
        raws += [{"role": "assistant", "content": None, "tool_calls": [call(f"w{i}", "write_file", args)]},
                 {"role": "tool", "tool_call_id": f"w{i}", "content": OUT}]
    _, cleared = reduce(raws, clearing(clear_tool_inputs=True))
    _, rewritten = reduce(raws, clearing(), hooks={"rewrite": collapse_writes})
    _, truncated = reduce(run(rounds=3, output=OUT * 8), policy(
        truncation={"enabled": False}, clearing={"enabled": False},
        passes={"enabled": True, "keep_recent_requests": 0, "historical_max_tokens": 100_000,
                "oversized_max_tokens": 500}))
    return [m for r in (cleared, rewritten, truncated) for m in r.messages if m.reduction], [cleared, truncated]


def test_every_mark_shape_round_trips_through_the_typed_form():
    marked, _ = marked_messages()
    kinds = {(m.reduction["kind"], m.reduction.get("field")) for m in marked}
    assert kinds == {("cleared", None), ("cleared", "arguments"), ("rewritten", None), ("truncated", None)}
    for m in marked:
        mark = mark_of(m)
        assert mark is not None and mark.kind == m.reduction["kind"]
        assert list(mark.to_dict().items()) == list(m.reduction.items())
        assert ReductionMark.from_dict(mark.to_dict()) == mark


def test_unknown_keys_of_a_stored_mark_are_kept_and_an_unknown_kind_is_refused():
    stored = {"kind": "cleared", "archive_ref": "ar_1", "tool_call_id": "c1", "tool_name": "bash",
              "phase": "clearing", "original_chars": 10, "original_tokens": 3, "note": "from elsewhere"}
    assert ReductionMark.from_dict(stored).to_dict() == stored
    with pytest.raises(ValueError):
        ReductionMark.from_dict({"kind": "shredded"})


def test_reduction_ledger_rows_are_typed_and_the_ledger_keeps_its_dict_form():
    _, results = marked_messages()
    for r in results:
        assert r.ledger_rows and r.ledger == [row.to_dict() for row in r.ledger_rows]
        assert [ReductionLedgerRow.from_dict(d) for d in r.ledger] == r.ledger_rows
        assert r.to_dict()["ledger"] == r.ledger
