"""Two-dimensional tuning grids: the trigger against a second setting (the kept tail, or the
tool-output clearing threshold), every pair replayed over the sessions of a project.

A grid is the threshold sweep (``tuning_sweeps``) in two dimensions, with the same replays
(``compaction.preview``: offline summarizer, replay clock) and the same figures
(``compaction.figures``), so a cell shows what the preview shows for its pair of settings.
Its replays (cells × sessions) are split into ``TuningGridChunk`` rows, one Celery task
each (``GRID_TASK``, reached by name), which the workers run in parallel. Each replay adds
one to the grid's ``done``; the chunk that finishes last (counted under the grid's row lock)
sums the chunks' figures into ``cells``, in the order of sessions and cells whatever order
the chunks ran in, so the same grid twice gives the same cells to the digit.

Cancelling marks the grid; every chunk looks at the mark before each replay and stops.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from compaction import CompactionError, PolicyError
from compaction.evaluation.needed import NeededMemo
from compaction.figures import ReplayFigures
from compaction.policy import Policy
from compaction.preview import preview_policy
from compaction.windows import resolve_window, usable_window

from ..celery import app as celery_app
from ..models import GridStatus, Session, StoredMessage, TuningGrid, TuningGridChunk
from . import Invalid, workers
from .common import now
from .job_heartbeat import JobHeartbeat, claim_job, holds
from .policies import apply_service_defaults
from .runs import no_worker
from .runs.request import ENQUEUE_ERRORS, is_eager, no_worker_wait_left, worker_silence
from .tuning_sweeps import SCOPES, SWEEP_KINDS, current_setting, with_trigger

log = logging.getLogger("dashboard.grids")

GRID_TASK = "dashboard.run_tuning_grid_chunk"
#: Bounds of a grid's size (columns are trigger settings, rows the second setting).
COLUMNS = (2, 12)
ROWS = (2, 8)
DEFAULT_COLUMNS, DEFAULT_ROWS = 8, 6
#: Kept-tail sizes a grid picks its rows from (cut.keep_messages), spread evenly.
TAIL_LADDER = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48)


@dataclass(frozen=True)
class Axis:
    """A grid's second setting: how the page names it and how a value goes into a policy."""

    label: str
    short: str  # in a sentence: "kept tail 6 messages"
    unit: str  # "messages" or "share"
    apply: Callable[[Policy, float], Policy]
    current: Callable[[Policy], float | None]


def _with_tail(policy: Policy, value: float) -> Policy:
    return policy.with_overrides({"cut.keep_messages": int(value)})


def _with_clearing(policy: Policy, value: float) -> Policy:
    # Clearing on, at this share of the window alone: a token threshold beside it would fire
    # first on some sessions and the row would not mean what its label says.
    return policy.with_overrides({"reduction.enabled": True, "reduction.clearing.enabled": True,
                                  "reduction.clearing.trigger_fraction": value,
                                  "reduction.clearing.trigger_tokens": None})


def _current_clearing(policy: Policy) -> float | None:
    clearing = policy.reduction.clearing
    if not (policy.reduction.enabled and clearing.enabled) or clearing.trigger_tokens is not None:
        return None
    return clearing.trigger_fraction


AXES: dict[str, Axis] = {
    "keep_messages": Axis("kept tail (messages)", "kept tail", "messages", _with_tail, lambda p: float(p.cut.keep_messages)),
    "clearing_fraction": Axis("tool-output clearing threshold (share of the window)", "clearing at", "share", _with_clearing,
                              _current_clearing),
}


def y_text(param: str, value: float) -> str:
    """A value of the grid's second setting as the page writes it ("6 messages", "40%")."""
    if AXES[param].unit == "messages":
        return f"{int(value)} message{'s' if int(value) != 1 else ''}"
    return f"{value * 100:.1f}".rstrip("0").rstrip(".") + "%"


def _spread(count: int, low: float, high: float) -> list[float]:
    return [low + i * (high - low) / (count - 1) for i in range(count)]


