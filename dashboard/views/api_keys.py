"""API keys page of a project: create a key with a name (its secret is shown once, in the
answer to the POST that made it, with a copy button), revoke a key, see when each was last
used, and the requests to try first. Viewers see the list; only owners create and revoke."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET, require_POST

from ..models import ApiKey
from ..selectors.access import project_for
from ..selectors.api_keys import api_base, project_keys
from ..services.keys import create_api_key, revoke_api_key
from ._common import page


def _render(request: HttpRequest, project, **extra) -> HttpResponse:
    ctx = {"nav": "keys", "project": project, "keys": project_keys(project), "api_base": api_base(request), **extra}
    return page(request, "pages/api_keys.html", ctx, project=project)


@login_required
@require_GET
def api_keys(request: HttpRequest, pk: int) -> HttpResponse:
    return _render(request, project_for(request.user, pk))


@login_required
@require_POST
def create_key(request: HttpRequest, pk: int) -> HttpResponse:
    """Create a key and answer with the page showing its secret (never a redirect: the
    secret must not land in a URL, the browser history or the session)."""
    project = project_for(request.user, pk, need="edit")
    name = request.POST.get("name", "").strip()[:200] or f"created by {request.user.get_username()}"
    row, secret = create_api_key(project, name)
    response = _render(request, project, new_key=secret, new_row=row)
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def revoke_key(request: HttpRequest, pk: int, key_id: int) -> HttpResponse:
    project = project_for(request.user, pk, need="edit")
    revoke_api_key(get_object_or_404(ApiKey, pk=key_id, project=project))
    return redirect("pages:api-keys", project.pk)
