"""Template filters of the dashboard pages.

Everything here returns plain strings or data for the template to escape, except
``markdown``: user and assistant text reaches the HTML either through Django's autoescape
or through ``markdown``, whose output nh3 has sanitized (dashboard.message_markdown).
"""
from __future__ import annotations

import json
import re
from typing import Any

from django import template
from django.utils.safestring import SafeString

from compaction import jsontext
from compaction.messages import text_of

from ..message_markdown import render_markdown
from ..models import CompactionRun
from ..selectors.workers import waiting_note

register = template.Library()

#: Characters of one message shown in the transcript before "show all" (keeps pages small).
CLIP_CHARS = 2000
#: A picture embedded in a message, in a format every browser shows (never SVG: it can script).
INLINE_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+\Z")


@register.filter
def tokens(value: Any) -> str:
    """61234 -> '61k', 1234 -> '1.2k', 950 -> '950', 2_400_000 -> '2.4M'."""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return "–"
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1000:
        return f"{sign}{int(round(n))}"
    if n < 10_000:
        text = f"{n / 1000:.1f}".rstrip("0").rstrip(".")
        return f"{sign}{text}k"
    if n < 1_000_000:
        return f"{sign}{int(round(n / 1000))}k"
    text = f"{n / 1_000_000:.1f}".rstrip("0").rstrip(".")
    return f"{sign}{text}M"


@register.filter
def thousands(value: Any) -> str:
    """12345 -> '12,345' (django.contrib.humanize is not installed)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "–"


@register.filter
def percent(value: Any, digits: int = 0) -> str:
    """0.8123 -> '81%'; None -> '–'."""
    if value is None or value == "":
        return "–"
    try:
        return f"{float(value) * 100:.{int(digits)}f}%"
    except (TypeError, ValueError):
        return "–"


@register.filter
def usd(value: Any) -> str:
    if value is None:
        return "–"
    v = float(value)
    if v == 0:
        return "$0"
    if v < 0.01:
        return f"${v:.4f}"
    return f"${v:,.2f}"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """{{ dict|get:key }}."""
    if isinstance(mapping, dict):
        return mapping.get(key)
    if isinstance(mapping, (list, tuple)):
        try:
            return mapping[int(key)]
        except (ValueError, IndexError, TypeError):
            return None
    return getattr(mapping, str(key), None)


@register.filter
def message_text(raw: Any) -> str:
    """The text of a message dict (string content or text parts)."""
    if not isinstance(raw, dict):
        return ""
    return text_of(raw.get("content"))


@register.filter
def clip(text: Any, limit: int = CLIP_CHARS) -> dict:
    """{'text': first ``limit`` characters, 'more': characters left out}."""
    text = "" if text is None else str(text)
    limit = int(limit)
    if len(text) <= limit:
        return {"text": text, "more": 0}
    return {"text": text[:limit], "more": len(text) - limit}


@register.filter
def media_parts(raw: Any) -> list[dict]:
    """Non-text parts of a message (images, audio, files) as short descriptions."""
    if not isinstance(raw, dict) or not isinstance(raw.get("content"), list):
        return []
    out = []
    for part in raw["content"]:
        if not isinstance(part, dict) or part.get("type") in ("text", "refusal"):
            continue
        kind = part.get("type", "part")
        detail, src = "", ""
        if kind == "image_url":
            url = (part.get("image_url") or {}).get("url", "") if isinstance(part.get("image_url"), dict) else ""
            detail = f"data URL, {len(url):,} characters" if url.startswith("data:") else url[:120]
            # only pictures carried in the message are shown; a remote one would be fetched by
            # every reader (and the CSP allows data: images only)
            src = url if INLINE_IMAGE.match(url) else ""
        elif kind == "file":
            detail = str((part.get("file") or {}).get("filename", "")) if isinstance(part.get("file"), dict) else ""
        out.append({"kind": kind, "detail": detail, "src": src})
    return out


@register.filter
def pretty_json(value: Any) -> str:
    """Tool-call arguments (a JSON string) indented for reading; other text unchanged, and so is
    JSON nested deeper than ``jsontext.MAX_DEPTH`` or holding NaN (shown as it was sent)."""
    if isinstance(value, str):
        try:
            value = jsontext.loads(value)
        except ValueError:
            return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)


@register.filter
def size(value: Any) -> str:
    """Characters -> '812 chars', '16.4 KB', '2.1 MB' (sizes of text, not bytes on disk)."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        return "–"
    if n < 1000:
        return f"{n} chars"
    if n < 1_000_000:
        return f"{n / 1000:.1f} KB"
    return f"{n / 1_000_000:.1f} MB"


@register.filter
def length_of(value: Any) -> int:
    return len(value) if value is not None else 0


@register.filter
def ratio(a: Any, b: Any) -> float | None:
    try:
        return float(a) / float(b) if float(b) else None
    except (TypeError, ValueError):
        return None


@register.filter
def jsonpretty(value: Any) -> str:
    """Any JSON-able value indented (policies, events)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def duration_words(value: Any) -> str:
    """A timedelta in words: "15 minutes", "1 hour 30 minutes", "45 seconds"."""
    seconds = int(value.total_seconds()) if hasattr(value, "total_seconds") else int(value or 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n} {unit}{'' if n == 1 else 's'}" for n, unit in ((hours, "hour"), (minutes, "minute"))
             if n]
    if secs and not hours:
        parts.append(f"{secs} second{'' if secs == 1 else 's'}")
    return " ".join(parts) or "0 seconds"


@register.simple_tag
def run_waiting(run: CompactionRun) -> str | None:
    """"waiting for a worker (none seen for N s) ..." while a queued run has no live worker."""
    return waiting_note(run)


@register.filter
def markdown(text: Any) -> SafeString:
    """User or assistant text rendered as Markdown and sanitized (dashboard.message_markdown)."""
    return render_markdown("" if text is None else str(text))
