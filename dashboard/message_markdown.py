"""User and assistant text as Markdown, made safe to put into a page.

Two layers, so that neither alone has to be right: markdown-it-py renders with raw HTML
off (``<script>`` typed in a message is shown as text, as the agent saw it) and refuses
``javascript:``-style link targets; nh3 (the ammonia sanitizer) then keeps only the tags
Markdown produces and only http, https and mailto links. Markdown images are not rendered
(a remote picture would be fetched by every reader; the page's CSP blocks it anyway):
``![alt](url)`` stays a link. Pictures sent as message parts are shown as thumbnails by
the message template instead.
"""
from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_MD = (MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
       .enable(["table", "strikethrough"]).disable("image"))

#: What the renderer above can produce; anything else is dropped by the sanitizer.
ALLOWED_TAGS = {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "s", "del", "code", "pre",
                "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td"}
#: Table-cell alignment (style="text-align:…") is dropped: the strict CSP ignores inline styles.
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = {"http", "https", "mailto"}


def render_markdown(text: str) -> SafeString:
    """``text`` as sanitized HTML (block elements; a plain line becomes one paragraph)."""
    html = _MD.render(text or "")
    clean = nh3.clean(html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=URL_SCHEMES,
                      link_rel="noopener noreferrer nofollow", strip_comments=True)
    return mark_safe(clean)  # nh3 has just removed everything not allowed above

