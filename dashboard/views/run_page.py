"""Run page: live status, ledger, summary, the prompt used, model, attempts, retention and
tokens by category before and after."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from ..selectors.pages import (attempt_rows, category_rows, ledger_summary, load_run, run_badge, run_position)
from ..selectors.runs import run_events
from ._common import int_param, page

LEDGER_PAGE = 200


@login_required
@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = load_run(pk)
    ledger = run.ledger or []
    offset = int_param(request, "ledger_offset", 0, 0, max(0, len(ledger) - 1))
    fate = request.GET.get("fate", "")
    rows = [r for r in ledger if r.get("fate") == fate] if fate else ledger
    retention = run.retention or {}
    ctx = {
        "nav": "session", "run": run, "session": run.session, "badge": run_badge(run),
        "ledger_rows": rows[offset: offset + LEDGER_PAGE], "ledger_total": len(rows), "ledger_offset": offset,
        "ledger_end": min(len(rows), offset + LEDGER_PAGE),
        "ledger_next": offset + LEDGER_PAGE if offset + LEDGER_PAGE < len(rows) else None,
        "ledger_prev": max(0, offset - LEDGER_PAGE) if offset > 0 else None, "fate": fate,
        "fates": ledger_summary(ledger), "categories": category_rows(run.tokens_before, run.tokens_after),
        "attempts": attempt_rows(run.attempts), "events": run_events(run), "position": run_position(run),
        "retention": retention, "referenced": retention.get("referenced") or {}, "all_ids": retention.get("all") or {},
        "missing": retention.get("missing") or [],
        "by_kind": sorted(((k, v) for k, v in (retention.get("by_kind") or {}).items()
                           if (v.get("referenced") or {}).get("total") or (v.get("all") or {}).get("total")),
                          key=lambda kv: kv[0]),
        "result": run.result or {},
    }
    return page(request, "pages/run.html", ctx, project=run.project)
