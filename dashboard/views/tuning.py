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

import logging

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from compaction import PolicyError

from ..forms import SavePolicyForm
from ..models import ProjectRole, TuningSweep
from ..selectors.access import check_access, session_for
from ..selectors.tuning import initial_forms, posted_policy, starting_point, tuning_preview
from ..selectors.tuning_sweeps import (
    DEFAULT_RECALL_TARGET,
    latest_sweep,
    recall_target,
    sweep_chart,
    sweep_label,
    sweep_recommendation,
    sweep_rows,
)
from ..selectors.workers import sweep_waiting_note
from ..services import Invalid, ServiceError
from ..services.policies import save_tuned_policy
from ..services.superseded import Superseded, take_ticket
from ..services.tuning_apply import apply_sweep_setting, undo_apply
from ..services.tuning_sweeps import SWEEP_KINDS, request_sweep
from ._common import is_htmx, page

log = logging.getLogger("dashboard.pages")


@login_required
@require_GET
def tuning(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk)
    start = starting_point(session)
    ctx = {"nav": "session", "tab": "tuning", "session": session, "forms": initial_forms(session, start),
           "compare": False, "current_label": start.label, "policy_row": start.row,
           "sweep_kinds": SWEEP_KINDS, **_sweep_context(latest_sweep(session), request.GET.get("recall_target"))}
    return page(request, "pages/tuning.html", ctx, project=session.project)


@login_required
@require_POST
def preview(request: HttpRequest, pk: int) -> HttpResponse:
    """Simulate the form's policies over the stored history. Answers 200 with the preview
    (errors are shown in it), so htmx swaps it in; 204 and nothing when a later preview of
    the same page (``whatif_page``, ``whatif_seq``) has arrived, even mid-replay."""
    session = session_for(request.user, pk)
    ticket = take_ticket(int(request.user.pk or 0), session.pk, request.POST.get("whatif_page"), request.POST.get("whatif_seq"))
    try:
        if ticket is not None and ticket.superseded():
            raise Superseded(f"preview {ticket.seq} arrived after a later one")
        result = tuning_preview(session, request.POST, progress=ticket.progress if ticket is not None else None)
    except Superseded as exc:
        log.info("tuning preview of session %s: %s", session.pk, exc)
        return HttpResponse(status=204)  # htmx swaps nothing; the browser dropped this request anyway
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


#: Where the recommendation's buttons put a setting in use, and what they say.
APPLY_TARGETS = (("session", "Apply to this session"), ("project", "Save as the project's policy"))


def _sweep_context(sweep: TuningSweep | None, raw_target: str | None = None) -> dict[str, object]:
    """The sweep's status block, with its recommendation at the recall target the page
    asked for (a percentage; a bad one is named and the default used)."""
    try:
        target, target_error = recall_target(raw_target), ""
    except ValueError as exc:
        target, target_error = DEFAULT_RECALL_TARGET, str(exc)
    ctx: dict[str, object] = {"sweep": sweep, "recall_target": f"{target * 100:g}", "target_error": target_error,
                              "apply_targets": APPLY_TARGETS}
    if sweep is None:
        return ctx
    recommendation = sweep_recommendation(sweep, target)
    choice = recommendation.choice if recommendation is not None else None
    return {**ctx, "sweep_label": sweep_label(sweep), "sweep_chart": sweep_chart(sweep),
            "sweep_rows": sweep_rows(sweep), "sweep_waiting": sweep_waiting_note(sweep),
            "recommendation": recommendation,
            "sweep_apply_fields": {"sweep": sweep.pk, "value": choice.value} if choice is not None else {}}


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
    return render(request, "pages/tuning.html#sweep-status",
                  {"session": session, "can_edit": True, **_sweep_context(sweep, request.POST.get("recall_target"))})


@login_required
@require_GET
def sweep_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The sweep's status block (polled while it runs), its recommendation at
    ``recall_target`` (a percentage, default 98)."""
    sweep = get_object_or_404(TuningSweep, pk=pk)
    role = check_access(request.user, sweep.project_id)
    return render(request, "pages/tuning.html#sweep-status",
                  {"session": sweep.session, "can_edit": role == ProjectRole.OWNER,
                   **_sweep_context(sweep, request.GET.get("recall_target"))})


@login_required
@require_POST
def apply_setting(request: HttpRequest, pk: int) -> HttpResponse:
    """Put a swept setting (``sweep``, ``value``) in use for this session or its project
    (``target``); answers what was applied, with an undo button."""
    session = session_for(request.user, pk, need="edit")
    ctx: dict[str, object] = {"session": session}
    try:
        sweep = TuningSweep.objects.filter(pk=int(request.POST.get("sweep", "")), project_id=session.project_id).first()
        if sweep is None:
            raise Invalid("apply: no such sweep in this project")
        ctx["applied"] = apply_sweep_setting(session, sweep, float(request.POST.get("value", "")),
                                             request.POST.get("target", ""))
    except ValueError:
        ctx["apply_error"] = "apply: the sweep and the setting must be numbers"
    except ServiceError as exc:
        ctx["apply_error"] = str(exc)
    return render(request, "pages/tuning.html#apply-result", ctx)


@login_required
@require_POST
def undo_setting(request: HttpRequest, pk: int) -> HttpResponse:
    """Put back the policy that was in use before an apply (``target``, ``previous``)."""
    session = session_for(request.user, pk, need="edit")
    target = request.POST.get("target", "")
    ctx: dict[str, object] = {"session": session, "undo_target": target}
    try:
        raw = request.POST.get("previous", "")
        ctx["restored"] = undo_apply(session, target, int(raw) if raw else None)
        ctx["undone"] = True
    except ValueError:
        ctx["apply_error"] = "undo: the previous policy must be a number"
    except ServiceError as exc:
        ctx["apply_error"] = str(exc)
    return render(request, "pages/tuning.html#apply-result", ctx)
