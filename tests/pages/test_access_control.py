"""Access control on every page route: a user sees and acts only on the projects they are a
member of, viewers cannot write, superusers see everything.

``ROUTES`` classifies every route of dashboard/urls_pages.py; a route missing from it fails
``test_every_page_route_is_classified``, so a new page cannot ship without saying who may
use it (and then the parametrized tests check that it does what the table says)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client
from django.urls import URLPattern, reverse

from dashboard import urls_pages
from dashboard.models import (
    ApiKey,
    CompactionRun,
    ContinuousTuning,
    Project,
    ProjectMembership,
    StoredPolicy,
    TuningGrid,
    TuningSweep,
)
from dashboard.services.call_bodies import CallBody, SentBody
from dashboard.services.gateway_calls import record_call
from dashboard.services.keys import create_api_key
from dashboard.views._common import PROJECT_KEY
from tests.pages import factories

PASSWORD = "correct horse battery"


@dataclass(frozen=True)
class Route:
    method: str  # GET or POST
    target: str  # what the URL names: session, run, project, key, or "" (no object: the current project)
    need: str  # view or edit
    read_status: int = 200  # what a member who may use it gets (a redirect for some)
    data: tuple[tuple[str, str], ...] = ()  # a POST's form: what a real use sends, so a missing check shows


ROUTES: dict[str, Route] = {
    "home": Route("GET", "", "view"),
    "docs": Route("GET", "", "view"),
    "doc": Route("GET", "", "view"),
    "login": Route("GET", "", "view", 302),
    "logout": Route("POST", "", "view", 302),
    "switch-project": Route("POST", "", "view", 302),
    "sessions": Route("GET", "", "view"),
    "upload": Route("POST", "", "edit", 302),
    "sessions-delete": Route("POST", "", "edit"),
    "runs": Route("GET", "", "view"),
    "search": Route("GET", "", "view"),
    "create-project": Route("POST", "", "view", 302),
    "load-samples": Route("POST", "project", "edit", 302),
    "api-keys": Route("GET", "project", "view"),
    "api-key-create": Route("POST", "project", "edit"),
    "api-key-revoke": Route("POST", "key", "edit", 302),
    "session": Route("GET", "session", "view"),
    "session-overview": Route("GET", "session", "view"),
    "transcript": Route("GET", "session", "view"),
    "message": Route("GET", "message", "view"),
    "force": Route("POST", "session", "edit", 302),
    "gateway-calls": Route("GET", "session", "view"),
    "gateway-call": Route("GET", "call", "view"),
    "gateway-call-upstream": Route("GET", "call", "view"),
    "run-progress": Route("GET", "run", "view"),
    "run": Route("GET", "run", "view"),
    "before-after": Route("GET", "run", "view"),
    "archive": Route("GET", "session", "view"),
    "archive-replay": Route("GET", "session", "view"),
    "archive-entry": Route("GET", "entry", "view", 302),
    "tuning": Route("GET", "session", "view"),
    "tuning-preview": Route("POST", "session", "view"),
    "tuning-save": Route("POST", "session", "edit"),
    "tuning-sweep": Route("POST", "session", "edit", data=(("sweep_kind", "tokens"), ("sweep_scope", "session"))),
    "tuning-apply": Route("POST", "session", "edit"),
    "tuning-undo": Route("POST", "session", "edit"),
    "sweep": Route("GET", "sweep", "view"),
    "tuning-grid": Route("POST", "session", "edit", data=(("grid_x", "tokens"), ("grid_y", "keep_messages"),
                                                         ("grid_columns", "2"), ("grid_rows", "2"), ("grid_scope", "session"))),
    "tuning-grid-latest": Route("GET", "session", "view"),
    "grid": Route("GET", "grid", "view"),
    "grid-cancel": Route("POST", "grid", "edit"),
    "grid-apply": Route("POST", "grid", "edit", data=(("cell", "0"), ("target", "project"))),
    "tuning-evidence": Route("GET", "tuning", "view"),
}
SCOPED = sorted(name for name, r in ROUTES.items() if r.target)
WRITES = sorted(name for name, r in ROUTES.items() if r.target and r.need == "edit")
READS = sorted(name for name, r in ROUTES.items() if r.target and r.need == "view")


def test_every_page_route_is_classified():
    names = {p.name for p in urls_pages.urlpatterns if isinstance(p, URLPattern)}
    missing = sorted(names - set(ROUTES))
    assert not missing, f"classify these routes in ROUTES (who may use them) and check them with the visibility " \
                        f"helper of dashboard/selectors/access.py: {missing}"
    assert not set(ROUTES) - names, f"stale entries in ROUTES: {sorted(set(ROUTES) - names)}"


@pytest.fixture
def acme(project, django_capture_on_commit_callbacks):
    """alice's project "acme": a session with one forced run (so a run and an archive entry) and a key."""
    session = factories.import_messages(project, factories.agent_messages(10), title="acme secret session")
    run = factories.force(session, capture=django_capture_on_commit_callbacks)
    assert run.status == "succeeded" and run.archive_refs, run.error
    key, _secret = create_api_key(project, "acme key")
    return {"project": project, "session": session, "run": run, "entry": run.archive_refs[0], "key": key}


