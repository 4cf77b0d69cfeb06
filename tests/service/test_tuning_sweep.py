"""A threshold sweep queued by the tuning page's service and finished by a real
`celery -A dashboard worker` process on the filesystem broker."""
from __future__ import annotations

import pytest

from compaction import Policy
from dashboard.models import Session, TuningSweep
from dashboard.services.tuning_sweeps import request_sweep
from tests.service.helpers import chat, wait_for


def finished(sweep_id: int) -> TuningSweep | None:
    sweep = TuningSweep.objects.get(pk=sweep_id)
    return sweep if sweep.finished else None


@pytest.mark.slow
def test_a_sweep_is_finished_by_a_worker_with_the_same_points_as_a_second_one(start_worker, live_api):
    start_worker("filesystem")
    r = live_api.post("/api/sessions", {"messages": chat(40), "auto_compact": False})
    assert r.status_code == 201, r.content
    session = Session.objects.get(pk=r.json()["session"]["id"])
    policy = Policy.load({"name": "sweep-test", "context_window": 8000, "reserved_output_tokens": 500,
                          "trigger": {"kind": "window_fraction", "fraction": 0.7}})
    ids = [request_sweep(session, policy, kind="window_fraction", scope="session").pk for _ in range(2)]
    one, two = (wait_for(lambda i=i: finished(i), timeout=180, what="the worker to finish the sweep") for i in ids)
    assert one.status == "done", one.error
    assert one.done == one.total == len(one.values) and 10 <= len(one.values) <= 11
    assert one.current == 0.7 and 0.7 in one.values and [p["value"] for p in one.points] == one.values
    assert one.points[0]["compactions"] > one.points[-1]["compactions"]
    assert one.points == two.points
