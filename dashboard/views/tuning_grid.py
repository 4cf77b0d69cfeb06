"""The tuning page's two-dimensional grid: start one (policy A of the tuning form, its trigger
against the kept tail or the clearing threshold), poll its progress, cancel it, and draw the
finished grid as a heatmap of cost with recall contours (dashboard.selectors.tuning_grids),
and put its recommended pair in use with one click (undone by the tuning page's undo).
Starting, cancelling and applying are owner actions: a grid stores rows and takes worker time."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from compaction import PolicyError

from ..models import ProjectRole, Session, TuningGrid
from ..selectors.access import check_access, session_for
from ..selectors.tuning import posted_policy
from ..selectors.tuning_grids import heatmap, latest_grid
from ..selectors.tuning_sweeps import DEFAULT_RECALL_TARGET, recall_target
from ..services import ServiceError
from ..services.tuning_apply import apply_grid_cell
from ..services.tuning_grids import DEFAULT_COLUMNS, DEFAULT_ROWS, cancel_grid, request_grid
from .tuning import APPLY_TARGETS

TEMPLATE = "partials/tuning_grid.html#grid-status"


def _context(session: Session, grid: TuningGrid | None, can_edit: bool, raw_target: str | None) -> dict[str, object]:
    """The grid's status block, its heatmap at the recall target asked for (a percentage; a
    bad one is named and the default used)."""
    try:
        target, target_error = recall_target(raw_target), ""
    except ValueError as exc:
        target, target_error = DEFAULT_RECALL_TARGET, str(exc)
    ctx: dict[str, object] = {"session": session, "grid": grid, "can_edit": can_edit, "apply_targets": APPLY_TARGETS,
                              "grid_target": f"{target * 100:g}", "grid_target_error": target_error}
    if grid is not None and grid.status == "done":
        ctx["heatmap"] = drawn = heatmap(grid, target)
        ctx["grid_apply_fields"] = {"cell": (drawn["recommendation"] or {}).get("cell")}
    return ctx


@login_required
@require_GET
def latest(request: HttpRequest, pk: int) -> HttpResponse:
    """The session's latest grid (the tuning page loads it into its grid section)."""
    session = session_for(request.user, pk)
    role = check_access(request.user, session.project_id)
    return render(request, TEMPLATE, _context(session, latest_grid(session), role == ProjectRole.OWNER,
                                              request.GET.get("recall_target")))


@login_required
@require_POST
def start(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a grid; a request the service refuses answers 400 with the reason in the block."""
    session = session_for(request.user, pk, need="edit")
    try:
        policy = posted_policy(session, request.POST, "a")
        grid = request_grid(session, policy, x_param=request.POST.get("grid_x", ""),
                            y_param=request.POST.get("grid_y", ""),
                            columns=request.POST.get("grid_columns", DEFAULT_COLUMNS),
                            rows=request.POST.get("grid_rows", DEFAULT_ROWS),
                            scope=request.POST.get("grid_scope", "project"))
    except (PolicyError, ServiceError) as exc:
        ctx = _context(session, None, True, None)
        return render(request, TEMPLATE, {**ctx, "grid_error": str(exc)}, status=400)
    return render(request, TEMPLATE, _context(session, grid, True, request.POST.get("recall_target")))


@login_required
@require_GET
def status(request: HttpRequest, pk: int) -> HttpResponse:
    """A grid's status block (polled while it runs)."""
    grid = get_object_or_404(TuningGrid.objects.select_related("session"), pk=pk)
    role = check_access(request.user, grid.project_id)
    return render(request, TEMPLATE, _context(grid.session, grid, role == ProjectRole.OWNER,
                                              request.GET.get("recall_target")))


@login_required
@require_POST
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Stop a queued or running grid; one already finished answers 400 saying so."""
    grid = get_object_or_404(TuningGrid.objects.select_related("session"), pk=pk)
    check_access(request.user, grid.project_id, need="edit")
    try:
        grid = cancel_grid(grid)
    except ServiceError as exc:
        return render(request, TEMPLATE, {**_context(grid.session, grid, True, None), "grid_error": str(exc)},
                      status=400)
    return render(request, TEMPLATE, _context(grid.session, grid, True, None))


@login_required
@require_POST
def apply(request: HttpRequest, pk: int) -> HttpResponse:
    """Put one cell's pair of settings (``cell``) in use for the grid's session or its project
    (``target``); answers what was applied, with an undo button."""
    grid = get_object_or_404(TuningGrid.objects.select_related("session"), pk=pk)
    check_access(request.user, grid.project_id, need="edit")  # the grid's session is in the same project
    session = grid.session
    ctx: dict[str, object] = {"session": session, "result_id": "grid-apply-result"}
    try:
        ctx["applied"] = apply_grid_cell(session, grid, int(request.POST.get("cell", "")), request.POST.get("target", ""))
    except ValueError:
        ctx["apply_error"] = "apply: the cell must be a number"
    except ServiceError as exc:
        ctx["apply_error"] = str(exc)
    return render(request, "pages/tuning.html#apply-result", ctx)
