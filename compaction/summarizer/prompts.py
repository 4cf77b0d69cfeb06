"""Summarizer prompts, their validation, and the messages sent to the summarizer model.

A prompt is a ``str.format`` template with up to three placeholders:

- ``{conversation_text}`` (required): the rendered span, see :mod:`.render`;
- ``{previous_summary}``: the summary being folded in, or ``none`` on a first run;
- ``{max_summary_words}``: the word budget.

The default prompt puts the previous summary and the conversation between tag
lines (``<previous_summary>``, ``<conversation>``). The offline extractive
summarizer reads them back from the request, so a custom prompt that wants the
extractive summarizer to see the previous summary should keep those tags too.
"""
from __future__ import annotations

import re
from typing import Any

from .. import locales as _locales
from ..policy import SummarizerPolicy

NO_PREVIOUS_SUMMARY = "none"

PREVIOUS_OPEN, PREVIOUS_CLOSE = "<previous_summary>", "</previous_summary>"
CONVERSATION_OPEN, CONVERSATION_CLOSE = "<conversation>", "</conversation>"

# The prompt texts live in the locale files (compaction/locales/<code>.py, section PROMPTS).
DEFAULT_PROMPT = _locales.section("PROMPTS", "en")["summary"]

LENGTH_RULE = _locales.section("PROMPTS", "en")["length_rule"]

LANGUAGE_NAMES = {
    "en": "English", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "fr": "French",
    "de": "German", "es": "Spanish", "it": "Italian", "pt": "Portuguese", "ru": "Russian",
    "nl": "Dutch", "pl": "Polish", "tr": "Turkish", "ar": "Arabic", "hi": "Hindi",
    "vi": "Vietnamese", "id": "Indonesian", "uk": "Ukrainian", "sv": "Swedish",
}


def language_name(code: str | None) -> str | None:
    if not code:
        return None
    base = code.replace("_", "-").split("-", 1)[0].lower()
    return LANGUAGE_NAMES.get(base, code)


def prompt_texts(language: str | None) -> tuple[dict[str, str], bool]:
    """(PROMPTS section, written in that language?). A language with its own locale file
    gets the prompt written in it; any other code gets the English prompt plus a sentence
    asking for the summary in that language."""
    if language and _locales.has(language):
        return _locales.section("PROMPTS", language), True
    return _locales.section("PROMPTS", "en"), False


def default_prompt(max_summary_words: int, language: str = "en", task_kept: bool = False) -> str:
    """The default template (still containing the three placeholders). ``task_kept``: the
    transcript's first user message stays in the context verbatim after the summary, so the
    summary is asked to point to it rather than restate it."""
    table, native = prompt_texts(language)
    name = language_name(language)
    language_rule = "" if native or name in (None, "English") else table["language_rule"].format(language=name)
    return table["summary"].format(
        length_rule=table["length_rule"] if max_summary_words > 0 else "",
        language_rule=language_rule,
        task_rule=table["task_kept_rule"] if task_kept else "",
        none=NO_PREVIOUS_SUMMARY,
        previous_open=PREVIOUS_OPEN, previous_close=PREVIOUS_CLOSE,
        conversation_open=CONVERSATION_OPEN, conversation_close=CONVERSATION_CLOSE,
    )


_KNOWN = re.compile(r"\{(conversation_text|previous_summary|max_summary_words)\}")


def fill(template: str, values: dict[str, str]) -> str:
    """Substitute placeholders. Validated templates go through ``str.format``; anything
    else (system prompts are only checked for {conversation_text}) gets a literal
    replacement of the known placeholders so stray braces cannot break it."""
    try:
        return template.format_map(values)
    except (KeyError, IndexError, ValueError, AttributeError):
        return _KNOWN.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def build_prompt_messages(conversation_text: str, settings: SummarizerPolicy, *, previous_summary: str | None = None,
                          language: str = "en", task_kept: bool = False) -> list[dict[str, Any]]:
    """The chat messages sent to the summarizer: an optional system message
    (``settings.system_prompt``) and one user message holding the conversation."""
    words = int(getattr(settings, "max_summary_words", 0) or 0)
    values = {
        "conversation_text": conversation_text,
        "previous_summary": previous_summary.strip() if previous_summary and previous_summary.strip()
        else NO_PREVIOUS_SUMMARY,
        "max_summary_words": str(words),
    }
    template = settings.prompt or default_prompt(words, language, task_kept)
    messages: list[dict[str, Any]] = []
    if settings.system_prompt:
        messages.append({"role": "system", "content": fill(settings.system_prompt, values)})
    messages.append({"role": "user", "content": fill(template, values)})
    return messages
