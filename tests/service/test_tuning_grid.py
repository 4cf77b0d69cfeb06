"""A tuning grid queued by the tuning page's service and finished by a real
`celery -A dashboard worker` process (two pool processes) on the filesystem broker: its
chunks are separate tasks run in parallel, each counted on the grid as it goes."""
from __future__ import annotations

import pytest

from compaction import Policy
from dashboard.models import Session, TuningGrid, TuningGridChunk
from dashboard.services.tuning_grids import request_grid
from tests.service.helpers import chat, wait_for


def finished(grid_id: int) -> TuningGrid | None:
    grid = TuningGrid.objects.get(pk=grid_id)
    return grid if grid.finished else None


@pytest.mark.slow
def test_a_grid_is_split_into_chunks_the_workers_finish_and_sum(start_worker, live_api, settings):
    settings.TUNING_GRID_CHUNKS = 4
    start_worker("filesystem", concurrency=2)
    sessions = []
    for turns in (30, 12):
        r = live_api.post("/api/sessions", {"messages": chat(turns, tag=f"s{turns}"), "auto_compact": False})
        assert r.status_code == 201, r.content
        sessions.append(Session.objects.get(pk=r.json()["session"]["id"]))
    policy = Policy.load({"name": "grid-test", "context_window": 8000, "reserved_output_tokens": 500,
                          "trigger": {"kind": "window_fraction", "fraction": 0.7}})
    grid = request_grid(sessions[0], policy, x_param="window_fraction", y_param="keep_messages", columns=3, rows=2)
    seen = set()

    def progress_then_end():
        g = TuningGrid.objects.get(pk=grid.pk)
        seen.add(g.done)
        return g if g.finished else None

    done = wait_for(progress_then_end, timeout=180, what="the workers to finish the grid")
    assert done.status == "done", done.error
    assert done.done == done.total == 6 * 2 and done.chunks_done == done.chunks_total == 4
    assert TuningGridChunk.objects.filter(grid=done, status="done").count() == 4
    assert len(done.cells) == 6 and all(not c["errors"] for c in done.cells)
    assert done.cells[0]["compactions"] > done.cells[2]["compactions"]  # a lower trigger compacts more
    assert max(seen) == 12 and len(seen) >= 2  # progress was counted as the chunks went
