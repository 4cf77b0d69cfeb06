"""Reads of the layout: the projects of the switcher."""
from __future__ import annotations

from typing import Any

from ..models import Project


def project_choices() -> list[Project]:
    return list(Project.objects.order_by("name").only("id", "name"))


def pick_project(projects: list[Project], wanted: Any) -> Project | None:
    """The project kept in the browser session, else the first one."""
    for p in projects:
        if str(p.pk) == str(wanted):
            return p
    return projects[0] if projects else None
