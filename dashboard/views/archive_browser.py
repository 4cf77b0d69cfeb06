"""Archive browser: entries by run with sizes, search, full content paged by offset/limit,
and the replay check (archive + live context rebuild the original history exactly)."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from ..models import StoredArchiveEntry
from ..selectors import archive as archive_sel
from ..selectors.access import session_for
from ..selectors.archive_browser import ITEMS_PER_PAGE, archive_groups, entry_context, load_entry
from ..services import ServiceError
from ._common import htmx_target, int_param, is_htmx, page

SEARCH_LIMIT = 50


def _query(request: HttpRequest) -> str:
    return request.GET.get("q", "").strip()[:500]


def _entry_context(request: HttpRequest, entry: StoredArchiveEntry) -> dict[str, Any]:
    """The entry's page, with the search text its hits are highlighted by."""
    return {**entry_context(entry, int_param(request, "offset", 0), int_param(request, "limit", ITEMS_PER_PAGE)),
            "q": _query(request), "hit_index": int_param(request, "hit", None, 0)}


@login_required
@require_GET
def archive(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk)
    run_id = int_param(request, "run", None, 1)
    q = _query(request)
    ctx: dict[str, Any] = {"nav": "session", "tab": "archive", "session": session, "run_filter": run_id, "q": q}
    if q:
        items, nxt = archive_sel.search(session, q, request.GET.get("cursor"), SEARCH_LIMIT)
        base = reverse("pages:archive", args=[session.pk])
        ctx["hits"] = [{"item": i, "snippet": archive_sel.snippet(i.text, q),
                        # the entry's page that starts at the hit, the hit marked and scrolled to
                        "url": f"{base}?{urlencode({'entry': i.entry.entry_id, 'offset': i.index, 'hit': i.index, 'q': q})}"
                               f"#archived-{i.entry.entry_id}-{i.index}"} for i in items]
        ctx["hits_next"] = nxt
        ctx["cursor"] = request.GET.get("cursor") or ""
    if htmx_target(request) == "archive-search-results":
        return render(request, "pages/archive.html#search-results", ctx)
    ctx["groups"] = archive_groups(session, run_id)
    entry_id = request.GET.get("entry")
    if entry_id:
        ctx.update(_entry_context(request, load_entry(session, entry_id)))
    return page(request, "pages/archive.html", ctx, project=session.project)


@login_required
@require_GET
def entry(request: HttpRequest, pk: int, entry_id: str) -> HttpResponse:
    """One entry's items, ``limit`` at a time from ``offset`` (an htmx partial; a plain
    request goes to the browser page with the entry open)."""
    session = session_for(request.user, pk)
    e = load_entry(session, entry_id)
    if not is_htmx(request):
        url = reverse("pages:archive", args=[session.pk]) + f"?entry={e.entry_id}"
        if request.GET.get("offset"):
            url += f"&offset={int_param(request, 'offset', 0)}"
        if _query(request):
            url += "&" + urlencode({"q": _query(request)})
        return redirect(url + "#entry-content")
    return render(request, "pages/archive.html#entry-content", {"session": session, **_entry_context(request, e)})


@login_required
@require_GET
def replay_check(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk)
    try:
        result, error = archive_sel.replay(session), None
        result.pop("messages", None)
    except ServiceError as exc:
        result, error = None, str(exc)
    return render(request, "pages/archive.html#replay", {"session": session, "replay": result,
                                                         "replay_error": error})
