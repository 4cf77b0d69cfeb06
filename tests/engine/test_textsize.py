"""compaction.textsize on its own: how a hostile text is cut before it reaches the tokenizer,
and how lone surrogates are repaired. Every test counts with a counter made in the test (a
plain function recording what it was given), so nothing is answered from a cache an earlier
test filled: the cut itself is what is checked. test_tokens.py checks the same paths through
the tiktoken counters."""
from __future__ import annotations

import json

from compaction import textsize
from compaction.textsize import (
    REPLACEMENT_CHARACTER,
    has_long_run,
    needs_care,
    replace_lone_surrogates,
    safe_count,
    slices,
    valid_unicode,
)


def recorder() -> tuple[list[str], object]:
    """A counter that counts characters and records each text it was asked about (a new
    function object each time, so the repeated-piece cache starts empty for it)."""
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return len(text)
    return calls, count


# -- where a text is cut -----------------------------------------------------------------------

def test_slices_cover_the_text_exactly_and_end_after_whitespace():
    text = "word " * 40_000                                   # 200k characters
    parts = slices(text)
    assert "".join(parts) == text
    assert all(len(p) <= textsize.SLICE_CHARS for p in parts[:-1])
    assert all(p.endswith(" ") for p in parts)              # no word split in two
    assert [len(p) for p in parts] == [65_535, 65_535, 65_535, 3_395]


def test_a_slice_ends_after_the_last_space_or_newline_near_its_end():
    text = "a" * 90 + " " + "b" * 5 + "\n" + "c" * 200
    assert slices(text, 100) == [text[:97], text[97:197], text[197:]]
    text = "a" * 90 + "\n" + "b" * 5 + " " + "c" * 200
    assert slices(text, 100)[0] == text[:97]


def test_a_slice_without_whitespace_near_its_end_is_cut_at_its_size():
    # whitespace only at the slice's first character, or more than 2,048 characters back
    assert slices(" " + "x" * 250, 100) == [" " + "x" * 99, "x" * 100, "x" * 51]
    text = "y " + "x" * 10_000
    assert [len(p) for p in slices(text, 4_000)] == [4_000, 4_000, 2_002]
    assert slices("", 100) == [] and slices("abc", 100) == ["abc"]
    assert slices("x" * 300, 100) == ["x" * 100] * 3


def test_a_long_run_is_a_word_of_4096_characters_or_2048_of_one_kind_of_whitespace():
    assert has_long_run("a" * 4096) and has_long_run("ok " + "=" * 4096 + " ok")
    assert not has_long_run("a" * 4095) and not has_long_run(("a" * 4000 + " ") * 5)
    for run in (" " * 2048, "\n" * 2048, "\t" * 2048, "\r\n" * 1024):
        assert has_long_run("x" + run + "y"), repr(run[:2])
    for run in (" " * 2047, "\n" * 2047, "\t" * 2047, "\r\n" * 1023, " \n" * 2000):
        assert not has_long_run("x" + run + "y"), repr(run[:2])
    assert not has_long_run("")


def test_only_big_texts_or_long_runs_past_16k_characters_need_care():
    assert not needs_care("x" * 16_384)                      # short: cheap even as one run
    assert needs_care("x" * 16_385)
    assert not needs_care("word " * 3_277 + "w")             # 16,386 ordinary characters
    assert not needs_care(("ordinary text " * 20_000)[:262_144])
    assert needs_care(("ordinary text " * 20_000)[:262_145])


# -- counting piece by piece -------------------------------------------------------------------

def test_an_ordinary_text_is_counted_whole_in_one_call():
    calls, count = recorder()
    text = "an ordinary tool output\n" * 500
    assert safe_count(count, text) == len(text)
    assert calls == [text]


def test_a_long_run_is_counted_in_pieces_and_a_repeated_piece_once():
    calls, count = recorder()
    text = "before the banner " * 1_000 + "=" * 5_000 + " after it " * 100
    assert safe_count(count, text) == len(text)              # every character counted exactly once
    assert calls == ["before the banner " * 1_000, "=" * 1_024, "=" * 904, " after it " * 100]


def test_a_long_run_of_mixed_characters_is_counted_piece_by_piece():
    calls, count = recorder()
    run = "abcd" * 1_500                                      # 6,000 characters, no whitespace
    text = run + " tail" + "x" * 11_000
    assert safe_count(count, text) == len(text)
    # " " between the two runs; the second run ("tail" + 11,000 x) starts with a mixed piece,
    # then its repeated pieces are counted once
    assert calls == [run[i:i + 1_024] for i in range(0, 6_000, 1_024)] + [" ", "tail" + "x" * 1_020, "x" * 1_024,
                                                                         "x" * (11_004 - 10 * 1_024)]
    assert all(calls)                                         # nothing empty is sent to the tokenizer


def test_a_whitespace_run_is_cut_and_a_big_text_is_sliced_first():
    calls, count = recorder()
    text = "x" * 8_000 + " " * 3_000 + "y" * 8_000
    assert safe_count(count, text) == len(text)
    assert " " * 1_024 in calls and " " * (3_000 - 2_048) in calls
    calls, count = recorder()
    big = "log line with some words and numbers 12345\n" * 8_000     # 352k characters
    assert safe_count(count, big) == len(big)
    assert calls == slices(big) and len(calls) == 6


def test_a_text_with_a_lone_surrogate_is_counted_with_it_replaced():
    calls, count = recorder()
    assert safe_count(count, "bad \ud800 text") == len("bad ? text")
    assert calls == ["bad ? text"]


