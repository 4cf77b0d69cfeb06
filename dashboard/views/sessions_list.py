"""Sessions list: search, filters, sort, cursor pages, bulk delete (with a confirm step),
and the upload form (every import format)."""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from compaction.formats import FORMAT_LABELS as FORMAT_NAMES
from compaction.formats import FORMATS

from ..models import Project
from ..selectors.access import can_edit, check_access, project_for
from ..selectors.api_keys import api_base
from ..selectors.sessions_list import DEFAULT_SORT, SORT_NAMES, sessions_page
from ..services import ServiceError
from ..services.projects import create_project_for
from ..services.samples import load_samples as load_sample_sessions
from ..services.session_delete import delete_sessions, parse_ids, plan_delete
from ..services.uploads import import_uploads
from ._common import (
    PROJECT_KEY,
    current_project,
    htmx_target,
    is_htmx,
    list_context,
    page,
    safe_next,
)

# Each import format names itself (compaction.formats); "" lets the server detect it.
FORMAT_LABELS = {"": "Detect automatically", **FORMAT_NAMES}


def _list_context(request: HttpRequest, project: Project | None) -> dict[str, Any]:
    # api_base: the curl snippet of an empty project's first steps
    return {**list_context(request, project, SORT_NAMES, DEFAULT_SORT, sessions_page), "api_base": api_base(request),
            "can_edit": project is not None and can_edit(request.user, project.pk)}


def _upload_context(**extra: Any) -> dict[str, Any]:
    return {"formats": [(k, FORMAT_LABELS.get(k, k)) for k in ("", *FORMATS)], **extra}


@login_required
@require_GET
def sessions_list(request: HttpRequest) -> HttpResponse:
    _projects, project = current_project(request)
    ctx = {"nav": "sessions", "project": project, **_list_context(request, project), **_upload_context()}
    if htmx_target(request) == "session-rows":
        return render(request, "pages/sessions_list.html#rows", ctx)
    return page(request, "pages/sessions_list.html", ctx)


@login_required
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    """Import uploaded files or pasted text. All or nothing: if any file is invalid,
    nothing is imported and each fault is shown next to the form, naming file, line or
    index: a 400 page, or 413 when a session is over IMPORT_MAX_MESSAGES. htmx gets the form
    back (status 200, so the errors are swapped in)."""
    _projects, project = current_project(request)
    if project is not None:
        check_access(request.user, project.pk, need="edit")
    fmt = request.POST.get("format") or None
    title = request.POST.get("title", "").strip()[:500]
    text = request.POST.get("text", "")
    payloads = [(f.name or "upload", f.read()) for f in request.FILES.getlist("file")]
    if text.strip():
        payloads.append(("pasted text", text.encode("utf-8", "surrogatepass")))
    result = import_uploads(project, payloads, format=fmt, title=title)
    values = {"format": fmt or "", "title": title, "text": text} if result.errors else {}
    if not is_htmx(request):
        if not result.errors:
            return redirect("pages:sessions")
        ctx = {"nav": "sessions", "project": project, **_list_context(request, project),
               **_upload_context(upload_errors=result.errors, upload_values=values)}
        return page(request, "pages/sessions_list.html", ctx, status=result.status)
    response = render(request, "pages/sessions_list.html#upload",
                      _upload_context(upload_errors=result.errors, created=result.created, upload_values=values))
    if result.created:
        response["HX-Trigger"] = "sessions-changed"
    return response


@login_required
@require_POST
def create_project(request: HttpRequest) -> HttpResponse:
    """Create a project; its creator becomes its owner."""
    name = request.POST.get("name", "").strip()[:200]
    if name:
        try:
            project, _ = create_project_for(request.user, name)
        except ServiceError as exc:
            return page(request, "pages/sessions_list.html",
                        {"nav": "sessions", "project": None, "create_error": str(exc)}, status=400)
        request.session[PROJECT_KEY] = project.pk
    return redirect("pages:sessions")


@login_required
@require_POST
def delete(request: HttpRequest) -> HttpResponse:
    """Delete the ticked sessions. Without ``confirm`` it shows what would go (sessions,
    runs, archive entries) and asks; with it, deletes all of them or none and goes back to
    the list. A refusal (unknown id, a run in progress) is shown on the confirm page."""
    _projects, project = current_project(request)
    back = safe_next(request, request.POST.get("next"), reverse("pages:sessions"))
    ctx: dict[str, Any] = {"nav": "sessions", "project": project, "next": back}
    if project is None:
        return redirect("pages:sessions")
    check_access(request.user, project.pk, need="edit")
    try:
        ids = parse_ids(request.POST.getlist("session"))
        if request.POST.get("confirm") == "1":
            deleted = delete_sessions(project, ids)
            messages.success(request, f"Deleted {deleted} session{'s' if deleted != 1 else ''}.")
            return redirect(back)
        ctx["plan"] = plan_delete(project, ids)
    except ServiceError as exc:
        ctx["delete_error"] = str(exc)
        return page(request, "pages/sessions_delete.html", ctx, status=exc.status)
    return page(request, "pages/sessions_delete.html", ctx)


@login_required
@require_POST
def load_samples(request: HttpRequest, pk: int) -> HttpResponse:
    """The empty state's "load sample sessions": a few sessions of the operator's corpus
    (idempotent: pressing again adds nothing)."""
    project = project_for(request.user, pk, need="edit")
    load_sample_sessions(project)
    request.session[PROJECT_KEY] = project.pk
    return redirect("pages:sessions")
