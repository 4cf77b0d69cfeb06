"""``archive_links``: archive handles (``ar_`` and hex digits) in a text become links to
their entry in the session's archive browser.

The text is escaped first and only then searched; a handle is letters, digits and an
underscore, so the markup added around it can carry nothing the text brought in."""
from __future__ import annotations

import re
from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

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

    return mark_safe(HANDLE.sub(link, escaped))  # noqa: S308 - the text is escaped, a handle is [a-z0-9_]
