"""The extractive summary of a rendered transcript: read it, build the sections, fit
them to the word budget, render them in the policy's language."""
from __future__ import annotations

from collections.abc import Iterable

from .budget import NAMES_SHARE, fit, pack_names, render, word_budget
from .language import parse_previous, words_of
from .sections import NAMES, build_sections
from .transcript import parse_transcript
from .words import count_words, truncate_words

_HOLD_NAMES_FROM = 150  # words of room the sections get first; names get a share of the rest
_MIN_ROOM = 8   # with no more words than this after the header line, the header alone is the summary


def summarize_text(conversation: str, previous_summary: str | None = None, max_words: int | None = None,
                   language: str = "en", kept_verbatim: Iterable[str] = ()) -> str:
    """The extractive summary of a rendered transcript (see :mod:`compaction.summarizer.extractive`).
    ``kept_verbatim``: user messages as the context keeps them word for word after the summary
    (a long one may be kept in part); the summary points to the task instead of repeating it,
    and leaves out constraints those texts already hold."""
    budget = word_budget(max_words, conversation, previous_summary)
    events = parse_transcript(conversation)
    previous, ours = parse_previous(previous_summary) if previous_summary else ({}, False)
    sections = build_sections(events, previous_summary, previous if ours else None, tuple(kept_verbatim))

    n_user = sum(1 for e in events if e.kind == "user")
    n_agent = sum(1 for e in events if e.kind == "assistant")
    n_calls = sum(1 for e in events if e.kind == "call")

    def header_in(lang: str) -> str:
        words = words_of(lang)
        h = f"{words['label']}: " + words["counts"].format(users=n_user, agents=n_agent, calls=n_calls)
        return h + (words["folded"] if previous_summary else "") + "."

    # The budget arithmetic runs on the English rendering (a CJK heading would count one
    # "word" per character); the chosen items are then rendered in the policy's language.
    header = header_in("en")
    room = budget - count_words(header)
    if room <= _MIN_ROOM:
        return truncate_words(header_in(language), budget)
    names = sections.get(NAMES, [])
    # A small budget goes to the sections first; names then take only what is left.
    held = int((room - _HOLD_NAMES_FROM) * NAMES_SHARE) if names and room > _HOLD_NAMES_FROM else 0
    chosen = fit(sections, room - held)
    text = render(header, chosen)
    if names:
        chosen[NAMES] = pack_names(names, budget - count_words(text), text)
        text = render(header, chosen)
    # Safety net: the heading/bullet arithmetic is exact, but never exceed the budget.
    if count_words(text) > budget:
        return truncate_words(text, budget)
    return text if language == "en" else render(header_in(language), chosen, language)