def test_valid_unicode_replaces_lone_surrogates_only():
    ok = "naïve 🙂 text"
    assert valid_unicode(ok) is ok
    assert valid_unicode("a\ud800b\udfffc") == "a?b?c"


# -- lone surrogates in JSON values ------------------------------------------------------------

def test_lone_surrogates_are_replaced_in_strings_keys_and_lists_and_counted():
    value = {"k\ud800": ["ok", "x\udc00y\ud801", 3, None, {"deep": "\udfff"}], "n": 1.5}
    fixed, n = replace_lone_surrogates(value)
    r = REPLACEMENT_CHARACTER
    assert fixed == {f"k{r}": ["ok", f"x{r}y{r}", 3, None, {"deep": r}], "n": 1.5}
    assert n == 4


def test_a_value_without_lone_surrogates_comes_back_as_the_same_objects():
    value = {"a": ["x", {"b": "🙂"}], "arguments": '{"path": "/tmp"}', "n": 2}
    fixed, n = replace_lone_surrogates(value)
    assert fixed is value and n == 0
    items = ["a", ["b"]]
    assert replace_lone_surrogates(items) == (items, 0) and replace_lone_surrogates(items)[0] is items
    assert replace_lone_surrogates(7) == (7, 0) and replace_lone_surrogates(None) == (None, 0)


def test_an_escaped_lone_surrogate_in_tool_arguments_is_repaired_inside_the_json():
    r = REPLACEMENT_CHARACTER
    for escape in ("\\ud800", "\\uD800"):
        call = {"function": {"name": "write", "arguments": '{"text": "a' + escape + 'b", "n": 1}'}}
        fixed, n = replace_lone_surrogates(call)
        assert n == 1
        assert fixed["function"]["arguments"] == f'{{"text": "a{r}b", "n": 1}}'
        assert json.loads(fixed["function"]["arguments"]) == {"text": f"a{r}b", "n": 1}


def test_tool_arguments_that_only_look_escaped_are_kept_as_they_are():
    pair = '{"emoji": "\\ud83d\\ude00"}'                     # an escaped pair is one character, not lone
    not_json = 'text with \\ud800 in it'
    too_deep = "[" * 150 + '"\\ud800"' + "]" * 150
    for arguments in (pair, not_json, too_deep):
        value = {"arguments": arguments}
        fixed, n = replace_lone_surrogates(value)
        assert (fixed, n) == (value, 0), arguments[:30]
    # a raw lone surrogate in the arguments string is replaced as in any string, and an
    # escaped one beside it is repaired too
    fixed, n = replace_lone_surrogates({"arguments": '{"a": "\ud800", "b": "\\udc00"}'})
    assert n == 2
    assert json.loads(fixed["arguments"]) == {"a": REPLACEMENT_CHARACTER, "b": REPLACEMENT_CHARACTER}
    # arguments given as an object are walked like any value
    assert replace_lone_surrogates({"arguments": {"t": "\ud800"}}) == ({"arguments": {"t": REPLACEMENT_CHARACTER}}, 1)


def test_a_run_ending_in_a_one_character_piece_is_counted_too():
    calls, count = recorder()
    text = "start " * 3_000 + "=" * 4_097
    assert safe_count(count, text) == len(text)
    assert calls[-1] == "="


def test_repaired_arguments_keep_their_text_apart_from_the_repaired_characters():
    # a raw lone surrogate is repaired; the escaped pair beside it (one valid character) and the
    # spacing stay as the model wrote them: the arguments are not re-serialized for nothing
    arguments = '{"a":  "\ud800", "e": "\\ud83d\\ude00"}'
    fixed, n = replace_lone_surrogates({"arguments": arguments})
    assert n == 1
    assert fixed == {"arguments": '{"a":  "' + REPLACEMENT_CHARACTER + '", "e": "\\ud83d\\ude00"}'}


def test_only_tool_arguments_are_read_as_json_other_strings_are_text():
    # a tool output quoting JSON source with an escape in it is text: it is kept as written
    value = {"role": "tool", "content": '{"a": "\\ud800"}', "name": "\\ud800"}
    assert replace_lone_surrogates(value) == (value, 0)


def test_arguments_that_are_not_text_or_objects_are_left_alone():
    for arguments in (None, 5, 2.5, True, ["\\ud800"]):
        value = {"function": {"name": "f", "arguments": arguments}}
        assert replace_lone_surrogates(value) == (value, 0)


def test_whitespace_is_looked_for_in_the_last_2048_characters_of_a_slice_only():
    for ws in (" ", "\n"):
        # 2,048 back from the end of a 4,000-character slice is index 1,952: found there, not at 1,951
        assert len(slices("x" * 1_952 + ws + "x" * 5_000, 4_000)[0]) == 1_953
        assert len(slices("x" * 1_951 + ws + "x" * 5_000, 4_000)[0]) == 4_000
        assert len(slices("x" * 100 + ws + "x" * 5_000, 4_000)[0]) == 4_000
        # the last whitespace in reach, not the first
        assert len(slices("x" * 3_000 + ws + "x" * 500 + ws + "x" * 2_000, 4_000)[0]) == 3_502


def test_the_last_slice_is_not_cut_again():
    text = "word " * 10 + "tail"
    assert slices(text, 100) == [text]
    assert slices("a " * 60, 100) == ["a " * 50, "a " * 10]
