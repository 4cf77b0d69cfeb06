"""Every text that tool-output reduction writes into a context, in each supported language.

Wording rules (they matter to the model reading them):
- a placeholder for an archived result says the call *ran* and where its output went, and
  tells the model to load it rather than repeat the call. Phrases such as "failed",
  "error", "missing" or "unavailable" make agents retry side-effecting tools, so they are
  never used for content we moved away on purpose;
- every notice names the handle and the exact ``session_load`` call that brings the text
  back, so recovery never depends on guessing.

Texts are ``str.format`` templates; :func:`render` fills them. Numbers are passed already
formatted (see :func:`num`) so both languages group digits the same way.
"""
from __future__ import annotations

from typing import Any

from .. import locales as _locales

# The texts live in the locale files (compaction/locales/<code>.py, section REDUCTION), one
# file per language, next to every other text the engine writes; this module only renders them.
LANGUAGES = tuple(_locales.available())

TEXTS: dict[str, dict[str, str]] = {code: _locales.own_section("REDUCTION", code) for code in LANGUAGES}


def num(n: int | float) -> str:
    """Digits grouped with commas (both languages use this form in technical text)."""
    return f"{int(n):,}"


def render(key: str, language: str = "en", **fields: Any) -> str:
    """Fill the template ``key`` in ``language`` (English when the language is unknown)."""
    template = (TEXTS.get(language) or {}).get(key) or TEXTS["en"][key]
    return template.format(**fields)


def load_call(handle: str, language: str, offset: int = 0, limit: int = 20_000) -> str:
    return render("load_call", language, handle=handle, offset=offset, limit=limit)


def tool_label(name: str | None, language: str) -> str:
    return name if name else render("unknown_tool", language)
