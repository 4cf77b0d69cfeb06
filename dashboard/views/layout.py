"""The layout's own routes: home, project switcher, sign in and out."""
from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from ..selectors.access import visible_projects
from ._common import PROJECT_KEY


@login_required
@require_POST
def switch_project(request: HttpRequest) -> HttpResponse:
    """Remember the chosen project in the browser session, then go back to the list (a
    session page of the old project would not belong to the new one)."""
    raw = request.POST.get("project") or ""
    project = visible_projects(request.user).filter(pk=int(raw)).only("id").first() if raw.isdigit() else None
    if project is not None:
        request.session[PROJECT_KEY] = project.pk
    return redirect("pages:sessions")


login = auth_views.LoginView.as_view(template_name="pages/login.html", next_page="pages:home",
                                     redirect_authenticated_user=True)
logout = auth_views.LogoutView.as_view(next_page="pages:login")
