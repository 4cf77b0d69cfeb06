"""Words as the extractive summary's budget counts them.

A CJK character counts as one word and any other run of non-space characters
(bullets and headings included) as one, so a budget means about the same amount of
text in every language.

Text without CJK characters (checked as "ASCII only", which Python knows without
scanning) is counted with ``str.split``: its words are then exactly the
whitespace-separated runs, and splitting in C is much faster than walking regex matches.
"""
from __future__ import annotations

import re

_CJK = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\u3040-\u30ff\uff00-\uffef"
_WORD = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
ELLIPSIS = "…"


def count_words(text: str, stop_at: int | None = None) -> int:
    """Words as the budget counts them: each CJK character, each other non-space run."""
    if text.isascii() and (stop_at is None or stop_at >= 1):
        if stop_at is None:
            return len(text.split())
        return min(len(text.split(None, stop_at)), stop_at)   # never more than stop_at + 1 pieces
    n = 0
    for _ in _WORD.finditer(text):
        n += 1
        if stop_at is not None and n >= stop_at:
            break
    return n


def truncate_words(text: str, limit: int) -> str:
    """At most ``limit`` words of ``text``; a cut is shown by a trailing ellipsis (one word)."""
    if limit <= 0:
        return ""
    if text.isascii():
        return _truncate_split_words(text, limit)
    ends: list[int] = []
    for m in _WORD.finditer(text):
        ends.append(m.end())
        if len(ends) > limit:
            break
    if len(ends) <= limit:
        return text
    if limit == 1:
        return ELLIPSIS
    return text[:ends[limit - 2]].rstrip() + " " + ELLIPSIS


def _truncate_split_words(text: str, limit: int) -> str:
    """:func:`truncate_words` of a text whose words are its whitespace-separated runs."""
    if len(text.split(None, limit)) <= limit:
        return text
    if limit == 1:
        return ELLIPSIS
    # The last piece of a split stopped after limit - 1 words is the text from word `limit` on:
    # what comes before it is the kept words, with the text's own spacing between them.
    rest = text.split(None, limit - 1)[-1]
    return text[:len(text) - len(rest)].rstrip() + " " + ELLIPSIS


def squash(text: str, max_words: int = 120, max_chars: int | None = None) -> str:
    """One line: whitespace collapsed, at most ``max_words`` words (cheap on huge input) and,
    with ``max_chars``, about that many characters: a tool's output line can be one run of
    hundreds of characters (base64, a minified line) that the budget counts as one word but
    that costs a hundred tokens."""
    head = text[: max_words * 24 + 64]
    line = truncate_words(" ".join(head.split()), max_words)
    if max_chars is None or len(line) <= max_chars:
        return line
    return line[:max_chars].rstrip() + ELLIPSIS
