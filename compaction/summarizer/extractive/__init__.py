"""Offline extractive summarizer, reachable through litellm as ``extractive/default``.

No model, no network: the summary is assembled from pieces of the transcript
itself, picked by simple and predictable rules, so the same request always gives
the same bytes. It is the default when a policy names no summarizer model, and it
is labelled as extractive in its first line so nobody mistakes it for an LLM
summary.

How a summary is made, one module per step:

- :mod:`.request` reads the prompt back: transcript, previous summary, word budget;
- :mod:`.transcript` parses the transcript into events (messages, calls, results);
- :mod:`.file_ops` reads what each call did to files (read, created, edited, deleted,
  moved, with the change in one line) from what it ran, not from its tool's name;
- :mod:`.signals` holds the detectors: paths and URLs (shared with the retention
  score through :mod:`compaction.identifiers`), placeholder paths, outcomes, errors,
  test runners' tallies, harness boilerplate, constraint, decision and plan sentences;
- :mod:`.sections` turns events into ranked items under each heading (what each
  section keeps is described there);
- :mod:`.budget` fits the items into the word budget and renders them;
- :mod:`.language` translates headings and prefixes, and reads earlier summaries
  written in any language back;
- :mod:`.words` counts words as the budget does; :mod:`.summary` ties these together;
- :mod:`.provider` answers a chat request with it (the summarizer's request loop calls it in
  process) and registers it as a litellm custom provider for code that calls litellm itself.

Everything is regex scanning over the text, linear in its size: a megabyte of
transcript takes a fraction of a second.
"""
from .budget import DEFAULT_WORDS, MIN_WORDS, UNLIMITED_WORDS
from .language import LABEL, parse_previous
from .provider import EXTRACTIVE_MODEL, PROVIDER, register
from .request import parse_request
from .sections import verbatim_key
from .summary import summarize_text
from .transcript import Event, parse_transcript
from .words import count_words, squash, truncate_words

__all__ = [
    "EXTRACTIVE_MODEL", "PROVIDER", "LABEL", "DEFAULT_WORDS", "UNLIMITED_WORDS", "MIN_WORDS",
    "summarize_text", "register", "parse_request", "parse_transcript", "parse_previous", "Event",
    "count_words", "truncate_words", "squash", "verbatim_key",
]
