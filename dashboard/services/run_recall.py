"""Needed-context recall, kept on the run once it can be known.

A run's recall (``selectors.run_lookahead``) is judged against the first assistant message
recorded after the run's snapshot, so it is fixed as soon as that message exists. It is
computed once and kept in ``CompactionRun.result["recall"]`` (figures only, not the list of
missing identifiers), off the append path: when the session's next run commits (by then the
agent has answered) and when the run's page computes it anyway. The overview reads the kept
figures; a run the agent has not answered after yet is simply not measured."""
from __future__ import annotations

import logging
from typing import Any

from ..models import CompactionRun, RunStatus
from ..selectors.run_lookahead import run_lookahead, run_position

log = logging.getLogger(__name__)

KEPT = ("at", "needed", "kept", "recall")
#: Earlier runs of the session measured at each commit (the newest unmeasured first).
EARLIER_RUNS = 3


def keep(run: CompactionRun, figures: dict[str, Any] | None) -> bool:
    """Store ``figures`` (run_lookahead's answer) on the run, unless there is nothing to
    judge yet or the run has them already. Whether they were stored."""
    result = run.result if isinstance(run.result, dict) else {}
    if not figures or figures.get("at") is None or "recall" in result:
        return False
    result = {**result, "recall": {k: figures.get(k) for k in KEPT}}
    CompactionRun.objects.filter(pk=run.pk).update(result=result)
    run.result = result
    return True


def measure_earlier_runs(session_id: int, before_run_id: int, limit: int = EARLIER_RUNS) -> int:
    """Measure up to ``limit`` succeeded runs of the session older than ``before_run_id``
    that have no recall yet; how many were measured."""
    done = 0
    runs = (CompactionRun.objects.filter(session_id=session_id, status=RunStatus.SUCCEEDED, pk__lt=before_run_id)
            .order_by("-pk").only("pk", "session_id", "ledger", "summary", "result")[:limit * 4])
    for run in runs:
        if done >= limit:
            break
        if isinstance(run.result, dict) and "recall" in run.result:
            continue
        if keep(run, run_lookahead(run, run_position(run))):
            done += 1
    return done


def measure_quietly(session_id: int, before_run_id: int) -> None:
    """``measure_earlier_runs`` after a commit: a failure is logged, never raised (the run
    that triggered it has succeeded already)."""
    try:
        measure_earlier_runs(session_id, before_run_id)
    except Exception:  # noqa: BLE001 - a measurement must not turn a committed run into an error
        log.exception("needed-context recall of earlier runs of session %s not measured", session_id)
