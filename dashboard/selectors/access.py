"""Who may see and change what: the one visibility check every page view goes through.

A user sees the projects they are a member of (``ProjectMembership``); a superuser sees
every project. Anything of a project the user cannot see is answered 404, as if it did not
exist (no page says which ids are taken). A write needs the owner role: a viewer asking for
one gets 403 (``PermissionDenied``), so the page can say that the action exists but is not
theirs. Views fetch each project-scoped object through one call here, e.g.
``session = session_for(request.user, pk, need="edit")``.
"""
from __future__ import annotations

from typing import Any, Literal

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from ..models import CompactionRun, GatewayCall, Project, ProjectMembership, ProjectRole, Session
from .runs import load_run, load_run_status
from .sessions import load_session

Need = Literal["view", "edit"]


def visible_projects(user: Any) -> QuerySet[Project]:
    """Every project the user may see, by name."""
    qs = Project.objects.order_by("name")
    if not getattr(user, "is_authenticated", False):
        return qs.none()
    if user.is_superuser:
        return qs
    return qs.filter(memberships__user=user)


def role_in(user: Any, project_id: int) -> str | None:
    """The user's role in a project (a superuser counts as owner), or None for no access."""
    if not getattr(user, "is_authenticated", False):
        return None
    if user.is_superuser:
        return ProjectRole.OWNER
    return (ProjectMembership.objects.filter(project_id=project_id, user=user)
            .values_list("role", flat=True).first())


def can_edit(user: Any, project_id: int | None) -> bool:
    return project_id is not None and role_in(user, project_id) == ProjectRole.OWNER


def check_access(user: Any, project_id: int, need: Need = "view") -> str:
    """The user's role, or Http404 (not their project) / PermissionDenied (a viewer asking to write)."""
    role = role_in(user, project_id)
    if role is None:
        raise Http404("no such page")
    if need == "edit" and role != ProjectRole.OWNER:
        raise PermissionDenied("viewers of a project cannot change it; ask an owner")
    return role


def project_for(user: Any, pk: Any, need: Need = "view") -> Project:
    try:
        project = Project.objects.filter(pk=int(pk)).first()
    except (TypeError, ValueError):
        project = None
    if project is None:
        raise Http404("no such project")
    check_access(user, project.pk, need)
    return project


def session_for(user: Any, pk: int, need: Need = "view") -> Session:
    session = load_session(pk)
    check_access(user, session.project_id, need)
    return session


def call_for(user: Any, pk: int, need: Need = "view") -> GatewayCall:
    """A gateway call (with its session and project), checked through its session's project."""
    call = GatewayCall.objects.select_related("session", "session__project").filter(pk=pk).first()
    if call is None:
        raise Http404("no such call")
    check_access(user, call.session.project_id, need)
    return call


def run_for(user: Any, pk: int, need: Need = "view") -> CompactionRun:
    run = load_run(pk)
    check_access(user, run.project_id, need)
    return run


def run_status_for(user: Any, pk: int) -> CompactionRun:
    """The run of a progress block (its small columns only), for a user who may see it."""
    run = load_run_status(pk)
    check_access(user, run.project_id, "view")
    return run
