"""Tuning: a preset picker and a policy form; every change re-simulates the stored session
(debounced htmx POST) and redraws where compactions would fire, LLM calls, peak and final
context, tokens saved, estimated cost and retention. A second policy can be compared side by
side. The policy can be saved as the project's policy or applied to this session.
A threshold sweep (a Celery task, polled) replays policy A at ten trigger settings and
plots what each sends against what it keeps.

Previews use the offline extractive summarizer (no model is called; summary sizes are
the offline summarizer's); cost is estimated at litellm's prices for the chosen models.
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from compaction import PolicyError

from ..forms import SavePolicyForm
from ..models import TuningSweep
from ..selectors.access import check_access, session_for
from ..selectors.tuning import initial_forms, posted_policy, starting_point, tuning_preview
from ..selectors.tuning_sweeps import latest_sweep, sweep_chart, sweep_label, sweep_rows
from ..selectors.workers import sweep_waiting_note
from ..services import ServiceError
from ..services.policies import save_tuned_policy
from ..services.tuning_sweeps import SWEEP_KINDS, request_sweep
from ._common import is_htmx, page


@login_required
@require_GET
def tuning(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk)
    start = starting_point(session)
    ctx = {"nav": "session", "tab": "tuning", "session": session, "forms": initial_forms(session, start),
           "compare": False, "current_label": start.label, "policy_row": start.row,
           "sweep_kinds": SWEEP_KINDS, **_sweep_context(latest_sweep(session))}
    return page(request, "pages/tuning.html", ctx, project=session.project)


@login_required
@require_POST
def preview(request: HttpRequest, pk: int) -> HttpResponse:
    """Simulate the form's policies over the stored history. Always answers 200 with the
    preview (errors are shown in it), so htmx swaps it in."""
    session = session_for(request.user, pk)
    result = tuning_preview(session, request.POST)
    ctx = {"session": session, "tuning": result, "forms": result.forms, "compare": result.compare,
           "chart": result.chart}
    if is_htmx(request):
        return render(request, "pages/tuning.html#preview-response", ctx)
    start = starting_point(session)
    ctx.update({"nav": "session", "tab": "tuning", "policy_row": start.row, "current_label": start.label,
                "preview_inline": True})
    return page(request, "pages/tuning.html", ctx, project=session.project)


@login_required
@require_POST
def save(request: HttpRequest, pk: int) -> HttpResponse:
    """Save a side's policy (as edited; side A unless ``save_side=b``) under a name, then
    make it the project's active policy (``target=project``) or this session's policy
    (``target=session``)."""
    session = session_for(request.user, pk, need="edit")
    form = SavePolicyForm(request.POST)
    ctx = {"session": session, "save_errors": [m for ms in form.errors.values() for m in ms]}
    if form.is_valid():
        try:
            policy = posted_policy(session, request.POST, form.cleaned_data["save_side"])
            ctx["saved"] = save_tuned_policy(session, form.cleaned_data["name"], policy, form.cleaned_data["target"])
            ctx["target"] = form.cleaned_data["target"]
        except (PolicyError, ServiceError) as exc:
            ctx["save_errors"] = [str(exc)]
    return render(request, "pages/tuning.html#save-result", ctx)


def _sweep_context(sweep: TuningSweep | None) -> dict[str, object]:
    if sweep is None:
        return {"sweep": None}
    return {"sweep": sweep, "sweep_label": sweep_label(sweep), "sweep_chart": sweep_chart(sweep),
            "sweep_rows": sweep_rows(sweep), "sweep_waiting": sweep_waiting_note(sweep)}


@login_required
@require_POST
def start_sweep(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue a sweep of policy A (as edited in the posted tuning form) over this session or
    its project; answers the sweep's status block, which polls until the sweep ends. An owner
    action: a sweep stores a row and takes worker time."""
    session = session_for(request.user, pk, need="edit")
    try:
        policy = posted_policy(session, request.POST, "a")
        sweep = request_sweep(session, policy, kind=request.POST.get("sweep_kind", ""),
                              scope=request.POST.get("sweep_scope", "session"))
    except (PolicyError, ServiceError) as exc:
        return render(request, "pages/tuning.html#sweep-status", {"session": session, "sweep_error": str(exc)})
    return render(request, "pages/tuning.html#sweep-status", {"session": session, **_sweep_context(sweep)})


@login_required
@require_GET
def sweep_status(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = get_object_or_404(TuningSweep, pk=pk)
    check_access(request.user, sweep.project_id)
    return render(request, "pages/tuning.html#sweep-status", {"session": sweep.session, **_sweep_context(sweep)})
