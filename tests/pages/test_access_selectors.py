"""Who sees what, at the level of dashboard.selectors.access itself: the one check every page
goes through, exercised on the ORM without rendering a page (test_access_control.py checks the
routes). Two projects, each with an owner and a viewer, a user of neither and a superuser;
every lookup is tried by each of them on both projects' objects."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404

from dashboard.models import CompactionRun, GatewayCall, ProjectMembership, Session
from dashboard.selectors import access
from dashboard.services.keys import get_or_create_project


@pytest.fixture
def world(db, django_user_model):
    """Projects created out of name order, so "by name" is visible; a user who owns one
    project and only views the other."""
    make = django_user_model.objects.create_user
    beta, _ = get_or_create_project("beta")
    alpha, _ = get_or_create_project("alpha")
    gamma, _ = get_or_create_project("gamma")
    users = {
        "owner": make("owner"),
        "viewer": make("viewer"),
        "mixed": make("mixed"),
        "outsider": make("outsider"),
        "root": django_user_model.objects.create_superuser("root", email=None, password=None),
    }
    ProjectMembership.objects.create(project=alpha, user=users["owner"], role="owner")
    ProjectMembership.objects.create(project=alpha, user=users["viewer"], role="viewer")
    ProjectMembership.objects.create(project=gamma, user=users["mixed"], role="owner")
    ProjectMembership.objects.create(project=alpha, user=users["mixed"], role="viewer")
    sessions = {p.name: Session.objects.create(project=p, title=p.name) for p in (alpha, beta, gamma)}
    runs = {name: CompactionRun.objects.create(project_id=s.project_id, session=s, trigger="api")
            for name, s in sessions.items()}
    return {"projects": {"alpha": alpha, "beta": beta, "gamma": gamma}, "users": users,
            "sessions": sessions, "runs": runs}


def _names(qs) -> list[str]:
    return [p.name for p in qs]


def test_each_user_sees_their_projects_by_name_and_a_superuser_sees_all(world):
    u = world["users"]
    assert _names(access.visible_projects(u["owner"])) == ["alpha"]
    assert _names(access.visible_projects(u["viewer"])) == ["alpha"]
    assert _names(access.visible_projects(u["mixed"])) == ["alpha", "gamma"]
    assert _names(access.visible_projects(u["outsider"])) == []
    assert _names(access.visible_projects(u["root"])) == ["alpha", "beta", "gamma"]
    assert _names(access.visible_projects(AnonymousUser())) == []
    assert _names(access.visible_projects(None)) == []


def test_the_role_is_the_membership_of_that_project_only(world):
    u, p = world["users"], world["projects"]
    assert access.role_in(u["owner"], p["alpha"].pk) == "owner"
    assert access.role_in(u["viewer"], p["alpha"].pk) == "viewer"
    assert access.role_in(u["mixed"], p["alpha"].pk) == "viewer"
    assert access.role_in(u["mixed"], p["gamma"].pk) == "owner"
    assert access.role_in(u["owner"], p["gamma"].pk) is None
    assert access.role_in(u["outsider"], p["alpha"].pk) is None
    assert access.role_in(u["root"], p["beta"].pk) == "owner"  # no membership anywhere
    assert access.role_in(AnonymousUser(), p["alpha"].pk) is None
    assert access.role_in(None, p["alpha"].pk) is None  # no user object at all
    assert access.can_edit(None, p["alpha"].pk) is False


def test_only_an_owner_or_a_superuser_may_edit_and_nobody_edits_no_project(world):
    u, p = world["users"], world["projects"]
    assert access.can_edit(u["owner"], p["alpha"].pk) is True
    assert access.can_edit(u["root"], p["beta"].pk) is True
    assert access.can_edit(u["mixed"], p["gamma"].pk) is True
    assert access.can_edit(u["mixed"], p["alpha"].pk) is False
    assert access.can_edit(u["viewer"], p["alpha"].pk) is False
    assert access.can_edit(u["outsider"], p["alpha"].pk) is False
    assert access.can_edit(u["root"], None) is False
    assert access.can_edit(AnonymousUser(), p["alpha"].pk) is False


def test_a_non_member_gets_404_a_viewer_403_on_writes_and_reads_by_default(world):
    u, p = world["users"], world["projects"]
    alpha = p["alpha"].pk
    with pytest.raises(Http404):
        access.check_access(u["outsider"], alpha)
    with pytest.raises(Http404):
        access.check_access(u["owner"], p["gamma"].pk, "edit")
    with pytest.raises(Http404):
        access.check_access(AnonymousUser(), alpha)
    assert access.check_access(u["viewer"], alpha) == "viewer"
    assert access.check_access(u["viewer"], alpha, "view") == "viewer"
    with pytest.raises(PermissionDenied, match="^viewers of a project cannot change it; ask an owner$"):
        access.check_access(u["viewer"], alpha, "edit")
    assert access.check_access(u["owner"], alpha, "edit") == "owner"
    assert access.check_access(u["root"], p["beta"].pk, "edit") == "owner"


def test_a_project_is_found_by_its_id_in_a_url_and_anything_else_is_404(world):
    u, p = world["users"], world["projects"]
    alpha = p["alpha"]
    assert access.project_for(u["viewer"], alpha.pk) == alpha
    assert access.project_for(u["viewer"], str(alpha.pk)) == alpha
    assert access.project_for(u["owner"], alpha.pk, "edit") == alpha
    assert access.project_for(u["root"], p["beta"].pk, "edit") == p["beta"]
    for bad in ("abc", None, "", max(x.pk for x in p.values()) + 1):
        with pytest.raises(Http404):
            access.project_for(u["root"], bad)
    with pytest.raises(Http404):
        access.project_for(u["outsider"], alpha.pk)
    with pytest.raises(PermissionDenied):
        access.project_for(u["viewer"], alpha.pk, "edit")


@pytest.mark.parametrize("kind", ["sessions", "runs"])
def test_sessions_and_runs_follow_their_projects_rights(world, kind):
    u = world["users"]
    lookup = access.session_for if kind == "sessions" else access.run_for
    objs = world[kind]
    assert lookup(u["viewer"], objs["alpha"].pk) == objs["alpha"]
    assert lookup(u["owner"], objs["alpha"].pk, "edit") == objs["alpha"]
    assert lookup(u["root"], objs["beta"].pk, "edit") == objs["beta"]
    assert lookup(u["mixed"], objs["gamma"].pk, "edit") == objs["gamma"]
    for user, name in ((u["owner"], "gamma"), (u["outsider"], "alpha"), (u["viewer"], "beta")):
        with pytest.raises(Http404):
            lookup(user, objs[name].pk)
    with pytest.raises(PermissionDenied):
        lookup(u["viewer"], objs["alpha"].pk, "edit")
    with pytest.raises(PermissionDenied):
        lookup(u["mixed"], objs["alpha"].pk, "edit")
    with pytest.raises(Http404):
        lookup(u["root"], max(o.pk for o in objs.values()) + 1)


def test_a_runs_progress_block_is_for_anyone_who_may_see_the_run(world):
    u, runs = world["users"], world["runs"]
    assert access.run_status_for(u["viewer"], runs["alpha"].pk).pk == runs["alpha"].pk
    assert access.run_status_for(u["root"], runs["beta"].pk).pk == runs["beta"].pk
    with pytest.raises(Http404):
        access.run_status_for(u["outsider"], runs["alpha"].pk)
    with pytest.raises(Http404):
        access.run_status_for(u["owner"], runs["gamma"].pk)


def test_a_gateway_call_is_seen_through_its_sessions_project(world):
    u, s = world["users"], world["sessions"]
    call = GatewayCall.objects.create(session=s["alpha"], endpoint="chat/completions", model="gpt-4o", status_code=200)
    other = GatewayCall.objects.create(session=s["beta"], endpoint="messages", model="gpt-4o", status_code=200)
    for who in ("owner", "viewer", "mixed", "root"):
        assert access.call_for(u[who], call.pk) == call
        assert access.call_for(u[who], call.pk).session.project.name == "alpha"
    assert access.call_for(u["root"], other.pk) == other
    for who, pk in (("outsider", call.pk), ("owner", other.pk), ("mixed", other.pk), ("owner", other.pk + 100)):
        with pytest.raises(Http404):
            access.call_for(u[who], pk)
    assert access.call_for(u["owner"], call.pk, need="edit") == call
    with pytest.raises(PermissionDenied):
        access.call_for(u["viewer"], call.pk, need="edit")
