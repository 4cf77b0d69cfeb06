"""Projects and their members: creating a project makes its creator an owner; owners add
members as owners or viewers (``manage.py add_member``, Django admin)."""
from __future__ import annotations

from typing import Any

from django.db import transaction

from ..models import Project, ProjectMembership, ProjectRole
from . import Invalid
from .keys import get_or_create_project


@transaction.atomic
def create_project_for(user: Any, name: str) -> tuple[Project, bool]:
    """The project named ``name`` with ``user`` as its owner when this call creates it.
    An existing project of that name is returned only to a user who may see it; to anyone
    else the name is taken (no one joins a project by guessing its name)."""
    project, created = get_or_create_project(name)
    if created:
        ProjectMembership.objects.create(project=project, user=user, role=ProjectRole.OWNER)
    elif not (user.is_superuser or project.memberships.filter(user=user).exists()):
        raise Invalid(f"a project named {project.name!r} already exists; choose another name")
    return project, created


def set_member(project: Project, user: Any, role: str) -> ProjectMembership:
    """Add ``user`` to ``project`` with ``role``, or change their role."""
    if role not in ProjectRole.values:
        raise Invalid(f"role: unknown role {role!r} (expected one of {', '.join(ProjectRole.values)})")
    row, _ = ProjectMembership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    return row


def remove_member(project: Project, user: Any) -> bool:
    deleted, _ = ProjectMembership.objects.filter(project=project, user=user).delete()
    return bool(deleted)
