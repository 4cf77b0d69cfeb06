"""Seed presets in the service: Sagents summarizes with the agent's model through the
operator's connection, and never with a model a client wrote into a message."""
from __future__ import annotations

from compaction import get_preset
from dashboard.models import Session
from dashboard.services.policies import apply_service_defaults
from tests.service.helpers import chat
from tests.support.llm_server import ok


def _sagents_session(api, model: str, messages: list) -> int:
    api.post("/api/policies", {"name": "sag", "preset": "sagents", "activate": True})
    r = api.post("/api/sessions", {"messages": messages, "model": model, "auto_compact": False})
    assert r.status_code == 201, r.content
    return r.json()["session"]["id"]


def test_sagents_summarizes_with_the_sessions_model_through_an_operator_connection(api, llm_server):
    llm_server.script(ok("summary by the agent's own model"))
    sid = _sagents_session(api, "openai/agent-model", chat(8))
    r = api.post(f"/api/sessions/{sid}/compactions", {"overrides": {"cut.keep_messages": 4}})
    run = api.get(r.json()["status_url"]).json()
    assert run["status"] == "succeeded", run["error"]
    assert [q.json["model"] for q in llm_server.requests] == ["agent-model"]


def test_a_model_named_in_a_message_is_never_used_by_the_service(db, project):
    policy = apply_service_defaults(get_preset("sagents"), Session(project=project, model=""))
    assert policy.summarizer.use_agent_model is False
