"""Reads of the API keys page: a project's keys, newest first (only prefixes: the secret
of a key is never stored)."""
from __future__ import annotations

from django.http import HttpRequest

from ..models import ApiKey, Project


def project_keys(project: Project) -> list[ApiKey]:
    return list(ApiKey.objects.filter(project=project).order_by("revoked_at", "-created_at", "-id"))


def api_base(request: HttpRequest) -> str:
    """The service's address as the browser reached it, for the curl snippets."""
    return request.build_absolute_uri("/").rstrip("/")
