"""Sessions list: search, filters, cursor pages, and the upload form (every import format)."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from compaction.formats import FORMATS

from ..selectors.pages import sessions_page
from ..services import ServiceError
from ..services.keys import get_or_create_project
from ..services.sessions import convert_file_payload, import_session
from ._common import PROJECT_KEY, current_project, is_htmx, page

FORMAT_LABELS = {
    "": "Detect automatically",
    "openai": "OpenAI chat JSON (a session object, a message list, or a list of sessions)",
    "openai_jsonl": "OpenAI JSONL (one message per line)",
    "anthropic": "Anthropic Messages (tool_use / tool_result blocks)",
    "claude_code_jsonl": "Claude Code session JSONL",
}


def _filters(request: HttpRequest) -> dict:
    return {"q": request.GET.get("q", "")[:200], "compacted": request.GET.get("compacted") == "1",
            "over": request.GET.get("over") == "1"}


def _list_context(request: HttpRequest, project) -> dict:
    f = _filters(request)
    error = None
    if project is None:
        listing = None
    else:
        try:
            listing = sessions_page(project, q=f["q"], compacted=f["compacted"], over=f["over"],
                                    cursor=request.GET.get("cursor"), prev=request.GET.get("prev"))
        except ServiceError as exc:  # a cursor edited by hand: show the first page and say so
            error = str(exc)
            listing = sessions_page(project, q=f["q"], compacted=f["compacted"], over=f["over"])
    return {"filters": f, "listing": listing, "list_error": error}


def _upload_context(**extra) -> dict:
    return {"formats": [(k, FORMAT_LABELS.get(k, k)) for k in ("",) + tuple(FORMATS)], **extra}


@login_required
@require_GET
def sessions_list(request: HttpRequest) -> HttpResponse:
    projects, project = current_project(request)
    ctx = {"nav": "sessions", "project": project, **_list_context(request, project), **_upload_context()}
    if is_htmx(request) and request.htmx.target == "session-rows":
        return render(request, "pages/sessions_list.html#rows", ctx)
    return page(request, "pages/sessions_list.html", ctx)


@login_required
@require_POST
def upload(request: HttpRequest) -> HttpResponse:
    """Import uploaded files or pasted text. All or nothing: if any file is invalid,
    nothing is imported and each fault is shown next to the form, naming file, line or
    index. htmx gets the form back (status 200, so the errors are swapped in)."""
    _projects, project = current_project(request)
    errors: list[str] = []
    fmt = request.POST.get("format") or None
    title = request.POST.get("title", "").strip()[:500]
    text = request.POST.get("text", "")
    if fmt is not None and fmt not in FORMATS:
        errors.append(f"Unknown format {fmt!r}.")
    if project is None:
        errors.append("Create a project first.")
    payloads = [(f.name, f.read()) for f in request.FILES.getlist("file")]
    if text.strip():
        payloads.append(("pasted text", text.encode("utf-8", "surrogatepass")))
    if not payloads and not errors:
        errors.append("Choose one or more files, or paste a session.")
    converted = []
    if not errors:
        for name, data in payloads:
            try:
                converted.extend((name, s) for s in convert_file_payload(data, format=fmt, source=name))
            except ServiceError as exc:
                errors.append(str(exc))
    created = []
    if not errors:
        try:
            with transaction.atomic():
                for name, imported in converted:
                    if title and len(converted) == 1:
                        imported.title = title
                    created.append(import_session(project, imported, source=name).session)
        except ServiceError as exc:
            errors.append(str(exc))
            created = []
    if not is_htmx(request):
        if errors:
            ctx = {"nav": "sessions", "project": project, **_list_context(request, project),
                   **_upload_context(upload_errors=errors, upload_values={"format": fmt or "", "title": title,
                                                                         "text": text})}
            return page(request, "pages/sessions_list.html", ctx, status=400)
        return redirect("pages:sessions")
    ctx = _upload_context(upload_errors=errors, created=created,
                          upload_values={"format": fmt or "", "title": title, "text": text} if errors else {})
    response = render(request, "pages/sessions_list.html#upload", ctx)
    if created:
        response["HX-Trigger"] = "sessions-changed"
    return response


@login_required
@require_POST
def create_project(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()[:200]
    if name:
        project, _ = get_or_create_project(name)
        request.session[PROJECT_KEY] = project.pk
    return redirect("pages:sessions")