def _with_current(values: list[float], current: float | None) -> list[float]:
    """``values`` with the policy's own setting in place of the nearest one (the grid keeps
    its size and the current pair is a cell of it)."""
    if current is None or current in values:
        return values
    nearest = min(range(len(values)), key=lambda i: (abs(values[i] - current), i))
    out = list(values)
    out[nearest] = current
    return sorted(set(out))


def x_values(kind: str, policy: Policy, largest: int, count: int) -> list[float]:
    """``count`` trigger settings from 15% to 95% of the largest context the sessions reach
    (at most the usable window), as the sweep spreads them, with the policy's own setting."""
    window, _source = resolve_window(policy)
    usable = usable_window(window, policy.reserved_output_tokens)
    top = min(usable, largest) if largest > 0 else usable
    if kind == "window_fraction":
        values = [min(1.0, max(0.001, round(share * top / usable, 3))) for share in _spread(count, 0.15, 0.95)]
    else:
        step = 1000 if top >= 20_000 else 100
        values = [float(max(step, round(share * top / step) * step)) for share in _spread(count, 0.15, 0.95)]
    return _with_current(sorted(set(values)), current_setting(kind, policy))


def y_values(param: str, policy: Policy, largest: int, count: int) -> list[float]:
    """``count`` values of the second setting, low to high, with the policy's own value."""
    if param == "keep_messages":
        picks = [TAIL_LADDER[round(i * (len(TAIL_LADDER) - 1) / (count - 1))] for i in range(count)]
        values = [float(v) for v in picks]
    else:
        window, _source = resolve_window(policy)
        top = min(window, largest) if largest > 0 else window
        values = [min(1.0, max(0.01, round(share * top / window, 3))) for share in _spread(count, 0.1, 0.9)]
    return _with_current(sorted(set(values)), AXES[param].current(policy))


