"""The summary's language: headings, label and line prefixes, and reading them back.

The summary is built with English headings and prefixes (the keys of the
``EXTRACTIVE`` locale section) and translated only when rendered. A previous
extractive summary, in any language the locales know, is read back into English
sections through the reverse tables, so its items can be merged with new ones.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from ...locales import available, has, section
from .sections import LEGACY_TITLES, OPEN_TASK, TASK_POINTER, TITLES

LABEL = "Extractive summary (no LLM)"   # the English label; each locale file has its own
Prefix = Literal["Task:", "Latest request:", "Request:", "Constraint:", "Open:", "Fixed:", "Plan:",
                 "Unanswered request:", "Pending call:", "Open request:", "Last agent message:", "Last tool call:"]
PREFIXES: tuple[Prefix, ...] = ("Task:", "Latest request:", "Request:", "Constraint:", "Open:", "Fixed:", "Plan:",
                                "Unanswered request:", "Pending call:", "Open request:", "Last agent message:",
                                "Last tool call:")


def words_of(language: str) -> dict[str, str]:
    """The ``EXTRACTIVE`` locale texts of ``language`` (English when there is no such locale)."""
    return section("EXTRACTIVE", language if has(language) else "en")


def _reverse_tables() -> tuple[tuple[str, ...], dict[str, str], dict[str, str], dict[str, str]]:
    """(labels of every language, local heading -> English title, local prefix -> English prefix,
    local note word -> English note word)."""
    labels: list[str] = []
    headings: dict[str, str] = {}
    prefixes: dict[str, str] = {}
    notes: dict[str, str] = {}
    for lang in available():
        words = words_of(lang)
        labels.append(words["label"])
        notes.update({words["note:" + w]: w for w in NOTE_WORDS if words.get("note:" + w, w) != w})
        headings.update({words[t]: t for t in TITLES})
        # Summaries written before the sections were split are read into today's sections.
        headings.update({words[old]: new for old, new in LEGACY_TITLES.items() if old in words})
        prefixes.update({words[p]: p for p in PREFIXES})
    return tuple(labels), headings, prefixes, notes


# Words of the closing note of file and error items ("x.py (created, edited ×2)",
# "... (after `pytest`)"); each locale has them as "note:<word>".
NOTE_WORDS = ("in output", "rewritten", "created", "edited", "patched", "deleted", "copied", "written", "touched",
              "moved", "appended", "copy of", "restored from git", "by a Python script", "via", "removed",
              "unchanged", "undo", "edits", "at line", "lines", "line", "fix", "after", "in")
# File items name their path first, so their note starts at the first " ("; error lines can
# hold " (" themselves, so theirs starts at the last.
_FIRST_PAREN_SECTIONS = ("Files edited", "Files read", "Other paths")
NOTED_SECTIONS = ("Files edited", "Files read", "Other paths", "Errors")


def _swap_note(text: str, table: Mapping[str, str], first: bool = False) -> str:
    """``text`` with the words of its closing ``(...)`` note replaced through ``table``
    (text between backticks, a command or a piece of code, is left as it is). ``first``: the
    note starts at the first " (" (file items), else at the last (error lines)."""
    if not text.endswith(")") or " (" not in text or not table:
        return text
    head, note = text.split(" (", 1) if first else text.rsplit(" (", 1)
    pattern = re.compile("|".join(re.escape(w) for w in sorted(table, key=len, reverse=True)))
    parts = note.split("`")
    for i in range(0, len(parts), 2):  # outside backticks only
        parts[i] = pattern.sub(lambda m: table[m.group(0)], parts[i])
    return head + " (" + "`".join(parts)


def localize_line(text: str, words: dict[str, str], title: str = "") -> str:
    """An item line with its English prefix ("Task:"...) and, in file and error sections, the
    words of its closing note in the language of ``words``."""
    if text == TASK_POINTER:
        return words["task_pointer"]
    if text == OPEN_TASK:
        return words["open_task"]
    if title in NOTED_SECTIONS:
        text = _swap_note(text, {w: words.get("note:" + w, w) for w in NOTE_WORDS if words.get("note:" + w, w) != w},
                          title in _FIRST_PAREN_SECTIONS)
    for p in PREFIXES:
        if text.startswith(p):
            return words[p] + (" " if words[p].endswith(":") else "") + text[len(p):].lstrip()
    return text


def parse_previous(previous: str) -> tuple[dict[str, list[str]], bool]:
    """Sections of a previous extractive summary ({English title: [bullet texts]}) and True;
    ``({}, False)`` when the previous summary is not an extractive one (prose from an LLM)."""
    labels, headings, prefixes, notes = _reverse_tables()
    if not previous.lstrip().startswith(labels):
        return {}, False
    whole = {words_of(lang)[key]: line for lang in available()
             for key, line in (("task_pointer", TASK_POINTER), ("open_task", OPEN_TASK))}
    sections: dict[str, list[str]] = {}
    current = None
    for line in previous.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            current = headings.get(title, title)
            sections.setdefault(current, [])
        elif current and line.startswith("- "):
            item = line[2:].strip()
            if item in whole:
                sections[current].append(whole[item])
                continue
            for local, english in prefixes.items():
                if item.startswith(local) and local != english:
                    item = english + " " + item[len(local):].lstrip()
                    break
            if current in NOTED_SECTIONS:
                item = _swap_note(item, notes, current in _FIRST_PAREN_SECTIONS)
            sections[current].append(item)
    return sections, True
