"""Run page: live status, ledger, summary, the prompt used, model, attempts, retention and
tokens by category before and after."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ..selectors.access import run_for
from ..selectors.run_page import run_page_context
from ..services import run_recall
from ._common import int_param, page


@login_required
@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(request.user, pk)
    ctx = run_page_context(run, int_param(request, "ledger_offset", 0), request.GET.get("fate", ""))
    run_recall.keep(run, ctx["lookahead"])  # computed for the page anyway: the overview reads it kept
    return page(request, "pages/run.html", {"nav": "session", **ctx}, project=run.project)
