"""Texts the engine writes into a context, one module per language.

Each language is one file, ``compaction/locales/<code>.py``, holding every text the
engine can put into a context in that language:

- ``TEXTS``: summary turn, acknowledgement, re-inserted messages (:mod:`compaction.finalize`);
- ``REDUCTION``: tool-output notices and placeholders, recovery tool descriptions
  (:mod:`compaction.reduction.notices` reads them from here);
- ``PROMPTS``: the summarizer's default prompt and its cache-safe compacting instruction
  (:mod:`compaction.summarizer.prompts` and :mod:`compaction.summarizer.cache_safe`);
- ``EXTRACTIVE``: label, headings and line prefixes of the offline extractive summary
  (:mod:`compaction.summarizer.extractive`).

Adding a language is one file: copy ``en.py`` to ``<code>.py`` and translate the values,
keeping every ``{placeholder}``. Keys it leaves out fall back to English.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache
from types import ModuleType
from typing import Literal, get_args

Section = Literal["TEXTS", "REDUCTION", "PROMPTS", "EXTRACTIVE"]
SECTIONS: tuple[Section, ...] = get_args(Section)
_CODE = re.compile(r"^[a-z]{2,3}(_[a-z0-9]+)*$")


@cache
def module(language: str) -> ModuleType | None:
    """The locale module of ``language`` (exact code, e.g. ``"zh"``), or None when there is none."""
    if not isinstance(language, str) or not _CODE.match(language):
        return None
    try:
        return importlib.import_module(f"{__name__}.{language}")
    except ModuleNotFoundError:
        return None


def has(language: str) -> bool:
    return module(language) is not None


@cache
def section(name: Section, language: str = "en") -> dict[str, str]:
    """One section (one of ``SECTIONS``) of a language, English filling gaps."""
    if name not in SECTIONS:
        raise ValueError(f"unknown locale section {name!r}; one of {', '.join(SECTIONS)}")
    mod = module(language)
    if mod is None:
        raise ValueError(f"no texts for language {language!r}; add compaction/locales/{language}.py")
    base = getattr(module("en"), name)
    return {**base, **getattr(mod, name, {})}


def texts(language: str = "en") -> dict[str, str]:
    """Finalize texts (summary turn, acknowledgement...) of ``language``."""
    return section("TEXTS", language)


def own_section(name: Section, language: str) -> dict[str, str]:
    """Only what the language's own file defines in ``name`` (no English fallback)."""
    mod = module(language)
    return dict(getattr(mod, name, {}) or {}) if mod is not None else {}


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if _CODE.match(m.name))


def display_name(language: str) -> str:
    mod = module(language)
    return getattr(mod, "NAME", language) if mod is not None else language
