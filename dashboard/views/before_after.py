"""Before/after of one run: the context it was given and the one it produced, side by side,
aligned by message, with the summary where it replaced the evicted span."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ..selectors.access import run_for
from ..selectors.before_after import before_after as before_after_rows
from ..selectors.runs import run_badge
from ._common import int_param, page


@login_required
@require_GET
def before_after(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_for(request.user, pk)
    data = before_after_rows(run, int_param(request, "offset", 0))
    return page(request, "pages/before_after.html",
                {"nav": "session", "run": run, "session": run.session, "badge": run_badge(run), "ba": data},
                project=run.project)
