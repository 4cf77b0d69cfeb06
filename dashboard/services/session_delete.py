"""Deleting sessions of a project, several at once (the sessions list's bulk action).

All or nothing: every id is checked first (it exists in the project, no run of it is
queued or running, since a worker would then commit into a deleted session), then every
session goes in one transaction, with its messages, live context, runs, events and
archive entries (their foreign keys cascade).
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from ..models import CompactionRun, Project, RunStatus, Session, StoredArchiveEntry
from . import Conflict, Invalid, NotFound

#: Sessions one request may delete (a page of the list is 25).
MAX_DELETE = 200


@dataclass(frozen=True)
class DeletePlan:
    """What a delete would remove, shown on the confirm step."""

    sessions: list[Session]
    runs: int
    archive_entries: int


def parse_ids(values: list[str]) -> list[int]:
    """Session ids from a form's checkboxes; refuses anything that is not an id."""
    bad = [v for v in values if not v.isdigit()]
    if bad:
        raise Invalid(f"not a session id: {bad[0][:30]!r}")
    ids = sorted({int(v) for v in values})
    if not ids:
        raise Invalid("no session selected: tick the sessions to delete")
    if len(ids) > MAX_DELETE:
        raise Invalid(f"{len(ids)} sessions selected; delete at most {MAX_DELETE} at once")
    return ids


def plan_delete(project: Project, ids: list[int]) -> DeletePlan:
    """The sessions ``ids`` of ``project`` and what deleting them removes; raises NotFound
    naming ids that are not sessions of the project, Conflict for sessions with a run in
    progress."""
    sessions = list(Session.objects.filter(project=project, pk__in=ids).order_by("id")
                    .only("id", "title", "external_id", "message_count", "active_run_id"))
    missing = sorted(set(ids) - {s.pk for s in sessions})
    if missing:
        raise NotFound(f"no session {', '.join(f'#{m}' for m in missing)} in project {project.name}")
    busy = sorted(set(CompactionRun.objects.filter(session_id__in=ids, status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
                      .values_list("session_id", flat=True)) | {s.pk for s in sessions if s.active_run_id})
    if busy:
        raise Conflict(f"session {', '.join(f'#{b}' for b in busy)} has a compaction queued or running; "
                       "delete it once the run has finished")
    return DeletePlan(sessions=sessions, runs=CompactionRun.objects.filter(session_id__in=ids).count(),
                      archive_entries=StoredArchiveEntry.objects.filter(session_id__in=ids).count())


def delete_sessions(project: Project, ids: list[int]) -> int:
    """Delete the sessions ``ids`` of ``project`` with everything stored about them, in
    one transaction after the same checks as :func:`plan_delete`, taken under the sessions'
    row locks so no run is claimed in between. Returns how many sessions went."""
    with transaction.atomic():
        list(Session.objects.select_for_update().filter(project=project, pk__in=ids).order_by("id").values_list("id"))
        plan = plan_delete(project, ids)
        Session.objects.filter(pk__in=[s.pk for s in plan.sessions]).delete()
    return len(plan.sessions)
