"""API keys: hashed, shown once, two header styles; tenants cannot see each other."""
from __future__ import annotations

import hashlib
import re

import pytest
from django.core.management import call_command

from dashboard.api import api as ninja_api
from dashboard.models import ApiKey, Project, Session, StoredPolicy
from dashboard.services.keys import revoke_api_key
from tests.service.helpers import chat

BODIES = {
    ("post", "/api/sessions"): {"messages": [{"role": "user", "content": "hi"}]},
    ("post", "/api/sessions/{session_id}/messages"): {"messages": [{"role": "user", "content": "more"}]},
    ("post", "/api/sessions/{session_id}/compactions"): {"reason": "test"},
    ("post", "/api/sessions/{session_id}/simulate"): {},
    ("put", "/api/sessions/{session_id}/policy"): {"policy_id": None},
    ("post", "/api/policies"): {"name": "p2", "preset": "default"},
    ("put", "/api/policies/{policy_id}"): {"description": "changed"},
    ("put", "/api/project/policy"): {"policy_id": None},
    ("post", "/api/sessions/{session_id}/archive/tool-call"): {"name": "session_search",
                                                               "arguments": {"query": "module"}},
    ("post", "/api/sessions/{session_id}/tuning/grids"): {"columns": 2, "rows": 2, "scope": "session"},
    ("post", "/api/tuning/grids/{grid_id}/apply"): {"cell": 0, "target": "project"},
}
QUERIES = {"/api/sessions/{session_id}/archive/search": "?q=module"}


def routes() -> list[tuple[str, str]]:
    """The REST API's routes. The document also describes the gateway (tag Gateway, served at
    /v1/..., not under /api): its refusals are OpenAI's and Anthropic's error objects, and
    the gateway's tests check its 401s (test_gateway.py, test_gateway_anthropic.py)."""
    schema = ninja_api.get_openapi_schema()
    return sorted((method, "/api" + path if not path.startswith("/api") else path)
                  for path, ops in schema["paths"].items() for method, op in ops.items()
                  if "Gateway" not in op.get("tags", []))


@pytest.fixture
def world(api, project):
    """Project acme with a session, a finished run, an archive entry, a policy and a tuning grid."""
    sid = api.post("/api/sessions", {"messages": chat(8), "auto_compact": False}).json()["session"]["id"]
    run_id = api.post(f"/api/sessions/{sid}/compactions", {}).json()["run_id"]
    entry = api.get(f"/api/sessions/{sid}/archive").json()["items"][0]["id"]
    pid = api.post("/api/policies", {"name": "mine", "preset": "default"}).json()["id"]
    grid = api.post(f"/api/sessions/{sid}/tuning/grids", {"columns": 2, "rows": 2, "scope": "session"}).json()["id"]
    return {"session_id": sid, "run_id": run_id, "entry_id": entry, "policy_id": pid, "grid_id": grid}


def fill(path: str, ids: dict) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: str(ids[m.group(1)]), path) + QUERIES.get(path, "")


def test_every_route_but_the_docs_needs_a_key(api, world):
    for method, path in routes():
        r = api._call(method, fill(path, world), BODIES.get((method, path)), key=None)
        assert r.status_code == 401, (method, path, r.status_code)
        assert r.json() == {"detail": "Unauthorized"}
        assert r["WWW-Authenticate"] == 'Bearer realm="compaction studio API"', (method, path)
    assert api.get("/api/openapi.json", key=None).status_code == 200
    assert api.get("/api/docs", key=None).status_code == 200


def test_a_wrong_or_revoked_key_gets_401(api, project):
    wrong = api.get("/api/sessions", key="cs_not-a-real-key")
    assert wrong.status_code == 401 and wrong.has_header("WWW-Authenticate")
    assert api.get("/api/sessions", key="cs_not-a-real-key", style="x-api-key").has_header("WWW-Authenticate")
    revoke_api_key(ApiKey.objects.get(project=project))
    assert api.get("/api/sessions").status_code == 401
    assert api.get("/api/sessions").has_header("WWW-Authenticate")


def test_a_key_in_the_query_string_is_refused_with_a_challenge(api, project):
    r = api.get(f"/api/sessions?api_key={project.test_key}", key=None)
    assert r.status_code == 401 and r.has_header("WWW-Authenticate")


def test_the_key_works_as_bearer_and_as_x_api_key(api):
    assert api.get("/api/sessions", style="bearer").status_code == 200
    assert api.get("/api/sessions", style="x-api-key").status_code == 200


def test_another_projects_key_gets_404_on_every_route_that_names_an_object(api, world, other_project):
    named = [(m, p) for m, p in routes() if "{" in p]
    assert len(named) >= 15
    for method, path in named:
        r = api._call(method, fill(path, world), BODIES.get((method, path)), key=other_project.test_key)
        assert r.status_code == 404, (method, path, r.status_code, r.content)
        assert "not found" in r.json()["detail"]
    # and nothing of acme changed
    assert Session.objects.filter(pk=world["session_id"]).exists()
    assert Session.objects.get(pk=world["session_id"]).message_count == 33
    assert StoredPolicy.objects.get(pk=world["policy_id"]).description != "changed"


def test_another_projects_lists_are_empty_and_its_writes_stay_in_its_project(api, world, other_project):
    key = other_project.test_key
    assert api.get("/api/sessions", key=key).json()["items"] == []
    assert api.get("/api/policies", key=key).json()["items"] == []
    # globex cannot point its own session at acme's policy
    sid = api.post("/api/sessions", {"messages": chat(1)}, key=key).json()["session"]["id"]
    r = api.put(f"/api/sessions/{sid}/policy", {"policy_id": world["policy_id"]}, key=key)
    assert r.status_code == 404
    r = api.put("/api/project/policy", {"policy_id": world["policy_id"]}, key=key)
    assert r.status_code == 404
    r = api.post(f"/api/sessions/{sid}/simulate", {"policy_id": world["policy_id"]}, key=key)
    assert r.status_code == 404


def test_keys_are_stored_hashed_and_shown_once_by_the_command(db, capsys):
    call_command("create_api_key", "--project", "newco")
    out = capsys.readouterr().out
    assert "Created project 'newco'" in out
    key = out.strip().splitlines()[-1]
    assert key.startswith("cs_") and len(key) > 30
    row = ApiKey.objects.get(project__name="newco")
    assert row.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key not in {row.prefix, row.key_hash, row.name}
    # a second key for an existing project does not create another project
    call_command("create_api_key", "--project", "newco", "--quiet")
    assert Project.objects.filter(name="newco").count() == 1
    assert ApiKey.objects.filter(project__name="newco").count() == 2
