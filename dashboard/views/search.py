"""Project-wide search page: messages and archived originals of the current project's
sessions; each hit opens the message in its session's timeline."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from compaction.archive_tools import SCOPES

from ..selectors import search as sel
from ..selectors.access import session_for
from ..services import ServiceError
from ._common import current_project, page

SCOPE_LABELS = {"all_sessions": "All sessions", "current_session": "This session only",
                "other_sessions": "Other sessions"}


@login_required
@require_GET
def search(request: HttpRequest) -> HttpResponse:
    q = (request.GET.get("q") or "").strip()[:500]
    scope = request.GET.get("scope") or "all_sessions"
    session = None
    raw_session = request.GET.get("session")
    if raw_session:
        if not raw_session.isdigit():
            raise Http404("no such session")
        # the session decides the project (and is checked the same way as its own page)
        session = session_for(request.user, int(raw_session))
    _projects, project = current_project(request, session.project if session else None)
    hits, error = [], None
    if project is not None and q:
        try:
            hits = sel.search(project.pk, q, scope=scope, session_id=session.pk if session else None, limit=sel.MAX_LIMIT)
        except ServiceError as exc:
            error = str(exc)
    scopes = [(s, SCOPE_LABELS[s]) for s in SCOPES if session is not None or s == "all_sessions"]
    return page(request, "pages/search.html", {"nav": "search", "project": project, "q": q, "scope": scope,
                                                "scopes": scopes, "session": session, "hits": hits, "error": error},
                project=project)
