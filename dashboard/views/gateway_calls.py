"""The session page's Calls table, a page at a time (the htmx "older calls" link)."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..selectors.access import session_for
from ..selectors.gateway_calls import calls_page
from ._common import int_param


@login_required
@require_GET
def calls(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk)
    return render(request, "partials/gateway_calls.html",
                  {"session": session, "calls": calls_page(session, int_param(request, "before", None))})
