"""Archive browser: entries by run with sizes, search, full content paged by offset/limit,
and the replay check (archive + live context rebuild the original history exactly)."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from ..selectors import archive as archive_sel
from ..selectors.pages import archive_groups, load_entry, load_session
from ..services import ServiceError
from ._common import int_param, is_htmx, page

ITEMS_PER_PAGE = 10
SEARCH_LIMIT = 50


def entry_context(session, entry, request: HttpRequest) -> dict:
    offset = int_param(request, "offset", 0, 0, max(0, entry.item_count - 1))
    limit = int_param(request, "limit", ITEMS_PER_PAGE, 1, 100)
    items = archive_sel.entry_items(entry, offset, limit)
    return {"entry": entry, "items": items, "offset": offset, "limit": limit,
            "end": offset + len(items),
            "next_offset": offset + limit if offset + limit < entry.item_count else None,
            "prev_offset": max(0, offset - limit) if offset > 0 else None}


@login_required
@require_GET
def archive(request: HttpRequest, pk: int) -> HttpResponse:
    session = load_session(pk)
    run_id = int_param(request, "run", None, 1)
    q = request.GET.get("q", "").strip()[:500]
    ctx: dict = {"nav": "session", "tab": "archive", "session": session, "run_filter": run_id, "q": q}
    if q:
        items, nxt = archive_sel.search(session, q, request.GET.get("cursor"), SEARCH_LIMIT)
        ctx["hits"] = [{"item": i, "snippet": archive_sel.snippet(i.text, q)} for i in items]
        ctx["hits_next"] = nxt
    if is_htmx(request) and request.htmx.target == "archive-search-results":
        return render(request, "pages/archive.html#search-results", ctx)
    ctx["groups"] = archive_groups(session, run_id)
    entry_id = request.GET.get("entry")
    if entry_id:
        ctx.update(entry_context(session, load_entry(session, entry_id), request))
    return page(request, "pages/archive.html", ctx, project=session.project)


@login_required
@require_GET
def entry(request: HttpRequest, pk: int, entry_id: str) -> HttpResponse:
    """One entry's items, ``limit`` at a time from ``offset`` (an htmx partial; a plain
    request goes to the browser page with the entry open)."""
    session = load_session(pk)
    e = load_entry(session, entry_id)
    if not is_htmx(request):
        url = reverse("pages:archive", args=[session.pk]) + f"?entry={e.entry_id}"
        if request.GET.get("offset"):
            url += f"&offset={int_param(request, 'offset', 0)}"
        return redirect(url + "#entry-content")
    return render(request, "pages/archive.html#entry-content", {"session": session, **entry_context(session, e, request)})


@login_required
@require_GET
def replay_check(request: HttpRequest, pk: int) -> HttpResponse:
    session = load_session(pk)
    try:
        result = archive_sel.replay(session)
        result.pop("messages", None)
        error = None
    except ServiceError as exc:
        result, error = None, str(exc)
    return render(request, "pages/archive.html#replay", {"session": session, "replay": result,
                                                         "replay_error": error})
