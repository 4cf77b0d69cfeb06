"""``archive_links``: archive handles (``ar_`` and hex digits) in a text become links to
their entry in the session's archive browser.

The text is escaped first and only then searched; a handle is letters, digits and an
underscore, so the markup added around it can carry nothing the text brought in. Text that
is already HTML (sanitized Markdown) is searched between its tags only, outside links."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape
from django.utils.safestring import SafeData, SafeString, mark_safe

register = template.Library()

#: What compaction.archive writes ("ar_" + 16 hex digits), with room for longer digests.
HANDLE = re.compile(r"\bar_[0-9a-f]{8,64}\b")


@register.filter(needs_autoescape=True)
def archive_links(text: Any, session_pk: Any, autoescape: bool = True) -> SafeString:
    escaped = str(conditional_escape(text) if autoescape else text)
    if "ar_" not in escaped or not session_pk:
        return mark_safe(escaped)  # noqa: S308 - escaped just above
    base = reverse("pages:archive", args=[int(session_pk)])

    def link(m: re.Match[str]) -> str:
        handle = m.group(0)
        return f'<a class="handle" href="{base}?entry={handle}#entry-content" data-archive-handle="{handle}">{handle}</a>'

    if isinstance(text, SafeData):  # already HTML (rendered Markdown): link handles in text, never in a tag or link
        return mark_safe(_link_in_html(escaped, link))  # noqa: S308 - only text between tags changes
    return mark_safe(HANDLE.sub(link, escaped))  # noqa: S308 - the text is escaped, a handle is [a-z0-9_]


_TAG = re.compile(r"(<[^>]*>)")


def _link_in_html(html: str, link: Callable[[re.Match[str]], str]) -> str:
    out, in_link = [], 0
    for piece in _TAG.split(html):
        if piece.startswith("<"):
            name = piece[1:].split(None, 1)[0].rstrip(">/").lower() if len(piece) > 2 else ""
            if name == "a":
                in_link += 1
            elif name == "/a":
                in_link = max(0, in_link - 1)
            out.append(piece)
        else:
            out.append(piece if in_link else HANDLE.sub(link, piece))
    return "".join(out)


@register.filter(needs_autoescape=True)
def highlight(text: Any, q: Any, autoescape: bool = True) -> SafeString:
    """``text`` escaped, with each case-insensitive occurrence of ``q`` in ``<mark>``."""
    raw = "" if text is None else str(text)
    esc = conditional_escape if autoescape else str
    needle = str(q or "")
    if not needle:
        return mark_safe(str(esc(raw)))  # noqa: S308 - escaped
    parts = re.split(f"({re.escape(needle)})", raw, flags=re.IGNORECASE)
    # split with a group: odd pieces are the matches; every piece is escaped on its own
    out = [f'<mark class="hit">{esc(p)}</mark>' if i % 2 else str(esc(p)) for i, p in enumerate(parts)]
    return mark_safe("".join(out))  # noqa: S308 - every piece escaped


@register.filter
def mentions(text: Any, q: Any) -> bool:
    """Whether ``text`` contains ``q`` (case-insensitive; False for an empty ``q``)."""
    return bool(q) and str(q).lower() in str(text or "").lower()
