"""compaction.jsontext: the depth bound counts only brackets outside JSON strings, refuses
deep text before Python's parser can raise RecursionError, and NaN / infinities are refused
with the path of the value that holds them."""
from __future__ import annotations

import json

import pytest

from compaction import jsontext


@pytest.mark.parametrize("text, depth", [
    ("1", 0),
    ('{"a": [1, {"b": []}]}', 4),
    ('{"a": "[[[[[[[[[["}', 1),              # brackets inside a string do not count
    ('["\\"[[[[", "\\\\", [[]]]', 3),        # nor after escaped quotes and backslashes
    ('"unterminated [[[[', 0),
    ("]]][[", 0),                             # not JSON: never negative
])
def test_nesting_depth_counts_brackets_outside_strings(text, depth):
    assert jsontext.nesting_depth(text) == depth


def test_text_past_the_bound_is_refused_and_text_within_it_parses():
    within = "[" * jsontext.MAX_DEPTH + "]" * jsontext.MAX_DEPTH
    assert json.dumps(jsontext.loads(within)) == within.replace("][", "], [")
    for deep in ("[" * 3000 + "]" * 3000, '{"a": ' * 3000 + "1" + "}" * 3000,
                 "[" * (jsontext.MAX_DEPTH + 1) + "]" * (jsontext.MAX_DEPTH + 1)):
        with pytest.raises(jsontext.TooDeep):
            jsontext.loads(deep)
    # a string full of brackets is not deep
    assert jsontext.loads(json.dumps("[" * 3000)) == "[" * 3000


def test_a_document_deeper_than_the_parser_goes_is_too_deep_not_a_recursion_error():
    with pytest.raises(jsontext.TooDeep):
        jsontext.loads("[" * 100_000 + "]" * 100_000, max_depth=None)


@pytest.mark.parametrize("text, path, token", [
    ('{"messages": [{"role": "user"}, {"content": NaN}]}', "messages[1].content", "NaN"),
    ('{"x y": [1, 1e999999]}', '["x y"][1]', "1e999999"),
    ('[{"a": {"b": -Infinity}}]', "[0].a.b", "-Infinity"),
    ("Infinity", "", "Infinity"),
])
def test_non_finite_numbers_are_refused_naming_where(text, path, token):
    with pytest.raises(jsontext.NonFiniteNumber) as refused:
        jsontext.loads(text, max_depth=None)
    assert refused.value.path == path and refused.value.token == token
    with pytest.raises(jsontext.NonFiniteNumber):
        jsontext.raw_decode(text)


def test_finite_numbers_and_bytes_read_as_json_loads_reads_them():
    text = '{"f": 1.5e300, "i": 12, "s": "NaN", "u": "\\u00e9"}'
    assert jsontext.loads(text.encode("utf-16")) == json.loads(text)
    assert jsontext.loads(text.encode()) == json.loads(text)
