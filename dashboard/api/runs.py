"""Runs: poll one run (status, progress, ledger, summary, events, error)."""
from __future__ import annotations

from typing import Annotated

from ninja import Router
from ninja.params import functions as param

from ..selectors import runs as sel
from . import convert
from .errors import ERROR_CODES
from .schemas import MAX_ID, Error, RunDetailOut

router = Router(tags=["runs"])
ERR = {code: Error for code in ERROR_CODES}
RunId = Annotated[int, param.Path(ge=1, le=MAX_ID, description="Run id.")]


@router.get("/runs/{run_id}", response={200: RunDetailOut, **ERR}, summary="A compaction run")
def get_run(request, run_id: RunId):
    """Status (queued, running, succeeded, failed, skipped), progress (step, attempt),
    tokens before/after per category, ledger, summary, prompt, attempts, events and error."""
    run = sel.get_run(request.auth.pk, run_id)
    return convert.run_detail_out(run, sel.run_events(run), request)
