"""The word budget: how many words a summary may take, and which items fit in them.

Budget: ``max_summary_words`` words (see :mod:`.words` for what a word is), held
below half the size of the input so a summary of a short span still shrinks it.
The budget is split across sections by weight; a section that needs less than its
share gives the rest back, and words left over at the end go to the sections that
were cut, in section order. Inside a section the best-ranked items are kept, the
last one cut to the room left when enough room remains to say something (a whole
sentence is never cut: a smaller item takes its place).

The "Names used" section is not part of that split: a share of the budget is held
back for it, and it gets whatever the other sections left, packed several names to a
line and without the names the other sections already show (see :func:`pack_names`).
"""
from __future__ import annotations

from .language import localize_line, words_of
from .sections import NAMES, TITLES, WEIGHTS, Item, Sections, Title
from .words import count_words, truncate_words

DEFAULT_WORDS = 600        # when the request states no budget
UNLIMITED_WORDS = 1500     # when the policy says 0 (no limit stated)
MIN_WORDS = 40
_SPARE_WORTH_SHARING = 12  # fewer spare words than this are not handed out again
NAMES_SHARE = 0.4          # of the room beyond a first part, held back for names no section shows
_NAMES_PER_LINE = 12


def word_budget(max_words: int | None, conversation: str, previous_summary: str | None) -> int:
    """Words the summary may take: the stated budget, at most half the input (never below a floor)."""
    if max_words is None:
        max_words = DEFAULT_WORDS
    elif max_words <= 0:
        max_words = UNLIMITED_WORDS
    input_words = count_words(conversation, stop_at=2 * max_words + 1)
    if previous_summary:
        input_words += count_words(previous_summary, stop_at=2 * max_words + 1)
    return max(min(max_words, MIN_WORDS), min(max_words, input_words // 2))


def _allocate(demand: dict[Title, int], budget: int) -> dict[Title, int]:
    """Split ``budget`` across sections by weight; sections that need less give the rest back."""
    alloc: dict[Title, int] = {}
    open_ = {t for t, d in demand.items() if d > 0}
    left = budget
    while open_:
        total_w = sum(WEIGHTS[t] for t in open_)
        shares = {t: left * WEIGHTS[t] / total_w for t in open_}
        settled = {t for t in open_ if demand[t] <= shares[t]}
        if not settled:
            for t in sorted(open_, key=TITLES.index):
                alloc[t] = int(shares[t])
            break
        for t in settled:
            alloc[t] = demand[t]
            left -= demand[t]
        open_ -= settled
    return alloc


def _heading_words(title: str) -> int:
    return count_words(title) + 1  # "## " is a word too


def _used(title: str, items: list[Item]) -> int:
    """Words a section takes when rendered: its items and, when it has any, its heading."""
    return sum(i.words() for i in items) + _heading_words(title) if items else 0


def _select(items: list[Item], room: int, title: str) -> list[Item]:
    """Best-ranked items that fit in ``room`` words (heading included), in output order."""
    room -= _heading_words(title)
    chosen: list[Item] = []
    seen: set[str] = set()
    for it in sorted(items, key=lambda i: i.rank, reverse=True):
        key = it.key or it.text
        if key in seen:
            continue
        w = it.words()
        if w <= room:
            chosen.append(it)
            seen.add(key)
            room -= w
        elif it.whole:
            continue   # kept whole or not at all; a smaller item may still fit
        elif room >= 8 or (not chosen and room >= 5):
            # Cut the item to the room left, unless only a useless stub would remain.
            cut = Item(truncate_words(it.text, room - 1), it.rank, it.order, key)
            chosen.append(cut)
            seen.add(key)
            room -= cut.words()
            break
        else:
            break
    return sorted(chosen, key=lambda i: i.order)


def fit(sections: Sections, room: int) -> Sections:
    """The items of each section that fit together in ``room`` words (English rendering)."""
    sections = {t: its for t, its in sections.items() if t != NAMES}
    demand: dict[Title, int] = {t: _used(t, its) for t, its in sections.items()}
    for t in TITLES:
        if t != NAMES:
            demand.setdefault(t, 0)
    alloc = _allocate(demand, room)
    chosen: Sections = {t: _select(sections[t], alloc.get(t, 0), t) for t in sections if alloc.get(t, 0) > 0}
    # Words some sections could not use go to the sections that were cut, in section order.
    spare = room - sum(_used(t, its) for t, its in chosen.items())
    if spare > _SPARE_WORTH_SHARING:
        for t in TITLES:
            if t in sections and demand[t] > alloc.get(t, 0):
                used_before = _used(t, chosen.get(t, []))
                extra = _select(sections[t], used_before + spare, t)
                chosen[t] = extra
                spare -= _used(t, extra) - used_before
                if spare <= _SPARE_WORTH_SHARING:
                    break
    return chosen


def pack_names(names: list[Item], room: int, shown: str) -> list[Item]:
    """The best-ranked names not already in ``shown`` (case-insensitive), several to a line,
    in at most ``room`` words (the heading included)."""
    room -= _heading_words(NAMES)
    low = shown.lower()
    picked: list[str] = []
    for it in names:
        if room <= 1:
            break
        if it.text.lower() in low or ", " in it.text:
            continue
        # Each line costs its bullet: one word more every _NAMES_PER_LINE names.
        cost = count_words(it.text) + (1 if len(picked) % _NAMES_PER_LINE == 0 else 0)
        if cost > room:
            continue
        picked.append(it.text)
        room -= cost
    return [Item(", ".join(picked[i:i + _NAMES_PER_LINE]), (0,), i) for i in range(0, len(picked), _NAMES_PER_LINE)]


def render(header: str, sections: Sections, language: str = "en") -> str:
    """The summary text: the header line, then each non-empty section under its heading."""
    words = words_of(language)
    parts = [header]
    for title in TITLES:
        items = sections.get(title)
        if items:
            parts.append(f"## {words[title]}\n" + "\n".join(f"- {localize_line(it.text, words, title)}" for it in items))
    return "\n\n".join(parts)