def _args(route: Route, objs: dict) -> list:
    return {
        "session": lambda: [objs["session"].pk],
        "message": lambda: [objs["session"].pk, 0],
        "run": lambda: [objs["run"].pk],
        "project": lambda: [objs["project"].pk],
        "key": lambda: [objs["project"].pk, objs["key"].pk],
        "entry": lambda: [objs["session"].pk, objs["entry"]],
        "call": lambda: [_gateway_call(objs["session"]).pk],
        "sweep": lambda: [TuningSweep.objects.create(project=objs["project"], session=objs["session"],
                                                     parameter="tokens", status="done").pk],
        "tuning": lambda: [ContinuousTuning.objects.create(project=objs["project"], window_days=7, budget_seconds=60,
                                                           recall_target=0.98, status="done").pk],
        "grid": lambda: [TuningGrid.objects.get_or_create(project=objs["project"], session=objs["session"],
                                                          x_param="tokens", y_param="keep_messages")[0].pk],
    }[route.target]()


def _gateway_call(session):
    """A gateway call of the session with its body kept (what the inspector and its download read)."""
    sent = SentBody('{"model": "gpt-4o", "messages": ', '[{"role":"user","content":"acme secret"}]', "}")
    return record_call(session, endpoint="chat/completions", model="gpt-4o", status_code=200,
                       body=CallBody(format="chat", fields={"model": "gpt-4o"}, messages=1, added=0, upto=1, sent=sent,
                                     reply={"message": {"role": "assistant", "content": "ok"}}))


def _call(client, name: str, objs: dict):
    route = ROUTES[name]
    url = reverse(f"pages:{name}", args=_args(route, objs))
    return client.post(url, dict(route.data)) if route.method == "POST" else client.get(url)


def _client_for(django_user_model, username: str, **flags):
    user = django_user_model.objects.create_user(username, password=PASSWORD, **flags)
    c = Client()
    c.force_login(user)
    return c, user


@pytest.fixture
def outsider(django_user_model):
    """olga, owner of another project ("globex")."""
    c, olga = _client_for(django_user_model, "olga")
    factories.add_member(factories.make_project("globex"), olga)
    return c


@pytest.fixture
def viewer(django_user_model, acme):
    c, victor = _client_for(django_user_model, "victor")
    factories.add_member(acme["project"], victor, "viewer")
    return c


def _writes_left_alone(acme) -> None:
    assert CompactionRun.objects.filter(session=acme["session"]).count() == 1
    assert not ApiKey.objects.filter(pk=acme["key"].pk, revoked_at__isnull=False).exists()
    assert ApiKey.objects.filter(project=acme["project"]).count() == 1
    assert acme["project"].sessions.count() == 1
    assert StoredPolicy.objects.filter(project=acme["project"]).count() == 1
    # the only sweeps are the finished ones _args makes for the sweep status page
    assert not TuningSweep.objects.filter(project=acme["project"]).exclude(status="done").exists()
    # and the only grid is the queued one _args makes for the grid pages, still queued
    assert list(TuningGrid.objects.filter(project=acme["project"]).values_list("status", flat=True)) in ([], ["queued"])


@pytest.mark.parametrize("name", SCOPED)
def test_a_user_of_another_project_gets_404(outsider, acme, name):
    r = _call(outsider, name, acme)
    assert r.status_code == 404, (name, r.status_code)
    assert b"acme secret session" not in r.content
    _writes_left_alone(acme)


