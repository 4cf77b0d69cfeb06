"""Remove reasoning preambles that some models put in front of (or around) the answer.

Reasoning models served through OpenAI-compatible endpoints often return their
scratch work inside the message content: ``<think>...</think>`` (DeepSeek R1, Qwen),
``<analysis>...</analysis>`` (prompts that ask for analysis before the summary),
``<thinking>``/``<reasoning>``/``<reflection>`` blocks, or the harmony channel markup
of gpt-oss. None of that belongs in a summary that will sit in the context for the
rest of the session, so it is removed. A lone closing tag (servers that strip the
opening tag) drops everything before it. If what remains is wrapped in a single
``<summary>`` element, the wrapper is removed too.

litellm already moves a leading ``<think>`` block of OpenAI-compatible answers into
``reasoning_content``; this pass covers every other shape and every other route.
"""
from __future__ import annotations

import re

REASONING_TAGS = ("think", "thinking", "analysis", "reasoning", "reflection", "scratchpad")

_TAGS = "|".join(REASONING_TAGS)
# A complete block anywhere in the text; tags match case-insensitively and may carry attributes.
_BLOCK = re.compile(rf"<(?P<tag>{_TAGS})(?:\s[^>]*)?>.*?</(?P=tag)\s*>", re.IGNORECASE | re.DOTALL)
# A closing tag whose opening tag is missing: everything up to it is reasoning.
_ORPHAN_CLOSE = re.compile(rf"^.*</(?:{_TAGS})\s*>", re.IGNORECASE | re.DOTALL)
# An opening tag that is never closed: the model ran out of tokens while thinking.
_UNCLOSED_OPEN = re.compile(rf"<(?:{_TAGS})(?:\s[^>]*)?>", re.IGNORECASE)
_SUMMARY_WRAPPER = re.compile(r"^\s*<summary(?:\s[^>]*)?>(?P<body>.*)</summary>\s*$", re.IGNORECASE | re.DOTALL)
# gpt-oss "harmony" markup: keep the final channel's message.
_HARMONY_FINAL = re.compile(r"<\|channel\|>\s*final\s*<\|message\|>(?P<body>.*?)(?:<\|(?:end|return)\|>|$)", re.DOTALL)


def strip_thinking(text: str) -> str:
    """The answer part of ``text`` with reasoning blocks removed and whitespace trimmed."""
    if not text:
        return ""
    out = text
    if "<|channel|>" in out:
        final = _HARMONY_FINAL.search(out)
        if final:
            out = final.group("body")
    out = _BLOCK.sub("", out)
    out = _ORPHAN_CLOSE.sub("", out, count=1)
    unclosed = _UNCLOSED_OPEN.search(out)
    if unclosed and not out[: unclosed.start()].strip():
        # Nothing but unfinished reasoning: there is no answer.
        out = ""
    wrapped = _SUMMARY_WRAPPER.match(out)
    if wrapped:
        out = wrapped.group("body")
    return out.strip()
