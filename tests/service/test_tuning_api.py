"""Tuning grids over the REST API: start, poll with a recommendation at a recall target,
apply a cell and undo it through the policies API, cancel, and the refusals (another
project's grid, a bad size, a cell that does not exist). Eager Celery: the grid's chunks
run inline when the request commits (test_tuning_grid.py runs them on real workers)."""
from __future__ import annotations

from dashboard.models import Session
from tests.service.conftest import Api
from tests.service.helpers import chat

POLICY = {"name": "grid-api", "context_window": 8000, "reserved_output_tokens": 500,
          "trigger": {"kind": "window_fraction", "fraction": 0.7}}


def _session(api, turns=30) -> int:
    r = api.post("/api/sessions", {"messages": chat(turns, tag=f"t{turns}"), "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


def test_a_grid_started_over_the_api_is_polled_applied_and_undone(api):
    sid = _session(api)
    r = api.post(f"/api/sessions/{sid}/tuning/grids", {"policy": POLICY, "columns": 3, "rows": 2, "scope": "session"})
    assert r.status_code == 202, r.content
    grid = api.get(f"/api/tuning/grids/{r.json()['id']}").json()
    assert grid["status"] == "done" and grid["done"] == grid["total"] == 6
    assert [c["index"] for c in grid["cells"]] == list(range(6))
    assert grid["cells"][0]["figures"]["compactions"] > grid["cells"][2]["figures"]["compactions"]
    # at a recall target of 0 the cheapest cell is recommended, in the page's words
    cheap = api.get(f"/api/tuning/grids/{grid['id']}?recall_target=0").json()["recommendation"]
    assert cheap["sentence"].startswith("Lowest ") and "recall ≥ 0%" in cheap["sentence"]
    cell = cheap["cell"]
    assert cheap["x"] == grid["x_values"][cell % 3] and cheap["y"] == grid["y_values"][cell // 3]

    applied = api.post(f"/api/tuning/grids/{grid['id']}/apply", {"cell": cell, "target": "session"})
    assert applied.status_code == 200, applied.content
    body = applied.json()
    assert body["target"] == "session" and body["previous_policy_id"] is None and "kept tail" in body["policy_name"]
    session = api.get(f"/api/sessions/{sid}").json()
    assert session["policy_id"] == body["policy_id"]
    stored = api.get(f"/api/policies/{body['policy_id']}").json()["policy"]
    assert stored["cut"]["keep_messages"] == int(cheap["y"])
    assert stored["trigger"]["kind"] == "window_fraction" and stored["trigger"]["fraction"] == cheap["x"]
    undone = api.put(f"/api/sessions/{sid}/policy", {"policy_id": body["previous_policy_id"]})
    assert undone.status_code == 200 and undone.json()["policy_id"] is None


def test_grid_requests_the_service_refuses_name_the_problem(api, client, other_project, django_capture_on_commit_callbacks):
    other_project_api = Api(client, other_project.test_key, django_capture_on_commit_callbacks)
    sid = _session(api, 10)
    too_big = api.post(f"/api/sessions/{sid}/tuning/grids", {"columns": 40})
    assert too_big.status_code == 422 and "columns" in str(too_big.json())
    kind = api.post(f"/api/sessions/{sid}/tuning/grids", {"y_param": "summary_size"})
    assert kind.status_code == 422 and "y_param" in str(kind.json())
    bad_policy = api.post(f"/api/sessions/{sid}/tuning/grids", {"overrides": {"cut.keep_messages": -3}})
    assert bad_policy.status_code == 422 and bad_policy.json()["field"].startswith("cut")
    grid = api.post(f"/api/sessions/{sid}/tuning/grids", {"policy": POLICY, "columns": 2, "rows": 2,
                                                           "scope": "session"}).json()
    outside = api.post(f"/api/tuning/grids/{grid['id']}/apply", {"cell": 4, "target": "session"})
    assert outside.status_code == 422 and outside.json()["detail"] == "apply: the grid has cells 0 to 3, not 4"
    target = api.post(f"/api/tuning/grids/{grid['id']}/apply", {"cell": 0, "target": "everyone"})
    assert target.status_code == 422
    # another project's key sees no such grid, and cannot start one on this project's session
    assert other_project_api.get(f"/api/tuning/grids/{grid['id']}").status_code == 404
    assert other_project_api.post(f"/api/tuning/grids/{grid['id']}/apply",
                                  {"cell": 0, "target": "project"}).status_code == 404
    assert other_project_api.post(f"/api/sessions/{sid}/tuning/grids", {}).status_code == 404
    assert Session.objects.get(pk=sid).policy_id is None
    # a finished grid cannot be cancelled, and says so
    done = api.post(f"/api/tuning/grids/{grid['id']}/cancel")
    assert done.status_code == 422 and "already finished" in done.json()["detail"]
