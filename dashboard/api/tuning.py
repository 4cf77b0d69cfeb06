"""Tuning grids over the API: start one (a policy's trigger against its kept tail or its
tool-output clearing threshold, replayed on the workers over a session or its project),
poll its progress and cells with the recommended pair at a recall target, cancel it, and
put one cell's pair of settings in use, the way the tuning page does."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Field, Router, Schema
from ninja.params import functions as param

from compaction.recommend import DEFAULT_RECALL_TARGET

from ..models import TuningGrid
from ..selectors.sessions import get_session
from ..selectors.tuning import starting_point
from ..selectors.tuning_grids import grid_cells, grid_recommendation
from ..services import NotFound
from ..services import policies as policy_service
from ..services.tuning_apply import apply_grid_cell
from ..services.tuning_grids import DEFAULT_COLUMNS, DEFAULT_ROWS, cancel_grid, request_grid
from .errors import ERROR_CODES
from .schemas import MAX_ID, Error, Input

router = Router(tags=["tuning"])
ERR = {code: Error for code in ERROR_CODES}
SessionId = Annotated[int, param.Path(ge=1, le=MAX_ID, description="Session id.")]
GridId = Annotated[int, param.Path(ge=1, le=MAX_ID, description="Grid id.")]
RecallTarget = Annotated[float, param.Query(DEFAULT_RECALL_TARGET * 100, ge=0, le=100, allow_inf_nan=False,
                                            description="Needed-context recall the recommended pair must keep, "
                                                        "in percent (default 98).")]


class GridIn(Input):
    x_param: Literal["window_fraction", "tokens"] = Field(
        "window_fraction", description="The trigger's kind, swept along the columns.")
    y_param: Literal["keep_messages", "clearing_fraction"] = Field(
        "keep_messages", description="The second setting, swept along the rows.")
    columns: int = Field(DEFAULT_COLUMNS, ge=2, le=12, description="Trigger settings tried.")
    rows: int = Field(DEFAULT_ROWS, ge=2, le=12, description="Second-setting values tried.")
    scope: Literal["project", "session"] = Field(
        "project", description="Replay the project's sessions (sampled to TUNING_SESSION_SAMPLE) or this one.")
    policy: dict[str, Any] | None = Field(None, description="A whole policy to start from (default: the session's).")
    preset: str | None = Field(None, description="A preset to start from instead.")
    overrides: dict[str, Any] = Field(default_factory=dict, description="Dotted settings applied on top.")


class ApplyIn(Input):
    cell: int = Field(ge=0, description="The cell's index (row × columns + column), as `recommendation.cell` gives.")
    target: Literal["session", "project"] = Field(
        description="session: this grid's session uses it; project: the project's active policy.")


class CellOut(Schema):
    index: int
    x: float = Field(description="The trigger setting.")
    y: float = Field(description="The second setting.")
    figures: dict[str, Any] = Field(description="Summed replay figures: tokens sent, cost, recall counts, compactions.")
    errors: list[str]


class RecommendationOut(Schema):
    cell: int | None = Field(description="The recommended cell, None when no pair meets the rule.")
    x: float | None = None
    y: float | None = None
    is_current: bool = False
    sentence: str


class GridOut(Schema):
    id: int
    session_id: int
    status: str = Field(description="queued, running, done, failed or cancelled.")
    scope: str
    x_param: str
    y_param: str
    x_values: list[float]
    y_values: list[float]
    current_x: float | None
    current_y: float | None
    done: int = Field(description="Replays finished.")
    total: int = Field(description="Replays in the grid (cells × sessions).")
    chunks_done: int
    chunks_total: int
    error: str
    cells: list[CellOut] = Field(description="Once done: every cell, row by row.")
    recommendation: RecommendationOut | None = Field(description="Once done: the pair the recall target picks.")


class AppliedOut(Schema):
    policy_id: int
    policy_name: str
    target: str
    previous_policy_id: int | None = Field(
        description="What was in use before (None: the project's policy, or the service default). To undo, "
                    "PUT it back: `PUT /api/sessions/{id}/policy` or `PUT /api/project/policy`.")


def _grid(project_id: int, grid_id: int) -> TuningGrid:
    grid = TuningGrid.objects.filter(project_id=project_id, pk=grid_id).select_related("session").first()
    if grid is None:
        raise NotFound(f"grid {grid_id} not found")
    return grid


def _grid_out(grid: TuningGrid, recall_target: float) -> dict[str, Any]:
    columns = len(grid.x_values)
    cells = grid_cells(grid) if grid.status == "done" else []
    rec = grid_recommendation(grid, cells, recall_target / 100) if cells else None
    return {
        "id": grid.pk, "session_id": grid.session_id, "status": grid.status, "scope": grid.scope,
        "x_param": grid.x_param, "y_param": grid.y_param, "x_values": grid.x_values, "y_values": grid.y_values,
        "current_x": grid.current_x, "current_y": grid.current_y, "done": grid.done, "total": grid.total,
        "chunks_done": grid.chunks_done, "chunks_total": grid.chunks_total, "error": grid.error,
        "cells": [{"index": c.y * columns + c.x, "x": grid.x_values[c.x], "y": grid.y_values[c.y],
                   "figures": c.figures.to_dict(), "errors": c.errors} for c in cells],
        "recommendation": rec,
    }


@router.post("/sessions/{session_id}/tuning/grids", response={202: GridOut, **ERR}, summary="Start a tuning grid")
def start_grid(request, session_id: SessionId, body: GridIn | None = None):
    """Queue a grid of the session's policy (or the one given): every trigger setting against
    every value of the second setting, replayed with the offline summarizer on the workers.
    Poll `GET /api/tuning/grids/{id}`. The body is optional (none: the defaults). A grid over TUNING_GRID_MAX_REPLAYS is refused (400)."""
    session = get_session(request.auth.pk, session_id)
    body = body or GridIn()
    if body.preset:
        policy = policy_service.build_policy(body.policy, body.preset, body.overrides)
    elif body.policy is not None or body.overrides:
        base = body.policy if body.policy is not None else starting_point(session).policy.to_json()
        policy = policy_service.build_policy(base, None, body.overrides)
    else:
        policy = starting_point(session).policy
    grid = request_grid(session, policy, x_param=body.x_param, y_param=body.y_param, columns=body.columns,
                        rows=body.rows, scope=body.scope)
    grid.refresh_from_db()
    return 202, _grid_out(grid, DEFAULT_RECALL_TARGET * 100)


@router.get("/tuning/grids/{grid_id}", response={200: GridOut, **ERR}, summary="A tuning grid")
def get_grid(request, grid_id: GridId, recall_target: RecallTarget = DEFAULT_RECALL_TARGET * 100):
    """Progress while it runs; once done, every cell's figures and the recommended pair: the
    lowest cost (tokens sent when a model has no price) with recall ≥ the target and no call
    over the window."""
    return _grid_out(_grid(request.auth.pk, grid_id), recall_target)


@router.post("/tuning/grids/{grid_id}/cancel", response={200: GridOut, **ERR}, summary="Cancel a tuning grid")
def cancel(request, grid_id: GridId):
    """Stops a queued or running grid (its chunks run no more replays); cancelling a cancelled
    grid again is not an error, one that finished otherwise is a 422."""
    grid = cancel_grid(_grid(request.auth.pk, grid_id))
    return _grid_out(grid, DEFAULT_RECALL_TARGET * 100)


@router.post("/tuning/grids/{grid_id}/apply", response={200: AppliedOut, **ERR}, summary="Put a grid cell in use")
def apply(request, grid_id: GridId, body: ApplyIn):
    """Saves the grid's policy with the cell's pair of settings as a stored policy named after
    them, and makes it the grid's session's policy or the project's active one."""
    grid = _grid(request.auth.pk, grid_id)
    applied = apply_grid_cell(grid.session, grid, body.cell, body.target)
    return {"policy_id": applied.row.pk, "policy_name": applied.row.name, "target": applied.target,
            "previous_policy_id": applied.previous.pk if applied.previous else None}