def cell_policy(base: Policy, grid: TuningGrid, cell: int) -> Policy:
    """The policy of one cell (index ``y * columns + x``)."""
    columns = len(grid.x_values)
    x, y = grid.x_values[cell % columns], grid.y_values[cell // columns]
    return AXES[grid.y_param].apply(with_trigger(base, grid.x_param, float(x)), float(y))


def _size(raw: object, name: str, bounds: tuple[int, int]) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise Invalid(f"grid: {name} must be a whole number, got {raw!r}") from None
    if not bounds[0] <= value <= bounds[1]:
        raise Invalid(f"grid: {name} must be between {bounds[0]} and {bounds[1]}, got {value}")
    return value


def _split(work: list[tuple[int, int]], weights: dict[int, float], chunks: int) -> list[list[tuple[int, int]]]:
    """``work`` (session, cell) in order, cut into at most ``chunks`` runs of about equal
    weight (``weights``: a replay's, by its session), so each chunk reads few sessions."""
    total = sum(weights[s] for s, _ in work)
    out: list[list[tuple[int, int]]] = [[]]
    running = 0.0
    for item in work:
        if out[-1] and running >= total * len(out) / chunks:
            out.append([])
        out[-1].append(item)
        running += weights[item[0]]
    return out


def request_grid(session: Session, policy: Policy, *, x_param: str, y_param: str, columns: object = DEFAULT_COLUMNS,
                 rows: object = DEFAULT_ROWS, scope: str = "project") -> TuningGrid:
    """Store a grid of ``policy``'s trigger (``x_param``) against ``y_param`` over
    ``session``'s project (or the session alone), its chunks, and queue them. Raises
    Invalid naming the problem; nothing is stored then."""
    if x_param not in SWEEP_KINDS:
        raise Invalid(f"grid: unknown trigger kind {x_param!r}; choose one of {', '.join(SWEEP_KINDS)}")
    if y_param not in AXES:
        raise Invalid(f"grid: unknown second setting {y_param!r}; choose one of {', '.join(AXES)}")
    if scope not in SCOPES:
        raise Invalid(f"grid: unknown scope {scope!r}; choose one of {', '.join(SCOPES)}")
    n_x, n_y = _size(columns, "columns", COLUMNS), _size(rows, "rows", ROWS)
    effective = apply_service_defaults(policy, session)
    swept = Session.objects.filter(project_id=session.project_id) if scope == "project" else Session.objects.filter(
        pk=session.pk)
    sizes = dict(swept.order_by("pk").values_list("pk", "history_total"))
    largest = max(sizes.values(), default=0)
    xs, ys = x_values(x_param, effective, largest, n_x), y_values(y_param, effective, largest, n_y)
    cells = len(xs) * len(ys)
    limit = settings.TUNING_GRID_MAX_REPLAYS
    if cells * len(sizes) > limit:
        raise Invalid(f"grid: {cells} cells × {len(sizes)} sessions = {cells * len(sizes):,} replays, over "
                      f"TUNING_GRID_MAX_REPLAYS={limit:,}; choose fewer columns or rows, or this session only")
    for cell in range(cells):  # every pair must make a valid policy before anything is stored
        try:
            AXES[y_param].apply(with_trigger(effective, x_param, xs[cell % len(xs)]), ys[cell // len(xs)])
        except PolicyError as exc:
            raise Invalid(f"grid: {exc}") from None
    work = [(pk, cell) for pk in sizes for cell in range(cells)]
    # A replay's time grows faster than its session's length (more compactions, each over a
    # longer span): weighing by length^1.5 keeps the chunks of the longest sessions from
    # being the ones everything waits for.
    weights = {pk: max(1, total) ** 1.5 for pk, total in sizes.items()}
    parts = _split(work, weights, settings.TUNING_GRID_CHUNKS)
    heaviest_first = sorted(range(len(parts)), key=lambda i: (-sum(weights[s] for s, _ in parts[i]), i))
    with transaction.atomic():
        grid = TuningGrid.objects.create(
            project_id=session.project_id, session=session, scope=scope, x_param=x_param, y_param=y_param,
            x_values=xs, y_values=ys, current_x=current_setting(x_param, effective),
            current_y=AXES[y_param].current(effective), policy=policy.to_json(), total=len(work),
            chunks_total=len(parts))
        TuningGridChunk.objects.bulk_create(
            TuningGridChunk(grid=grid, index=i, work=[list(item) for item in part]) for i, part in enumerate(parts))
        by_index = list(grid.chunks.order_by("index").values_list("pk", flat=True))
        ids = [by_index[i] for i in heaviest_first]  # queued heaviest first: the last to start are short
        transaction.on_commit(lambda: enqueue_chunks(grid.pk, ids))
    return grid


def cancel_grid(grid: TuningGrid) -> TuningGrid:
    """Stop a grid: its chunks stop before their next replay. A grid already cancelled is
    left as it is (a second click of the button, or a retried request, is not an error).
    Raises Invalid for a grid that has finished otherwise."""
    stopped = TuningGrid.objects.filter(pk=grid.pk, status__in=(GridStatus.QUEUED, GridStatus.RUNNING)).update(
        status=GridStatus.CANCELLED, finished_at=now())
    grid.refresh_from_db()
    if not stopped and grid.status != GridStatus.CANCELLED:
        raise Invalid(f"grid: it has already finished ({grid.status}); nothing to cancel")
    TuningGridChunk.objects.filter(grid_id=grid.pk, status=GridStatus.QUEUED).update(status=GridStatus.CANCELLED)
    return grid


def enqueue_chunks(grid_id: int, chunk_ids: list[int]) -> None:
    task = celery_app.tasks[GRID_TASK]
    if is_eager():
        for chunk_id in chunk_ids:
            task.apply_async(args=[chunk_id])
        return
    try:
        for chunk_id in chunk_ids:
            task.apply_async(args=[chunk_id],
                             retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.2})
    except ENQUEUE_ERRORS as exc:
        log.warning("grid %s could not be queued: %s", grid_id, exc)
        fail_grid(grid_id, f"could not queue the grid (broker unavailable: {type(exc).__name__})")
        return
    silent = worker_silence()
    if silent is not None:
        # As a sweep does: with no live worker, this process runs the chunks itself once
        # RUN_NO_WORKER_WAIT has passed with still none in sight.
        no_worker.watch(grid_id, no_worker_wait_left(silent), grid_if_no_worker)


def grid_if_no_worker(grid_id: int) -> None:
    """The no-worker wait of a grid ran out: if it is still queued and no worker beats, run
    its chunks here, one after another, in a thread of its own (unless
    RUN_NO_WORKER_FALLBACK=off: then it stays queued for a worker)."""
    if settings.RUN_NO_WORKER_FALLBACK != "inline" or workers.silent_for(fresh=True) is None:
        return
    if not TuningGrid.objects.filter(pk=grid_id, status=GridStatus.QUEUED).exists():
        return
    no_worker.note_gave_up(True)
    log.warning("grid %s waited RUN_NO_WORKER_WAIT=%ss with no live worker; running it here", grid_id,
                settings.RUN_NO_WORKER_WAIT)
    threading.Thread(target=_run_here, args=(grid_id,), name=f"grid-{grid_id}", daemon=True).start()


def _run_here(grid_id: int) -> None:
    try:
        for chunk_id in TuningGridChunk.objects.filter(grid_id=grid_id).order_by("index").values_list("pk", flat=True):
            run_chunk(chunk_id)  # each claims its chunk first: one a worker took meanwhile stays its
    finally:
        connection.close()


def fail_grid(grid_id: int, error: str) -> None:
    TuningGrid.objects.filter(pk=grid_id, status__in=(GridStatus.QUEUED, GridStatus.RUNNING)).update(
        status=GridStatus.FAILED, error=error, finished_at=now())


def _raws(session_id: int) -> list[dict[str, Any]]:
    rows = StoredMessage.objects.filter(session_id=session_id).order_by("position").values_list("raw", flat=True)
    return cast(list[dict[str, Any]], list(rows))


def _stopped(grid_id: int) -> bool:
    return not TuningGrid.objects.filter(pk=grid_id, status=GridStatus.RUNNING).exists()


def run_chunk(chunk_id: int) -> str:
    """Replay one chunk's (session, cell) pairs, counting each on the grid; the last chunk
    to finish sums the grid. A chunk already taken, or of a grid that was cancelled or
    failed, is left alone; a cancel seen between two replays stops it."""
    attempt = claim_job(TuningGridChunk, chunk_id, GridStatus.QUEUED, GridStatus.RUNNING)
    if attempt is None:
        return "skipped"
    chunk = TuningGridChunk.objects.select_related("grid").get(pk=chunk_id)
    grid = chunk.grid
    TuningGrid.objects.filter(pk=grid.pk, status=GridStatus.QUEUED).update(status=GridStatus.RUNNING)
    # every write below only while this execution holds the chunk: one the recovery loop
    # queued again as lost (a worker starved past RUN_STALE_AFTER) is counted once, by the other
    mine = holds(TuningGridChunk, chunk_id, attempt, GridStatus.RUNNING)
    try:
        with JobHeartbeat(TuningGridChunk, chunk_id, attempt, GridStatus.RUNNING):
            results = _replay(chunk, grid)
    except Exception as exc:  # noqa: BLE001 - the grid must say why it stopped
        log.exception("grid %s chunk %s failed", grid.pk, chunk.index)
        if mine.update(status=GridStatus.FAILED):
            fail_grid(grid.pk, f"{type(exc).__name__}: {exc}")
        return "failed"
    if results is None:
        mine.update(status=GridStatus.CANCELLED)
        return "cancelled"
    if not mine.update(status=GridStatus.DONE, results=results):
        return "superseded"
    return _count_chunk(grid.pk)


def _replay(chunk: TuningGridChunk, grid: TuningGrid) -> list[dict[str, Any]] | None:
    """The figures of each (session, cell) pair of the chunk; None once the grid stopped.

    A replay in which nothing fired (no compaction, none attempted) is the replay of every
    higher trigger in the same row: the context never reached this one, so it never
    reaches those, and the figures are those of the same untouched replay. With the kept
    tail as the second setting it is also every other row's (the tail only matters when a
    compaction cuts). Those cells take its figures instead of replaying: the same numbers,
    and most of a grid's quiet replays are over long sessions."""
    base = Policy.load(grid.policy)
    columns = len(grid.x_values)
    results: list[dict[str, Any]] = []
    loaded: tuple[int, Session, list[dict[str, Any]], Policy, NeededMemo] | None = None
    quiet: dict[int | None, tuple[int, dict[str, Any]]] = {}  # row (None: every row) -> lowest quiet column
    for session_id, cell in chunk.work:
        if _stopped(grid.pk):
            return None
        if loaded is None or loaded[0] != session_id:
            session = Session.objects.get(pk=session_id)
            loaded = (session_id, session, _raws(session_id), apply_service_defaults(base, session), NeededMemo())
            quiet = {}
        _pk, session, raws, effective, memo = loaded
        x, row = cell % columns, (None if grid.y_param == "keep_messages" else cell // columns)
        entry: dict[str, Any] = {"session": session_id, "cell": cell, "figures": None, "error": ""}
        if row in quiet and x >= quiet[row][0]:
            entry["figures"] = dict(quiet[row][1])
        else:
            try:
                preview = preview_policy(raws, cell_policy(effective, grid, cell), tools=session.tools or None,
                                         fallback_model=session.model or None,
                                         needed_memo=memo)
                entry["figures"] = preview.figures.to_dict()
                if not preview.report.compactions and not preview.report.failed_compactions:
                    if row not in quiet or x < quiet[row][0]:
                        quiet[row] = (x, entry["figures"])
            except (PolicyError, CompactionError, ValueError) as exc:
                entry["error"] = f"session {session_id}: {exc}"
        results.append(entry)
        # progress counts each replay once: an execution after a lost one replays the
        # chunk from its start but adds only what the lost one had not counted
        if TuningGridChunk.objects.filter(pk=chunk.pk, done__lt=len(results)).update(done=len(results)):
            TuningGrid.objects.filter(pk=grid.pk).update(done=F("done") + 1)
    return results


def _count_chunk(grid_id: int) -> str:
    """Count a finished chunk; the last one sums every chunk into the grid's cells."""
    with transaction.atomic():
        grid = TuningGrid.objects.select_for_update().get(pk=grid_id)
        grid.chunks_done += 1
        if grid.chunks_done < grid.chunks_total or grid.status != GridStatus.RUNNING:
            TuningGrid.objects.filter(pk=grid_id).update(chunks_done=F("chunks_done") + 1)
            return "done"
        chunks = list(TuningGridChunk.objects.filter(grid_id=grid_id).values_list("results", flat=True))
        TuningGrid.objects.filter(pk=grid_id).update(
            chunks_done=grid.chunks_done, cells=merge_cells(len(grid.x_values) * len(grid.y_values), chunks),
            status=GridStatus.DONE, done=F("total"), finished_at=now())
    return "done"


def merge_cells(cells: int, chunks: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every chunk's figures summed per cell, session by session in id order (dollar sums
    are floats: a fixed order keeps the same grid's cells the same to the digit)."""
    entries = sorted((e for results in chunks for e in results), key=lambda e: (e["cell"], e["session"]))
    sums = [ReplayFigures() for _ in range(cells)]
    errors: list[list[str]] = [[] for _ in range(cells)]
    for e in entries:
        if e["figures"] is None:
            errors[e["cell"]].append(e["error"])
        else:
            sums[e["cell"]] = sums[e["cell"]] + ReplayFigures.from_dict(e["figures"])
    return [{**sums[i].to_dict(), "errors": errors[i]} for i in range(cells)]

