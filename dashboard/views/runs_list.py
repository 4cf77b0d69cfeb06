"""Runs across every session of the project, with the sessions list's filters."""
from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..models import Project
from ..selectors.list_filters import filter_choices, parse_filters
from ..selectors.runs_list import DEFAULT_SORT, RUN_SORTS, runs_page
from ..services import ServiceError
from ._common import current_project, htmx_target, page


def _context(request: HttpRequest, project: Project | None) -> dict[str, Any]:
    filters = parse_filters(request.GET, tuple(RUN_SORTS), DEFAULT_SORT)
    error = listing = None
    if project is not None:
        try:
            listing = runs_page(project, filters, cursor=request.GET.get("cursor"), prev=request.GET.get("prev"))
        except ServiceError as exc:  # a cursor edited by hand: show the first page and say so
            error = str(exc)
            listing = runs_page(project, filters)
    choices = filter_choices(project) if project is not None else {}
    return {"filters": filters, "listing": listing, "list_error": error, "choices": choices}


@login_required
@require_GET
def runs_list(request: HttpRequest) -> HttpResponse:
    _projects, project = current_project(request)
    ctx = {"nav": "runs", "project": project, **_context(request, project)}
    if htmx_target(request) == "run-rows":
        return render(request, "pages/runs_list.html#rows", ctx)
    return page(request, "pages/runs_list.html", ctx)
