"""The rules a custom summarizer prompt must follow, checked when a policy is loaded.

Kept apart from the summarizer package because the policy validates prompts at load time,
and the summarizer itself reads the policy: the rules sit below both.
"""
from __future__ import annotations

import string

# Placeholders a standalone summarizer prompt may use, and those of the instruction appended
# to a cache-safe request (the conversation is already in that request).
PLACEHOLDERS = frozenset({"conversation_text", "previous_summary", "max_summary_words"})
CACHE_SAFE_PLACEHOLDERS = frozenset({"max_summary_words"})

__all__ = ["CACHE_SAFE_PLACEHOLDERS", "PLACEHOLDERS", "validate_cache_safe_prompt", "validate_prompt"]


def validate_prompt(prompt: str) -> str:
    """A custom prompt must contain {conversation_text} and use no other placeholder
    than {previous_summary} and {max_summary_words}; literal braces must be doubled."""
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(prompt) if name is not None}
    except ValueError as exc:
        raise ValueError(f"prompt is not a valid template ({exc}); write literal braces as {{{{ and }}}}") from None
    unknown = sorted(f for f in fields if f not in PLACEHOLDERS)
    if unknown:
        raise ValueError(f"prompt uses unknown placeholder(s) {', '.join('{'+u+'}' for u in unknown)}; "
                         f"allowed: {{conversation_text}}, {{previous_summary}}, {{max_summary_words}}")
    if "conversation_text" not in fields:
        raise ValueError("prompt must contain the {conversation_text} placeholder")
    return prompt


def validate_cache_safe_prompt(prompt: str) -> str:
    """The appended instruction may use {max_summary_words} only, and must not carry the transcript."""
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(prompt) if name is not None}
    except ValueError as exc:
        raise ValueError(f"prompt is not a valid template ({exc}); write literal braces as {{{{ and }}}}") from None
    if "conversation_text" in fields:
        raise ValueError("the cache-safe prompt must not contain {conversation_text}: the conversation is already "
                         "in the forked request")
    unknown = sorted(f for f in fields if f not in CACHE_SAFE_PLACEHOLDERS)
    if unknown:
        raise ValueError(f"cache-safe prompt uses unknown placeholder(s) {', '.join('{'+u+'}' for u in unknown)}; "
                         f"allowed: {{max_summary_words}}")
    if not prompt.strip():
        raise ValueError("the cache-safe prompt must not be empty")
    return prompt
