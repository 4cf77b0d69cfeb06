"""The evidence behind the overview's tuning sentence: one stored continuous tuning pass,
the sessions it replayed and the points of its sweep, with the tuning page's one-click apply
(to the project) and undo."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from ..models import ContinuousTuning, ProjectRole
from ..selectors.access import check_access
from ..selectors.continuous_tuning import evidence as read_evidence
from ..selectors.tuning_sweeps import sweep_label
from ._common import page


@login_required
@require_GET
def evidence(request: HttpRequest, pk: int) -> HttpResponse:
    tuning = get_object_or_404(ContinuousTuning.objects.select_related("project", "sweep__session"), pk=pk)
    role = check_access(request.user, tuning.project_id)
    ctx = {"nav": "overview", "tuning": tuning, "evidence": read_evidence(tuning), "can_edit": role == ProjectRole.OWNER,
           "sweep": tuning.sweep, "sweep_label": sweep_label(tuning.sweep) if tuning.sweep else ""}
    return page(request, "pages/tuning_evidence.html", ctx, project=tuning.project)
