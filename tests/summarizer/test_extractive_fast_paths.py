"""The extractive summarizer's shortcuts find exactly what the plain rules find.

Several detectors take a cheaper road on the common case (ASCII text, words without
"/" or ".", text without CJK full stops...). Each is checked here against its rule
written the plain way, on texts built from the pieces most likely to tell them apart:
letter cases Unicode folds specially, every kind of whitespace, CJK punctuation, paths
and URLs at word edges.
"""
from __future__ import annotations

import random
import re

import pytest

from compaction import identifiers
from compaction.summarizer.extractive import signals, transcript, words

CASES = 3000

_PIECES = [
    "Let me", "I'll", "i WILL", "because", "BeCause", "the fix", "THE ISSUE IS", "next, I", "now I", "root cause",
    "So That", "must", "mustn't", "Don't", "needs to", "required", "ſo that", "İ will", "ı'll", "KEEP", "Keep",
    "因为", "请", "します", "。", "！", "？", ".", "!", "?", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\x0b", "\x1c",
    "\u00a0", "\u3000", "abc", "x_y", "_", "**", "__", "src/app.py", "./a.sh", "C:\\Users\\me\\x.txt",
    "C:\\\\a\\\\b.py", "Makefile", "xMakefile", "README.md", "CMakeLists.txt", "https://x.org/a/b.py",
    "HTTP://Y.COM/z", "<", ">", "(", ")", "/tmp", "/srv/", "a/b/c", "2024/01/02", "`", "'", '"', "~/x.py",
    "../y.md", "self.map", "x.py:12:", ",", "@scope/pkg", "$HOME/a.sh", "-", "é", "中文", "…",
]


def _texts(seed: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(_PIECES) for _ in range(rnd.randint(0, 25))) for _ in range(CASES)]


def test_sentences_cut_where_the_plain_pattern_cuts():
    for text in _texts(1):
        plain = [s.strip() for s in signals._SENTENCE.split(text) if s and s.strip()]
        assert signals.sentences(text) == plain, repr(text)


@pytest.mark.parametrize("name", ["CONSTRAINT", "DECISION", "STRONG_DECISION", "PLAN"])
def test_phrases_are_found_as_the_case_insensitive_pattern_finds_them(name):
    phrases = getattr(signals, name)
    for text in _texts(2):
        assert phrases.found_in(text) == (phrases.pattern.search(text) is not None), repr(text)


def test_phrases_must_be_written_in_lower_case():
    with pytest.raises(ValueError):
        signals.Phrases(r"\bI will\b", "我将")


def _plain_count(text: str, stop_at: int | None) -> int:
    n = 0
    for _ in words._WORD.finditer(text):
        n += 1
        if stop_at is not None and n >= stop_at:
            break
    return n


def _plain_truncate(text: str, limit: int) -> str:
    if limit <= 0:
        return ""
    ends = [m.end() for m in words._WORD.finditer(text)]
    if len(ends) <= limit:
        return text
    return words.ELLIPSIS if limit == 1 else text[:ends[limit - 2]].rstrip() + " " + words.ELLIPSIS


def test_words_are_counted_and_cut_as_the_word_pattern_says():
    rnd = random.Random(3)
    for text in _texts(3):
        stop_at = rnd.choice([None, -1, 0, 1, 2, 5, 12])
        assert words.count_words(text, stop_at) == _plain_count(text, stop_at), (text, stop_at)
        limit = rnd.randint(-1, 12)
        assert words.truncate_words(text, limit) == _plain_truncate(text, limit), (text, limit)


def _plain_find_paths(text: str) -> list[str]:
    found = [u for m in identifiers.URL_RE.finditer(text) if (u := identifiers.clean_url(m.group(0)))]
    scrubbed = identifiers.URL_RE.sub(" ", text) if found else text
    return found + [p for m in identifiers.PATH_RE.finditer(scrubbed) if (p := identifiers.clean_path(m.group(0)))]


def test_paths_found_word_by_word_are_those_of_the_whole_text():
    for text in _texts(4):
        assert identifiers.find_paths(text) == _plain_find_paths(text), repr(text)


# The transcript header as first written: alternatives tried at every character.
_PLAIN_HEADER = re.compile(
    r"^\[(?P<role>user|assistant|system|developer)\]: "
    r"|(?:^|(?<=^\[assistant\]: ))\[Called tool: (?P<call>[^\s\[\]]+) with args: "
    r"|^\[(?P<tool>[^\[\]\n]{1,100}?) returned: ",
    re.MULTILINE)


def test_transcript_headers_are_found_where_the_plain_pattern_finds_them():
    rnd = random.Random(5)
    parts = ["[user]: ", "[assistant]: ", "[system]: ", "[developer]: ", "[Called tool: bash with args: ",
             "[bash returned: ", "[a b returned: ", "[assistant]: [Called tool: f with args: ", "\n", "x", "[", "]", " "]
    for _ in range(CASES):
        text = "".join(rnd.choice(parts) for _ in range(rnd.randint(0, 14)))

        def spans(pattern: re.Pattern[str], text: str = text) -> list[tuple[object, ...]]:
            return [(m.span(), m.group("role"), m.group("call"), m.group("tool")) for m in pattern.finditer(text)]

        assert spans(transcript._HEADER) == spans(_PLAIN_HEADER), repr(text)