@pytest.mark.parametrize("name", WRITES)
def test_a_viewer_gets_403_on_every_write(viewer, acme, name):
    r = _call(viewer, name, acme)
    assert r.status_code == 403, (name, r.status_code)
    _writes_left_alone(acme)


@pytest.mark.parametrize("name", READS)
def test_a_viewer_reads_every_page_of_the_project(viewer, acme, name):
    assert _call(viewer, name, acme).status_code == ROUTES[name].read_status, name


@pytest.mark.parametrize("name", READS)
def test_a_superuser_sees_every_project(django_user_model, acme, name):
    root, _ = _client_for(django_user_model, "root", is_superuser=True, is_staff=True)
    assert _call(root, name, acme).status_code == ROUTES[name].read_status, name


@pytest.mark.parametrize("name", WRITES)
def test_the_owner_may_write(web, acme, name, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        r = _call(web, name, acme)
    assert r.status_code in (200, 302), (name, r.status_code)


def test_every_post_route_is_a_write_or_a_reasoned_exception():
    """A POST changes something unless it is one of these: logging out, choosing the project on
    screen and creating a project of one's own touch no project's data; a tuning preview
    simulates in memory and writes nothing."""
    not_writes = {"logout", "switch-project", "create-project", "tuning-preview"}
    posts = {name for name, r in ROUTES.items() if r.method == "POST"}
    assert posts - not_writes == {name for name, r in ROUTES.items() if r.need == "edit"}


def test_a_viewer_starts_no_sweep_and_sees_no_sweep_button(web, viewer, acme):
    tuning = reverse("pages:tuning", args=[acme["session"].pk])
    assert 'data-testid="sweep-start"' in web.get(tuning).content.decode()
    html = viewer.get(tuning).content.decode()
    assert 'data-testid="sweep-start"' not in html and "its owners run sweeps" in html
    r = viewer.post(reverse("pages:tuning-sweep", args=[acme["session"].pk]),
                    {"sweep_kind": "tokens", "sweep_scope": "project"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 403
    assert not TuningSweep.objects.exists()


def test_the_sessions_list_shows_only_the_users_projects(outsider, acme):
    session = outsider.session
    session[PROJECT_KEY] = acme["project"].pk  # a stale or forged choice of project
    session.save()
    html = outsider.get(reverse("pages:sessions")).content.decode()
    assert "acme secret session" not in html and ">acme</option>" not in html and ">globex</option>" in html
    outsider.post(reverse("pages:switch-project"), {"project": acme["project"].pk})
    assert "acme secret session" not in outsider.get(reverse("pages:sessions")).content.decode()


def test_a_viewer_cannot_upload_into_the_project(viewer, acme):
    r = viewer.post(reverse("pages:upload"), {"text": '[{"role": "user", "content": "hi"}]'})
    assert r.status_code == 403
    _writes_left_alone(acme)


def test_a_user_without_projects_gets_an_explanatory_page(django_user_model, acme):
    c, _ = _client_for(django_user_model, "nobody")
    html = c.get(reverse("pages:sessions")).content.decode()
    assert 'data-testid="no-projects"' in html and "acme" not in html
    assert "add_member" in html


def test_creating_a_project_makes_the_creator_its_owner(django_user_model, acme):
    c, nina = _client_for(django_user_model, "nina")
    assert c.post(reverse("pages:create-project"), {"name": "initech"}).status_code == 302
    project = Project.objects.get(name="initech")
    assert ProjectMembership.objects.get(project=project, user=nina).role == "owner"
    # a taken name does not let anyone into that project
    r = c.post(reverse("pages:create-project"), {"name": "acme"})
    assert r.status_code == 400 and "already exists" in r.content.decode()
    assert not ProjectMembership.objects.filter(project=acme["project"], user=nina).exists()


def test_the_owner_sees_write_controls_and_a_viewer_does_not(web, viewer, acme):
    url = reverse("pages:session", args=[acme["session"].pk])
    assert 'data-testid="force-button"' in web.get(url).content.decode()
    html = viewer.get(url).content.decode()
    assert 'data-testid="force-button"' not in html and 'data-testid="viewer-note"' in html
    tuning = reverse("pages:tuning", args=[acme["session"].pk])
    assert 'data-testid="save-project"' in web.get(tuning).content.decode()
    assert 'data-testid="save-project"' not in viewer.get(tuning).content.decode()
