"""Session page: token timeline, compactions, runs, force-summarize and the transcript."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from compaction import PRESETS

from ..models import RunStatus
from ..selectors.pages import (TRANSCRIPT_PAGE, load_session, message_at, page_start_for, session_runs, timeline,
                               transcript_page, trigger_text)
from ..services import ServiceError
from ..services.branches import load_store, retrieve_for, summaries_of
from ..services.policies import effective_policy
from ..services.sessions import check_trigger
from ._common import int_param, page


def branch_context(session, key: str | None) -> dict:
    """The branch summaries section: every stored key, and which one an agent asking for
    ``key`` is served (with the fallback used)."""
    data = summaries_of(session)
    try:
        served = retrieve_for(session, key, data)
        error = None
    except ServiceError as exc:
        served, error = retrieve_for(session, None, data), str(exc.detail)
    return {"branches": served, "branch_error": error, "summary_key": key or "",
            "branch_summaries": load_store(data)[0].all()}


def overview_context(session, summary_key: str | None = None) -> dict:
    """Stats, timeline, runs and branch summaries: everything the run-finished refresh redraws."""
    policy, row = effective_policy(session)
    runs = session_runs(session)
    pending = next((r for r in reversed(runs) if r.status in (RunStatus.QUEUED, RunStatus.RUNNING)), None)
    return {
        "session": session, "policy": policy, "policy_row": row, "runs": runs,
        "recent_runs": list(reversed(runs[-10:])), "pending": pending,
        "timeline": timeline(session, runs, policy), "trigger": check_trigger(session, policy),
        "trigger_text": trigger_text(policy.trigger), "compacted_runs": sum(1 for r in runs if r.badge),
        "branch_policy": policy.branches, **branch_context(session, summary_key),
    }


@login_required
@require_GET
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = load_session(pk)
    ctx = overview_context(session, request.GET.get("summary_key") or None)
    around = int_param(request, "around", None)
    start = page_start_for(around) if around is not None else int_param(request, "start", 0)
    ctx.update({"nav": "session", "tab": "overview", "page": transcript_page(session, ctx["runs"], start),
                "presets": list(PRESETS), "dir": ""})
    return page(request, "pages/session.html", ctx, project=session.project)


@login_required
@require_GET
def session_overview(request: HttpRequest, pk: int) -> HttpResponse:
    session = load_session(pk)
    return render(request, "pages/session.html#overview",
                  overview_context(session, request.GET.get("summary_key") or None))


@login_required
@require_GET
def transcript(request: HttpRequest, pk: int) -> HttpResponse:
    """A page of the transcript: ``around=N`` (the page holding message N), or ``start=N``
    with ``dir=next|prev`` for the "load more" buttons."""
    session = load_session(pk)
    around = int_param(request, "around", None)
    start = page_start_for(around) if around is not None else int_param(request, "start", 0)
    direction = request.GET.get("dir", "")
    runs = session_runs(session)
    tp = transcript_page(session, runs, start, TRANSCRIPT_PAGE)
    return render(request, "partials/transcript.html",
                  {"session": session, "page": tp, "dir": direction if direction in ("next", "prev") else ""})


@login_required
@require_GET
def message_full(request: HttpRequest, pk: int, position: int) -> HttpResponse:
    """One message's whole text (the transcript clips long ones)."""
    session = load_session(pk)
    m = message_at(session, position)
    return render(request, "partials/message_full.html", {"session": session, "m": m,
                                                          "part": request.GET.get("part", "text"),
                                                          "call": int_param(request, "call", 0)})
