"""Time of a two-dimensional tuning grid over the demo project, as the tuning page starts it:
policy A is the session's policy, 8 × 6 cells (trigger × kept tail, or × clearing threshold)
over every session of the project, split into chunks that a real Celery worker runs in
parallel. Prints the time from the request to the summed grid, replays per second, the
load average before and after (a shared machine: say so beside the figures), and the pair
the grid recommends.

    .venv/bin/python bench/tuning_grid.py [--workers 2] [--y keep_messages|clearing_fraction]
        [--x window_fraction|tokens] [--columns 8] [--rows 6] [--corpus DIR]

The demo project is what ``make run`` loads (``manage.py load_demo``: ../shared/corpus, else
the bundled sample). Throw-away SQLite + filesystem broker unless DATABASE_URL is set."""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _service import child_env, setup_django, start_worker, stop


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and its child processes (the worker's pool):
    what the grid cost whatever else the machine was doing."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if pid == root or ppid == root:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="worker pool processes (make run: 2)")
    parser.add_argument("--x", default="window_fraction")
    parser.add_argument("--y", default="keep_messages")
    parser.add_argument("--columns", type=int, default=8)
    parser.add_argument("--rows", type=int, default=6)
    parser.add_argument("--corpus", default=None)
    args = parser.parse_args()
    data = setup_django()

    from django.conf import settings  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from django.core.management import call_command  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    from dashboard.models import Project, Session, TuningGrid  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.selectors.tuning import starting_point  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.selectors.tuning_grids import heatmap  # noqa: PLC0415  (needs Django set up: setup_django() runs first)
    from dashboard.services.tuning_grids import request_grid  # noqa: PLC0415  (needs Django set up: setup_django() runs first)

    call_command("load_demo", "--no-compact", "--no-credentials", *(["--corpus", args.corpus] if args.corpus else []))
    project = Project.objects.get(name="demo")
    sessions = Session.objects.filter(project=project).order_by("pk")
    session = sessions.first()
    messages = sum(s.message_count for s in sessions)
    print(f"demo project: {sessions.count()} sessions, {messages:,} messages; "
          f"{args.workers} worker processes, TUNING_GRID_CHUNKS={settings.TUNING_GRID_CHUNKS}")
    worker = start_worker(child_env(), data / "worker.log", concurrency=args.workers)
    try:
        before, cpu_before = loadavg(), cpu_seconds(worker.pid)
        started = time.monotonic()
        grid = request_grid(session, starting_point(session).policy, x_param=args.x, y_param=args.y,
                            columns=args.columns, rows=args.rows, scope="project")
        last = -1
        while True:
            grid.refresh_from_db()
            if grid.done != last and (grid.done * 10 // max(1, grid.total)) != (last * 10 // max(1, grid.total)):
                print(f"  {time.monotonic() - started:6.1f} s  {grid.done:,}/{grid.total:,} replays, "
                      f"{grid.chunks_done}/{grid.chunks_total} chunks", flush=True)
            last = grid.done
            if grid.finished:
                break
            time.sleep(0.25)
        elapsed = time.monotonic() - started
        after, cpu = loadavg(), cpu_seconds(worker.pid) - cpu_before
    finally:
        stop(worker)
    print(f"grid {len(grid.x_values)} × {len(grid.y_values)} ({args.x} × {args.y}) over {sessions.count()} sessions: "
          f"{grid.status} in {elapsed:.1f} s, {grid.done:,} of {grid.total:,} replays, {grid.done / elapsed:.1f} replays/s, "
          f"{grid.chunks_total} chunks")
    print(f"load average before {before}, after {after} (other work on the machine counts in these)")
    print(f"worker CPU: {cpu:.1f} s over {args.workers} processes (on {args.workers} idle cores: about "
          f"{cpu / args.workers:.0f} s, if the chunks keep every process busy)")
    if grid.status == "done":
        rec = heatmap(TuningGrid.objects.get(pk=grid.pk))["recommendation"]
        print(f"recommendation: {rec['sentence'] if rec else '–'}")
    else:
        print(f"error: {grid.error}")
    if os.environ.get("DATABASE_URL") is None:
        print(f"(data in {data})")


if __name__ == "__main__":
    main()
