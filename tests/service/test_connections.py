"""No request carrying a server secret leaves for a host a tenant chose.

The scripted OpenAI-compatible server plays the tenant's host: it is NOT declared as an
operator connection in the refusal tests, and a fake server secret sits in an environment
variable. Every client path that takes a policy or overrides must refuse a server address,
a key variable, routing parameters and models no connection serves (422 naming the field),
and the host must receive nothing. The positive tests declare the scripted server as an
operator connection and check that the operator's key goes there and only there.
"""
from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from compaction import Policy
from dashboard.admin import ModelConnectionForm
from dashboard.models import CompactionRun, ModelConnection, Project, Session, StoredPolicy
from dashboard.services import connections
from dashboard.services.projects import set_member
from dashboard.settings import _connections_setting
from tests.pages.tuning_form import posted_form
from tests.service.helpers import chat
from tests.support.llm_server import ScriptedLLMServer, ok

SECRET_ENV = "CS_SERVER_SECRET"
SECRET = "s3cret-of-the-server-0123456789"
OPERATOR_ENV = "CS_OPERATOR_KEY"
OPERATOR_KEY = "operator-key-for-the-scripted-server"


@pytest.fixture
def tenant_host(monkeypatch):
    """A host the tenant controls; the server holds a secret, and a provider key of its own."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-services-own-openai-key")
    with ScriptedLLMServer() as server:
        yield server


def _no_request_reached(server: ScriptedLLMServer) -> None:
    assert server.requests == [], [r.headers for r in server.requests]


def _refused(response, field: str) -> None:
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["field"] == field, body
    assert field in body["detail"]


HOST = "{tenant host}"

# (summarizer section a tenant might send, the field it must be refused on); HOST stands
# for the tenant's server.
TENANT_SUMMARIZERS = [
    ({"model": "openai/x", "api_base": HOST, "api_key_env": SECRET_ENV}, "summarizer.api_base"),
    ({"model": "openai/x", "api_base": HOST}, "summarizer.api_base"),
    ({"model": "openai/x", "api_key_env": SECRET_ENV}, "summarizer.api_key_env"),
    ({"model": "openai/x", "api_base": "http://169.254.169.254/latest/meta-data/"}, "summarizer.api_base"),
    ({"params": {"api_base": HOST}}, "summarizer.params.api_base"),
    ({"params": {"base_url": HOST}}, "summarizer.params.base_url"),
    ({"params": {"api_key": "x"}}, "summarizer.params.api_key"),
    ({"params": {"extra_headers": {"x": "y"}}}, "summarizer.params.extra_headers"),
    ({"params": {"custom_llm_provider": "openai"}}, "summarizer.params.custom_llm_provider"),
    ({"model": "openai/gpt-4o"}, "summarizer.model"),
    ({"failover_models": ["anthropic/claude-3-5-haiku-latest"]}, "summarizer.failover_models.0"),
    ({"connection": "nowhere"}, "summarizer.connection"),
]


@pytest.mark.parametrize(("template", "field"), TENANT_SUMMARIZERS, ids=[f for _t, f in TENANT_SUMMARIZERS])
def test_every_client_path_refuses_what_only_the_operator_may_set(api, small_session, tenant_host, template, field):
    summarizer = json.loads(json.dumps(template).replace(HOST, tenant_host.api_base))
    sid = small_session["id"]
    dotted = {f"summarizer.{k}": v for k, v in summarizer.items()}

    _refused(api.post("/api/policies", {"name": "evil", "policy": {"summarizer": summarizer}}), field)
    _refused(api.post("/api/policies", {"name": "evil", "preset": "default", "overrides": dotted}), field)
    created = api.post("/api/policies", {"name": "fine", "policy": {}})
    assert created.status_code == 201, created.content
    pid = created.json()["id"]
    _refused(api.put(f"/api/policies/{pid}", {"overrides": dotted}), field)
    _refused(api.put(f"/api/policies/{pid}", {"policy": {"summarizer": summarizer}}), field)
    _refused(api.post(f"/api/sessions/{sid}/compactions", {"overrides": dotted}), field)
    _refused(api.post(f"/api/sessions/{sid}/compactions", {"policy": {"summarizer": summarizer}}), field)
    _refused(api.post(f"/api/sessions/{sid}/compactions", {"preset": "default", "overrides": dotted}), field)
    _refused(api.post(f"/api/sessions/{sid}/simulate", {"policy": {"summarizer": summarizer}}), field)
    _refused(api.post(f"/api/sessions/{sid}/simulate", {"overrides": dotted}), field)
    _refused(api.post(f"/api/sessions/{sid}/simulate", {"policy_id": pid, "overrides": dotted}), field)

    assert not StoredPolicy.objects.filter(name="evil").exists()
    assert StoredPolicy.objects.get(pk=pid).data["summarizer"]["api_base"] is None
    assert not CompactionRun.objects.exists()
    _no_request_reached(tenant_host)


def test_a_stored_policy_pointing_at_the_metadata_service_is_refused(api, tenant_host):
    r = api.post("/api/policies", {"name": "imds", "activate": True, "policy": {"summarizer": {
        "model": "openai/x", "api_base": "http://169.254.169.254/v1", "api_key_env": "SECRET_KEY"}}})
    _refused(r, "summarizer.api_base")
    assert not StoredPolicy.objects.exists()


def test_a_stored_policy_with_its_own_server_address_fails_its_run_and_sends_nothing(api, small_session, tenant_host):
    """Rows saved before connections existed are refused when a run loads them."""
    project = Project.objects.get(name="acme")
    data = {"summarizer": {"model": "openai/x", "api_base": tenant_host.api_base, "api_key_env": SECRET_ENV}}
    row = StoredPolicy.objects.create(project=project, name="legacy", data=Policy.load(data).to_json(), version=1)
    Session.objects.filter(pk=small_session["id"]).update(policy=row)

    r = api.post(f"/api/sessions/{small_session['id']}/compactions", {})
    assert r.status_code in (200, 202), r.content
    run = api.get(f"/api/runs/{r.json()['run_id']}").json()
    assert run["status"] == "failed"
    assert "summarizer.api_base" in run["error"] and "connection" in run["error"]
    # the same stored policy cannot be simulated either
    _refused(api.post(f"/api/sessions/{small_session['id']}/simulate", {}), "summarizer.api_base")
    _no_request_reached(tenant_host)


def test_the_dashboard_forms_refuse_a_server_address_too(client, django_user_model, api, small_session,
                                                         tenant_host, django_capture_on_commit_callbacks):
    session = Session.objects.get(pk=small_session["id"])
    op = django_user_model.objects.create_user("op", password="pw-pw-pw-pw")
    set_member(session.project, op, "owner")
    client.force_login(op)
    evil = f"summarizer.api_base={tenant_host.api_base}\nsummarizer.api_key_env={SECRET_ENV}"

    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(reverse("pages:force", args=[session.pk]), {"overrides": evil}, HTTP_HX_REQUEST="true")
    assert "summarizer.api_base" in r.content.decode()

    data = posted_form(session, "a", "current", advanced=evil)
    r = client.post(reverse("pages:tuning-preview", args=[session.pk]), data, HTTP_HX_REQUEST="true")
    assert "summarizer.api_base" in r.content.decode()
    r = client.post(reverse("pages:tuning-save", args=[session.pk]), {**data, "name": "evil", "target": "project"},
                    HTTP_HX_REQUEST="true")
    assert "summarizer.api_base" in r.content.decode()

    assert not StoredPolicy.objects.filter(name="evil").exists()
    assert not CompactionRun.objects.exists()
    _no_request_reached(tenant_host)


# -- operator connections work, and their key goes only to their server -------------------------

def _declare(settings, monkeypatch, server, **extra):
    conn = {"name": "local", "models": ["openai/*"], "api_base": server.api_base, "api_key_env": OPERATOR_ENV,
            "allow_private_network": True, **extra}
    monkeypatch.setenv(OPERATOR_ENV, OPERATOR_KEY)
    settings.COMPACTION_CONNECTIONS = [conn]
    return conn


def test_a_policy_naming_an_operator_connection_runs_there_with_the_operators_key(api, small_session, tenant_host,
                                                                                 settings, monkeypatch):
    _declare(settings, monkeypatch, tenant_host)
    tenant_host.script(ok("GOALS: inspect modules. STATE: done."))
    r = api.post("/api/policies", {"name": "via-local", "activate": True, "policy": {"summarizer": {
        "model": "openai/summarizer", "connection": "local",
        "retry": {"max_retries": 0, "backoff_base": 0, "backoff_cap": 0, "jitter": 0}}}})
    assert r.status_code == 201, r.content
    stored = r.json()["policy"]["summarizer"]
    assert stored["connection"] == "local" and stored["api_base"] is None and stored["api_key_env"] is None

    ref = api.post(f"/api/sessions/{small_session['id']}/compactions", {}).json()
    run = api.get(f"/api/runs/{ref['run_id']}").json()
    assert run["status"] == "succeeded", run["error"]
    assert run["policy_snapshot"]["summarizer"]["api_base"] is None  # the address stays server-side
    (sent,) = tenant_host.requests
    assert sent.headers.get("authorization") == f"Bearer {OPERATOR_KEY}"
    assert SECRET not in json.dumps(sent.headers) and SECRET.encode() not in sent.body


def test_a_connection_without_a_key_variable_never_sends_the_services_own_provider_key(api, small_session,
                                                                                     tenant_host, settings,
                                                                                     monkeypatch):
    _declare(settings, monkeypatch, tenant_host, api_key_env=None)
    tenant_host.script(ok("GOALS: inspect modules. STATE: done."))
    ref = api.post(f"/api/sessions/{small_session['id']}/compactions", {"overrides": {
        "summarizer.model": "openai/summarizer", "summarizer.connection": "local",
        "summarizer.retry": {"max_retries": 0, "backoff_base": 0, "backoff_cap": 0, "jitter": 0}}}).json()
    assert api.get(f"/api/runs/{ref['run_id']}").json()["status"] == "succeeded"
    (sent,) = tenant_host.requests
    assert sent.headers.get("authorization") == f"Bearer {connections.NO_KEY}"


def test_with_no_connection_named_the_one_that_serves_the_model_is_used(api, small_session, tenant_host, settings,
                                                                        monkeypatch):
    _declare(settings, monkeypatch, tenant_host, models=["openai/summarizer"])
    tenant_host.script(ok("Short summary of the modules."))
    # landing.min_freed 0: the small session would otherwise free too little to summarize
    policy = {"trigger": {"kind": "messages", "threshold": 20}, "cut": {"keep_messages": 4}, "landing": {"min_freed": 0},
              "summarizer": {"model": "openai/summarizer", "params": {"temperature": 0.2, "max_tokens": 300},
                             "retry": {"max_retries": 0, "backoff_base": 0, "backoff_cap": 0, "jitter": 0}}}
    r = api.post(f"/api/sessions/{small_session['id']}/simulate", {"policy": policy})
    assert r.status_code == 200, r.content
    assert r.json()["policy"]["summarizer"]["api_base"] is None
    assert tenant_host.requests and all(q.headers.get("authorization") == f"Bearer {OPERATOR_KEY}"
                                        for q in tenant_host.requests)
    assert tenant_host.requests[0].json["temperature"] == 0.2
    # a model the connection does not list is still refused
    _refused(api.post(f"/api/sessions/{small_session['id']}/simulate",
                      {"policy": {"summarizer": {"model": "openai/gpt-4o", "connection": "local"}}}),
             "summarizer.model")


def test_the_settings_summarizer_is_the_implicit_default_connection(api, small_session, tenant_host, settings,
                                                                     monkeypatch):
    monkeypatch.setenv(OPERATOR_ENV, OPERATOR_KEY)
    settings.COMPACTION_SUMMARIZER_MODEL = "openai/summarizer"
    settings.COMPACTION_SUMMARIZER_API_BASE = tenant_host.api_base
    settings.COMPACTION_SUMMARIZER_API_KEY_ENV = OPERATOR_ENV
    settings.COMPACTION_SUMMARIZER_ALLOW_PRIVATE_NETWORK = True
    tenant_host.script(ok("GOALS: inspect modules. STATE: done."))
    ref = api.post(f"/api/sessions/{small_session['id']}/compactions", {}).json()
    run = api.get(f"/api/runs/{ref['run_id']}").json()
    assert run["status"] == "succeeded", run["error"]
    assert run["policy_snapshot"]["summarizer"]["connection"] == "default"
    assert tenant_host.requests[0].headers.get("authorization") == f"Bearer {OPERATOR_KEY}"
    # without the operator's consent to a private address, the run fails and sends nothing
    settings.COMPACTION_SUMMARIZER_ALLOW_PRIVATE_NETWORK = False
    ref = api.post(f"/api/sessions/{small_session['id']}/compactions", {}).json()
    run = api.get(f"/api/runs/{ref['run_id']}").json()
    assert run["status"] == "failed" and "private" in run["error"] and "summarizer.connection" in run["error"]
    assert len(tenant_host.requests) == 1


def test_an_admin_declared_connection_works_like_a_settings_one(api, small_session, tenant_host, monkeypatch):
    monkeypatch.setenv(OPERATOR_ENV, OPERATOR_KEY)
    ModelConnection.objects.create(name="gpu-box", allowed_models="openai/*", api_base=tenant_host.api_base,
                                   api_key_env=OPERATOR_ENV, allow_private_network=True)
    tenant_host.script(ok("GOALS: inspect modules. STATE: done."))
    ref = api.post(f"/api/sessions/{small_session['id']}/compactions", {"overrides": {
        "summarizer.model": "openai/summarizer", "summarizer.connection": "gpu-box",
        "summarizer.retry": {"max_retries": 0, "backoff_base": 0, "backoff_cap": 0, "jitter": 0}}}).json()
    assert api.get(f"/api/runs/{ref['run_id']}").json()["status"] == "succeeded"
    assert tenant_host.requests[0].headers.get("authorization") == f"Bearer {OPERATOR_KEY}"


# -- addresses ---------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest", "http://127.0.0.1:8080/v1", "http://10.1.2.3/v1", "http://172.16.0.9/v1",
    "http://192.168.1.10/v1", "http://[::1]:8080/v1", "http://[fe80::1]/v1", "http://[fc00::5]/v1",
    "http://0.0.0.0:8080/v1", "http://[::]/v1", "http://[::ffff:169.254.169.254]/v1", "http://localhost:8080/v1",
    "http://2130706433/v1",
])
def test_private_addresses_are_refused_unless_the_connection_allows_them(url):
    with pytest.raises(connections.ConnectionInvalid) as caught:
        connections.check_address(url, allow_private_network=False)
    assert caught.value.field == "api_base" and "private" in str(caught.value)
    connections.check_address(url, allow_private_network=True)


def test_a_public_address_is_accepted():
    connections.check_address("https://8.8.8.8/v1", allow_private_network=False)
    connections.check_address(None, allow_private_network=False)


def test_the_admin_form_refuses_a_link_local_address_and_a_settings_name(db, settings):
    base = {"name": "imds", "allowed_models": "openai/*", "api_base": "http://169.254.169.254/v1",
            "api_key_env": "OPENAI_API_KEY", "description": ""}
    form = ModelConnectionForm(data=base)
    assert not form.is_valid() and "api_base" in form.errors
    form = ModelConnectionForm(data={**base, "allow_private_network": "on"})
    assert form.is_valid(), form.errors
    form = ModelConnectionForm(data={**base, "api_key_env": "NOT A NAME", "allow_private_network": "on"})
    assert not form.is_valid() and "api_key_env" in form.errors
    settings.COMPACTION_CONNECTIONS = [{"name": "imds", "models": ["openai/*"]}]
    form = ModelConnectionForm(data={**base, "allow_private_network": "on"})
    assert not form.is_valid() and "name" in form.errors


def test_settings_connections_are_checked_at_startup(settings):
    with pytest.raises(ImproperlyConfigured, match="not valid JSON"):
        _connections_setting("[{")
    with pytest.raises(ImproperlyConfigured, match="list of objects"):
        _connections_setting('{"name": "x"}')
    assert _connections_setting('[{"name": "x", "models": ["openai/*"]}]') == [{"name": "x", "models": ["openai/*"]}]

    settings.COMPACTION_CONNECTIONS = [{"name": "imds", "models": ["openai/*"], "api_base": "http://169.254.169.254"}]
    (problem,) = connections.check_settings()
    assert problem.level >= 40 and "imds" in problem.msg and "private" in problem.msg
    settings.COMPACTION_CONNECTIONS = [{"name": "x", "models": [], "api_key": "sk-..."}]
    (problem,) = connections.check_settings()
    assert "COMPACTION_CONNECTIONS[0]" in problem.msg and "api_key" in problem.msg
    settings.COMPACTION_CONNECTIONS = [{"name": "ok", "models": ["openai/*"], "api_base": "http://127.0.0.1:1/v1",
                                        "allow_private_network": True}]
    assert connections.check_settings() == []


def test_the_offline_summarizer_needs_no_connection(api, small_session):
    r = api.post("/api/policies", {"name": "offline", "policy": {"summarizer": {
        "model": None, "params": {"temperature": 0}}}})
    assert r.status_code == 201, r.content
    r = api.post(f"/api/sessions/{small_session['id']}/simulate",
                 {"policy": {"summarizer": {"model": "extractive/default"}}})
    assert r.status_code == 200, r.content


def test_a_session_that_grows_past_its_trigger_with_a_legacy_policy_fails_its_run_without_a_request(
        api, tenant_host):
    project = Project.objects.get(name="acme")
    data = Policy.load({"trigger": {"kind": "messages", "threshold": 5}, "summarizer": {
        "model": "openai/x", "api_key_env": SECRET_ENV}}).to_json()
    row = StoredPolicy.objects.create(project=project, name="legacy", data=data, version=1)
    project.active_policy = row
    project.save()
    r = api.post("/api/sessions", {"messages": chat(4), "title": "grows"})
    assert r.status_code == 201, r.content
    run = CompactionRun.objects.get()
    assert run.status == "failed" and "summarizer.api_key_env" in run.error
    _no_request_reached(tenant_host)
