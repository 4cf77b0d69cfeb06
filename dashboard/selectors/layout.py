"""Reads of the layout: the projects of the switcher."""
from __future__ import annotations

from typing import Any

from ..models import Project
from .access import visible_projects


def project_choices(user: Any) -> list[Project]:
    """The projects of the switcher: those the user may see."""
    return list(visible_projects(user).only("id", "name"))


def pick_project(projects: list[Project], wanted: Any) -> Project | None:
    """The project kept in the browser session, else the first one."""
    for p in projects:
        if str(p.pk) == str(wanted):
            return p
    return projects[0] if projects else None
