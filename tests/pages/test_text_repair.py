"""dashboard.text_repair on its own: what a stored JSON text with lone surrogates becomes when
it is read back, and what a run that reads it is told it replaced
(test_stored_surrogates.py goes through the pages, the API and a run)."""
from __future__ import annotations

import json

from dashboard.text_repair import counting_repairs, repaired, repaired_json_text

LONE = '{"content":"a\\ud800b","name":"\\uDC00\\udfff"}'  # 3 lone surrogates, both escape cases
PAIR = '{"content": "smile \\ud83d\\ude00"}'                # an escaped pair: one valid character


def _load(text: str):
    return repaired(text, json.loads(text))


def test_lone_surrogates_become_replacement_characters_in_either_escape_case():
    assert _load(LONE) == {"content": "a\ufffdb", "name": "\ufffd\ufffd"}
    assert _load('["\\uD800"]') == ["\ufffd"]
    assert _load('["\\ud800"]') == ["\ufffd"]
    assert _load(PAIR) == {"content": "smile \U0001F600"}
    assert _load('{"content":"plain"}') == {"content": "plain"}


def test_a_run_is_told_how_many_values_and_characters_were_replaced():
    with counting_repairs() as count:
        assert (count.values, count.characters) == (0, 0)
        _load(LONE)
        _load('["\\ud800"]')
        _load(PAIR)
        _load('{"content":"plain"}')
    assert (count.values, count.characters) == (2, 4)


def test_reads_outside_a_counting_block_count_nowhere_and_blocks_do_not_share_counts():
    _load(LONE)  # no block open: nothing to report to, and no error
    with counting_repairs() as outer:
        with counting_repairs() as inner:
            _load(LONE)
        _load('["\\ud800"]')
    _load(LONE)
    assert (inner.values, inner.characters) == (1, 3)
    assert (outer.values, outer.characters) == (1, 1)


def test_a_stored_context_text_is_served_repaired_and_compact_or_as_it_was():
    assert repaired_json_text(LONE) == '{"content":"a\\ufffdb","name":"\\ufffd\\ufffd"}'
    assert repaired_json_text('[1, "\\uD800"]') == '[1,"\\ufffd"]'
    stored = json.dumps(["\ud800", "ok"])  # how the database holds one: a lower-case escape
    assert stored == '["\\ud800", "ok"]' and repaired_json_text(stored) == '["\\ufffd","ok"]'
    assert repaired_json_text(PAIR) == PAIR  # nothing lone: the stored text, spacing and all
    spaced = '{"content": "plain"}'
    assert repaired_json_text(spaced) == spaced
