"""Helpers shared by the page views."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from ..models import Project, ProjectRole
from ..selectors.access import role_in
from ..selectors.layout import pick_project, project_choices
from ..selectors.list_filters import ListFilters, filter_choices, parse_filters
from ..services import ServiceError

PROJECT_KEY = "project_id"


def current_project(request: HttpRequest, prefer: Project | None = None) -> tuple[list[Project], Project | None]:
    """(the projects the user may see, the one the switcher shows). Viewing a session of
    another project makes that project current, so the switcher always names the project on
    screen; a project kept in the browser session that the user may no longer see is ignored."""
    projects = project_choices(request.user)
    if prefer is not None:
        if request.session.get(PROJECT_KEY) != prefer.pk:
            request.session[PROJECT_KEY] = prefer.pk
        return projects, next((p for p in projects if p.pk == prefer.pk), prefer)
    return projects, pick_project(projects, request.session.get(PROJECT_KEY))


def page(request: HttpRequest, template: str, context: dict[str, Any], *, project: Project | None = None,
         status: int = 200) -> HttpResponse:
    """Render a full page with the layout's context (projects, current project)."""
    projects, current = current_project(request, project)
    # what the templates offer: write controls only to the project's owners
    role = role_in(request.user, current.pk) if current is not None else None
    ctx = {"projects": projects, "current_project": current, "project_role": role,
           "can_edit": role == ProjectRole.OWNER, **context}
    return render(request, template, ctx, status=status)


def list_context(request: HttpRequest, project: Project | None, sorts: tuple[str, ...], default_sort: str,
                 read_page: Callable[..., Any]) -> dict[str, Any]:
    """What a filtered, cursor-paged list (sessions, runs) shows: the filters in the URL, one
    page read by ``read_page(project, filters, cursor=, prev=)``, the filter menus' choices. A
    cursor edited by hand shows the first page and says so."""
    filters: ListFilters = parse_filters(request.GET, sorts, default_sort)
    error = listing = None
    if project is not None:
        try:
            listing = read_page(project, filters, cursor=request.GET.get("cursor"), prev=request.GET.get("prev"))
        except ServiceError as exc:
            error = str(exc)
            listing = read_page(project, filters)
    choices = filter_choices(project) if project is not None else {}
    return {"filters": filters, "listing": listing, "list_error": error, "choices": choices}


@overload
def int_param(request: HttpRequest, name: str, default: int, lo: int | None = 0, hi: int | None = None) -> int: ...
@overload
def int_param(request: HttpRequest, name: str, default: None = None, lo: int | None = 0,
              hi: int | None = None) -> int | None: ...
def int_param(request: HttpRequest, name: str, default: int | None = None, lo: int | None = 0,
              hi: int | None = None) -> int | None:
    """An integer query parameter, clamped; a missing or malformed value gives ``default``."""
    raw = request.GET.get(name, "")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return default
    if lo is not None:
        value = max(lo, value)
    if hi is not None:
        value = min(hi, value)
    return value


def safe_next(request: HttpRequest, value: str | None, fallback: str) -> str:
    if value and url_has_allowed_host_and_scheme(value, allowed_hosts={request.get_host()},
                                                 require_https=request.is_secure()):
        return value
    return fallback


def is_htmx(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False))


def htmx_target(request: HttpRequest) -> str | None:
    """The id of the element an htmx request swaps (None for a plain request)."""
    details = getattr(request, "htmx", None)
    return details.target if details else None
