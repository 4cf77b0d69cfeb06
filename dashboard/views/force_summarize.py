"""Force a summary from the session page, and the live progress of any run.

The form enqueues a run through the service (``force_run``: validated policy, snapshot,
task sent after commit); while a forced run of the session is pending, pressing again shows
that run's progress instead of queueing another. The progress block polls every second while the run is queued or
running; the response that shows it finished carries ``HX-Trigger: run-finished`` so the
session page reloads its timeline and transcript (on the run page: ``HX-Refresh``)."""
from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from compaction import PRESETS

from ..forms import parse_overrides
from ..models import TriggerKind
from ..selectors.access import run_status_for, session_for
from ..services import ServiceError
from ..services.rate_limits import RateLimited
from ..services.runs import force_run
from ._common import is_htmx


@login_required
@require_POST
def force_summarize(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk, need="edit")
    preset = request.POST.get("preset") or None
    reason = request.POST.get("reason", "").strip()[:500] or "forced from the dashboard"
    error = None
    run = None
    retry_after: int | None = None
    if preset is not None and preset not in PRESETS:
        error = f"unknown preset {preset!r}"
    else:
        try:
            overrides = parse_overrides(request.POST.get("overrides", ""))
            run, _created = force_run(session, trigger=TriggerKind.MANUAL, reason=reason,
                                      overrides=overrides or None, preset=preset)
        except ValueError as exc:
            error = f"overrides {exc}"
        except RateLimited as exc:
            retry_after = exc.retry_after
            error = f"Not queued: {exc}"
        except ServiceError as exc:
            field = getattr(exc, "field", None)
            error = f"{field}: {exc}" if field and not str(exc).startswith(field) else str(exc)
    if retry_after is not None:
        # htmx swaps only 2xx answers: the button's request gets the message with 200, a plain
        # form post the 429; both say when to try again.
        response = render(request, "partials/form_error.html", {"error": error},
                          status=200 if is_htmx(request) else 429)
        response["Retry-After"] = str(retry_after)
        return response
    if not is_htmx(request):
        return redirect("pages:run", run.pk) if run is not None else redirect("pages:session", session.pk)
    if error:
        return render(request, "partials/form_error.html", {"error": error})
    return render(request, "partials/run_progress.html", {"run": run, "poll_for": "session"})


@login_required
@require_GET
def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    run = run_status_for(request.user, pk)
    context = request.GET.get("context", "session")
    response = render(request, "partials/run_progress.html", {"run": run, "poll_for": context})
    if run.is_final and request.GET.get("poll"):
        if context == "run":
            response["HX-Refresh"] = "true"
        else:
            response["HX-Trigger"] = json.dumps({"run-finished": {"run": run.pk, "status": run.status}})
    return response
