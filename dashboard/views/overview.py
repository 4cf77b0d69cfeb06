"""The project overview, the home page after sign-in: is compaction working?"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ..selectors.overview import overview as read_overview
from ._common import current_project, page


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    _projects, project = current_project(request)
    data = read_overview(project) if project is not None else None
    return page(request, "pages/overview.html", {"nav": "overview", "project": project, "overview": data})
