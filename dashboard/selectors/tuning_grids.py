"""Reads of tuning grids for the tuning page: the session's latest grid, its cells as a
heatmap of cost (an SVG drawn here, no script needed) with contours of needed-context
recall, and the recommended cell by the sweep's rule (``compaction.recommend``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction.figures import ReplayFigures
from compaction.recommend import DEFAULT_RECALL_TARGET, SweepPoint, recommend, setting_text

from ..models import Session, TuningGrid
from ..services.tuning_grids import AXES, y_text
from ..services.tuning_sweeps import SWEEP_KINDS

#: Heatmap geometry (SVG user units): cell size and the margins that hold the axis labels.
CELL_W, CELL_H = 86, 46
LEFT, TOP, BOTTOM = 96, 8, 58
#: Cost colours, low to high (a sequential yellow-orange-brown ramp).
RAMP = ((255, 247, 188), (254, 217, 118), (254, 153, 41), (217, 95, 14), (127, 39, 4))
#: Recall levels drawn as contours beside the target (which is drawn bold).
CONTOUR_LEVELS = (0.9, 0.95)


def latest_grid(session: Session) -> TuningGrid | None:
    return TuningGrid.objects.filter(session_id=session.pk).order_by("-pk").first()


def x_text(kind: str, value: float) -> str:
    if kind == "tokens":
        return f"{value / 1000:g}k" if value >= 1000 else f"{int(value)}"
    return setting_text(kind, value)


def _colour(t: float) -> str:
    """The ramp's colour at ``t`` in 0..1, as #rrggbb."""
    t = min(1.0, max(0.0, t))
    pos = t * (len(RAMP) - 1)
    i = min(int(pos), len(RAMP) - 2)
    f = pos - i
    rgb = (round(a + (b - a) * f) for a, b in zip(RAMP[i], RAMP[i + 1]))
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _usd(value: float | None) -> str:
    if value is None:
        return "no price"
    return f"${value:,.2f}" if value >= 1 else f"${value:.3f}"


def _pct(share: float | None) -> str:
    return "–" if share is None else f"{share * 100:.1f}%"


@dataclass(frozen=True)
class Cell:
    x: int
    y: int
    figures: ReplayFigures
    errors: list[str]

    @property
    def recall(self) -> float:
        """Recall for the contours: a cell whose calls needed nothing counts as full."""
        r = self.figures.recall
        return 1.0 if r is None else r


