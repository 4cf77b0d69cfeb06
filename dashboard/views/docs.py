"""Docs page: the project's README and docs/*.md, readable from the dashboard's menu beside
the API reference that django-ninja serves at /api/docs."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from ..selectors.docs import available_docs, render_doc
from ._common import page


@login_required
@require_GET
def docs_index(request: HttpRequest) -> HttpResponse:
    return page(request, "pages/docs.html", {"nav": "docs", "docs": available_docs()})


@login_required
@require_GET
def doc(request: HttpRequest, slug: str) -> HttpResponse:
    current, html = render_doc(slug)
    # markdown-it rendered it with raw HTML off: the markup is its own, the text escaped
    return page(request, "pages/docs.html", {"nav": "docs", "docs": available_docs(), "doc": current,
                                             "doc_html": mark_safe(html)})  # noqa: S308
