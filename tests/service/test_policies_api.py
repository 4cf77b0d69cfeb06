"""Policies: CRUD with versions, validation naming the field, the active policy."""
from __future__ import annotations

import pytest

from compaction import PRESETS


def test_a_policy_is_created_from_a_preset_with_overrides(api):
    r = api.post("/api/policies", {"name": "eino-ish", "preset": "eino", "overrides": {"cut.keep_messages": 3}})
    assert r.status_code == 201, r.content
    p = r.json()
    assert p["version"] == 1 and p["active"] is False
    assert p["policy"]["cut"]["keep_messages"] == 3 and p["policy"]["name"] == "eino"


def test_an_invalid_setting_is_a_422_naming_the_field(api):
    r = api.post("/api/policies", {"name": "bad", "policy": {"trigger": {"kind": "window_fraction", "fraction": 3}}})
    assert r.status_code == 422
    assert r.json()["field"] == "trigger.window_fraction.fraction" or r.json()["field"].startswith("trigger")
    assert "fraction" in r.json()["detail"]
    unknown = api.post("/api/policies", {"name": "bad", "policy": {"summarizer": {"modle": "x"}}})
    assert unknown.status_code == 422 and unknown.json()["field"] == "summarizer.modle"
    preset = api.post("/api/policies", {"name": "bad", "preset": "nope"})
    assert preset.status_code == 422 and preset.json()["field"] == "preset"
    assert api.get("/api/policies").json()["items"] == []


@pytest.mark.postgres
def test_updating_a_policy_makes_a_new_version_and_keeps_the_old_one(api):
    pid = api.post("/api/policies", {"name": "p", "preset": "default"}).json()["id"]
    r = api.put(f"/api/policies/{pid}", {"overrides": {"cut.keep_messages": 9}})
    assert r.status_code == 200 and r.json()["version"] == 2
    renamed = api.put(f"/api/policies/{pid}", {"name": "q"}).json()
    assert renamed["name"] == "q" and renamed["version"] == 2
    versions = api.get(f"/api/policies/{pid}/versions").json()
    assert [v["version"] for v in versions] == [1, 2]
    assert versions[0]["policy"]["cut"]["keep_messages"] == 12 and versions[1]["policy"]["cut"]["keep_messages"] == 9


@pytest.mark.postgres
def test_two_policies_cannot_share_a_name(api):
    api.post("/api/policies", {"name": "same", "preset": "default"})
    assert api.post("/api/policies", {"name": "same", "preset": "trpc"}).status_code == 409


@pytest.mark.postgres
def test_one_policy_is_active_per_project_and_the_active_one_cannot_be_deleted(api):
    a = api.post("/api/policies", {"name": "a", "preset": "default", "activate": True}).json()
    b = api.post("/api/policies", {"name": "b", "preset": "trpc"}).json()
    active = api.get("/api/project/policy").json()
    assert active["source"] == "policy" and active["policy"]["id"] == a["id"]
    switched = api.put("/api/project/policy", {"policy_id": b["id"]}).json()
    assert switched["policy"]["id"] == b["id"] and switched["effective"]["name"] == "trpc"
    flags = {p["name"]: p["active"] for p in api.get("/api/policies").json()["items"]}
    assert flags == {"a": False, "b": True}
    assert api.delete(f"/api/policies/{b['id']}").status_code == 409
    assert api.delete(f"/api/policies/{a['id']}").status_code == 204
    api.put("/api/project/policy", {"policy_id": None})
    assert api.get("/api/project/policy").json()["source"] == "default"


def test_presets_are_listed_with_their_settings(api):
    presets = api.get("/api/presets").json()
    assert [p["name"] for p in presets] == list(PRESETS)
    assert all(p["policy"]["trigger"] for p in presets)


def test_a_policy_whose_trigger_lies_above_its_window_is_saved_with_a_warning(api):
    """eino's 160k trigger never fires at the 128k fallback window; the overflow guard stands in."""
    r = api.post("/api/policies", {"name": "eino", "preset": "eino"})
    assert r.status_code == 201, r.content
    assert any("160,000" in w and "overflow guard" in w for w in r.json()["warnings"])
    plain = api.post("/api/policies", {"name": "ours", "preset": "default"}).json()
    assert plain["warnings"] == []
    assert api.get(f"/api/policies/{r.json()['id']}").json()["warnings"] == r.json()["warnings"]


def test_validate_answers_the_full_policy_and_its_warnings_without_saving(api):
    r = api.post("/api/policies/validate", {"preset": "sagents"})
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["valid"] is True and body["policy"]["name"] == "sagents"
    assert any("170,000" in w for w in body["warnings"])
    assert api.get("/api/policies").json()["items"] == []


def test_contradictory_landing_settings_are_refused_naming_the_field(api):
    r = api.post("/api/policies/validate", {"policy": {"trigger": {"kind": "tokens", "threshold": 8000},
                                                       "landing": {"target": 9000}}})
    assert r.status_code == 422 and r.json()["field"] == "landing.target"
    r = api.post("/api/policies", {"name": "bad", "policy": {"context_window": 8000, "landing": {"min_freed": 9000}}})
    assert r.status_code == 422 and r.json()["field"] == "landing.min_freed"
