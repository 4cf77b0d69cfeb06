"""Summarizer prompts and their validation."""
from __future__ import annotations

import string

PLACEHOLDERS = frozenset({"conversation_text", "previous_summary", "max_summary_words"})


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
