"""Runs across every session of the project, with the sessions list's filters."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..selectors.runs_list import DEFAULT_SORT, RUN_SORTS, runs_page
from ._common import current_project, htmx_target, list_context, page


@login_required
@require_GET
def runs_list(request: HttpRequest) -> HttpResponse:
    _projects, project = current_project(request)
    ctx = {"nav": "runs", "project": project, **list_context(request, project, tuple(RUN_SORTS), DEFAULT_SORT, runs_page)}
    if htmx_target(request) == "run-rows":
        return render(request, "pages/runs_list.html#rows", ctx)
    return page(request, "pages/runs_list.html", ctx)