def grid_cells(grid: TuningGrid) -> list[Cell]:
    columns = len(grid.x_values)
    return [Cell(i % columns, i // columns, ReplayFigures.from_dict(c), list(c.get("errors", [])))
            for i, c in enumerate(grid.cells or [])]


def _centre(grid: TuningGrid, x: float, y: float) -> tuple[float, float]:
    """Pixel centre of the cell at grid position (x, y): the highest row is drawn on top."""
    rows = len(grid.y_values)
    return LEFT + (x + 0.5) * CELL_W, TOP + (rows - 1 - y + 0.5) * CELL_H


def contour(grid: TuningGrid, cells: list[Cell], level: float) -> str:
    """SVG path of where recall crosses ``level``, by marching squares over the cell
    centres (linear between neighbours; a saddle joins by the square's mean). The grid is
    padded with a copy of its edge cells, so a line runs on to the heatmap's border instead
    of stopping at the centres of the outer cells."""
    columns, rows = len(grid.x_values), len(grid.y_values)
    value = {(c.x, c.y): c.recall for c in cells}

    def at(x: int, y: int) -> float:
        return value[(min(max(x, 0), columns - 1), min(max(y, 0), rows - 1))]

    def pixel(x: float, y: float) -> tuple[float, float]:
        px, py = _centre(grid, min(max(x, -0.5), columns - 0.5), min(max(y, -0.5), rows - 0.5))
        return px, py

    parts: list[str] = []
    for y in range(-1, rows):
        for x in range(-1, columns):
            corners = [(x, y), (x + 1, y), (x + 1, y + 1), (x, y + 1)]
            points = []
            for a, b in zip(corners, corners[1:] + corners[:1]):
                va, vb = at(*a), at(*b)
                if (va >= level) != (vb >= level):
                    f = (level - va) / (vb - va)
                    points.append(pixel(a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f))
            if len(points) == 4 and sum(at(*c) for c in corners) / 4 < level:
                points = points[1:] + points[:1]
            for p, q in zip(points[::2], points[1::2]):
                parts.append(f"M{p[0]:.1f},{p[1]:.1f}L{q[0]:.1f},{q[1]:.1f}")
    return "".join(parts)


def _measure(cells: list[Cell]) -> str:
    return "cost" if cells and all(c.figures.cost_usd is not None for c in cells) else "tokens"


def grid_recommendation(grid: TuningGrid, cells: list[Cell], target: float) -> dict[str, Any] | None:
    """The cell the sweep's rule picks (lowest cost with recall ≥ target and no over-window
    call; ties to the higher recall, then the higher trigger), in words."""
    if not cells:
        return None
    columns = len(grid.x_values)
    points = [SweepPoint(float(c.x * 1000 + c.y), c.figures) for c in cells if not c.errors]
    current = None
    if grid.current_x in grid.x_values and grid.current_y in grid.y_values:
        current = float(grid.x_values.index(grid.current_x) * 1000 + grid.y_values.index(grid.current_y))
    rec = recommend(points, kind=grid.x_param, current=current, target=target)
    target_text = f"{target * 100:.2f}".rstrip("0").rstrip(".") + "%"
    word = "input cost" if rec.measure == "cost" else "tokens sent"
    rule = f"lowest {word} with needed-context recall ≥ {target_text} and no over-window call"
    if rec.choice is None:
        return {"cell": None, "sentence": f"No pair of settings meets the rule ({rule})."}
    x, y = int(rec.choice.value) // 1000, int(rec.choice.value) % 1000
    f = rec.choice.figures
    amount = _usd(f.cost_usd) if rec.measure == "cost" else f"{f.tokens_sent:,} tokens"
    sentence = (f"Lowest {word} with needed-context recall ≥ {target_text} and no over-window call: trigger "
                f"{setting_text(grid.x_param, grid.x_values[x])}, {AXES[grid.y_param].short} "
                f"{y_text(grid.y_param, grid.y_values[y])}: {amount}, recall {_pct(f.recall)}")
    if rec.is_current:
        sentence += " (the current pair)"
    elif rec.saving is not None:
        if rec.measure == "cost":
            word = "cheaper" if rec.saving >= 0 else "dearer"
        else:
            word = "fewer tokens" if rec.saving >= 0 else "more tokens"
        sentence += f", {abs(rec.saving) * 100:.0f}% {word} than the current pair"
    return {"cell": y * columns + x, "x": grid.x_values[x], "y": grid.y_values[y], "sentence": sentence + ".",
            "is_current": rec.is_current}


def heatmap(grid: TuningGrid, target: float = DEFAULT_RECALL_TARGET) -> dict[str, Any]:
    """Everything the heatmap partial draws: cells (rect, colour, labels), axis ticks,
    contour paths (the target bold) and the recommended cell."""
    cells = grid_cells(grid)
    columns, rows = len(grid.x_values), len(grid.y_values)
    measure = _measure(cells)
    amounts = [(c.figures.cost_usd or 0.0) if measure == "cost" else float(c.figures.tokens_sent) for c in cells]
    low, high = min(amounts, default=0.0), max(amounts, default=0.0)
    rec = grid_recommendation(grid, cells, target)
    drawn = []
    for c, amount in zip(cells, amounts):
        t = (amount - low) / (high - low) if high > low else 0.0
        left, top = LEFT + c.x * CELL_W, TOP + (rows - 1 - c.y) * CELL_H
        index = c.y * columns + c.x
        drawn.append({
            "x": left, "y": top, "cx": left + CELL_W / 2, "fill": _colour(t), "ink": "#fff" if t > 0.55 else "#111",
            "amount": _usd(c.figures.cost_usd) if measure == "cost" else f"{c.figures.tokens_sent / 1000:,.0f}k",
            "recall": _pct(c.figures.recall), "overflow": c.figures.overflow_calls, "errors": c.errors,
            "x_value": grid.x_values[c.x], "y_value": grid.y_values[c.y], "figures": c.figures,
            "x_text": x_text(grid.x_param, grid.x_values[c.x]), "y_text": y_text(grid.y_param, grid.y_values[c.y]),
            "is_current": grid.current_x == grid.x_values[c.x] and grid.current_y == grid.y_values[c.y],
            "is_choice": rec is not None and rec["cell"] == index})
    levels = sorted({*CONTOUR_LEVELS, target})
    return {
        "width": LEFT + columns * CELL_W + 4, "height": TOP + rows * CELL_H + BOTTOM,
        "cell_w": CELL_W, "cell_h": CELL_H, "cells": drawn, "measure": measure,
        "low": _usd(low) if measure == "cost" else f"{low:,.0f} tokens",
        "high": _usd(high) if measure == "cost" else f"{high:,.0f} tokens",
        "x_ticks": [{"x": LEFT + (i + 0.5) * CELL_W, "text": x_text(grid.x_param, v)} for i, v in enumerate(grid.x_values)],
        "y_ticks": [{"y": TOP + (rows - 1 - i + 0.5) * CELL_H, "text": y_text(grid.y_param, v)}
                    for i, v in enumerate(grid.y_values)],
        "x_label": f"trigger ({SWEEP_KINDS[grid.x_param][1]})", "y_label": AXES[grid.y_param].label,
        "axis_y": TOP + rows * CELL_H, "label_y": TOP + rows * CELL_H + 40,
        "contours": [{"level": _pct(level), "path": contour(grid, cells, level), "is_target": level == target}
                     for level in levels],
        "recommendation": rec, "ramp": [_colour(i / 4) for i in range(5)],
    }
