"""Sessions uploaded from the dashboard: files and pasted text, in any import format."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from compaction.formats import FORMATS, ImportedSession

from ..models import Project, Session
from . import ServiceError
from .sessions import convert_file_payload, import_session


@dataclass
class UploadResult:
    created: list[Session] = field(default_factory=list)
    #: What was wrong, naming the file and the line or index; nothing is imported then.
    errors: list[str] = field(default_factory=list)
    #: The status of a refused upload: 413 when a session is over IMPORT_MAX_MESSAGES, else 400.
    status: int = 400


def import_uploads(project: Project | None, payloads: list[tuple[str, bytes]], *, format: str | None = None,
                   title: str = "") -> UploadResult:
    """Import every session of every ``(name, bytes)`` payload, all or nothing. ``title``
    names the session when the upload holds exactly one."""
    out = UploadResult()
    if format is not None and format not in FORMATS:
        out.errors.append(f"Unknown format {format!r}.")
    if project is None:
        out.errors.append("Create a project first.")
    if not payloads and not out.errors:
        out.errors.append("Choose one or more files, or paste a session.")
    if out.errors or project is None:
        return out
    converted: list[tuple[str, ImportedSession]] = []
    for name, data in payloads:
        try:
            converted.extend((name, s) for s in convert_file_payload(data, format=format, source=name))
        except ServiceError as exc:
            out.errors.append(str(exc))
            if exc.status == 413:
                out.status = 413
    if out.errors:
        return out
    try:
        with transaction.atomic():
            for name, imported in converted:
                if title and len(converted) == 1:
                    imported.title = title
                out.created.append(import_session(project, imported, source=name).session)
    except ServiceError as exc:
        out.errors.append(str(exc))
        out.created = []
        if exc.status == 413:
            out.status = 413
    return out
