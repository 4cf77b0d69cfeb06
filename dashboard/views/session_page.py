"""Session page: token timeline, compactions, runs, force-summarize and the transcript."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from compaction import PRESETS

from ..selectors.access import session_for
from ..selectors.gateway_calls import calls_cost, calls_page
from ..selectors.gateway_sessions import forks_of, gateway_row, identity_of
from ..selectors.session_page import (
    message_at,
    message_part,
    overview_context,
    page_start_for,
    session_runs,
    text_page,
    transcript_page,
)
from ._common import int_param, page


def _transcript_start(request: HttpRequest) -> int:
    """``around=N`` opens the page holding message N, else ``start=N``."""
    around = int_param(request, "around", None)
    return page_start_for(around) if around is not None else int_param(request, "start", 0)


@login_required
@require_GET
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk)
    ctx = overview_context(session, request.GET.get("summary_key") or None)
    ctx.update({"nav": "session", "tab": "overview", "presets": list(PRESETS), "dir": "",
                "page": transcript_page(session, ctx["runs"], _transcript_start(request))})
    gw = gateway_row(session)
    if gw is not None:
        ctx.update(gateway=identity_of(gw, session), forks=forks_of(session))
    ctx["calls_cost"] = calls_cost(session)
    if ctx["calls_cost"] is not None:
        ctx["calls"] = calls_page(session, int_param(request, "calls_before", None))
    return page(request, "pages/session.html", ctx, project=session.project)


@login_required
@require_GET
def session_overview(request: HttpRequest, pk: int) -> HttpResponse:
    session = session_for(request.user, pk)
    return render(request, "pages/session.html#overview",
                  overview_context(session, request.GET.get("summary_key") or None))


@login_required
@require_GET
def transcript(request: HttpRequest, pk: int) -> HttpResponse:
    """A page of the transcript: ``around=N`` (the page holding message N), or ``start=N``
    with ``dir=next|prev`` for the "load more" buttons."""
    session = session_for(request.user, pk)
    direction = request.GET.get("dir", "")
    tp = transcript_page(session, session_runs(session), _transcript_start(request))
    return render(request, "partials/transcript.html",
                  {"session": session, "page": tp, "dir": direction if direction in ("next", "prev") else ""})


@login_required
@require_GET
def message_full(request: HttpRequest, pk: int, position: int) -> HttpResponse:
    """One message's whole text (the transcript clips long ones). A text over
    MESSAGE_PAGE_CHARS is shown a page at a time, and ``?download=1`` sends it whole as a
    text file, so no page carries megabytes of HTML."""
    session = session_for(request.user, pk)
    m = message_at(session, position)
    part, call = request.GET.get("part", "text"), int_param(request, "call", 0)
    shown = message_part(m, part, call)
    if request.GET.get("download"):
        response = HttpResponse(shown.text, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="session-{session.pk}-{position}-{shown.label}.txt"'
        return response
    return render(request, "partials/message_full.html",
                  {"session": session, "m": m, "part": part, "call": call, "shown": shown,
                   "page": text_page(shown.text, int_param(request, "offset", 0), settings.MESSAGE_PAGE_CHARS)})
