"""Tuning: a preset picker and a policy form; every change re-simulates the stored session
(debounced htmx POST) and redraws where compactions would fire, LLM calls, peak and final
context, tokens saved, estimated cost and retention. A second policy can be compared side by
side. The policy can be saved as the project's policy or applied to this session.

Previews use the offline extractive summarizer (no model is called; summary sizes are
the offline summarizer's); cost is estimated at litellm's prices for the chosen models.
"""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from compaction import PolicyError

from ..forms import SavePolicyForm
from ..selectors.access import session_for
from ..selectors.tuning import initial_forms, posted_policy, starting_point, tuning_preview
from ..services import ServiceError
from ..services.policies import save_tuned_policy
from ._common import is_htmx, page


@login_required
@require_GET
def tuning(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk)
    start = starting_point(session)
    ctx = {"nav": "session", "tab": "tuning", "session": session, "forms": initial_forms(session, start),
           "compare": False, "current_label": start.label, "policy_row": start.row}
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
