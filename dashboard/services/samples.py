"""Sample sessions for an empty project: a few session files from the operator's
CORPUS_DIR (the smallest ones, so loading takes a moment), else the bundled sample.
Idempotent: a file whose session (by external id) is already in the project is skipped."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from ..models import Project
from .sessions import convert_file_payload, import_session

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass
class SampleResult:
    created: list[int] = field(default_factory=list)
    skipped: int = 0


def sample_files() -> list[Path]:
    """The files "load sample sessions" imports: the SAMPLE_SESSIONS smallest of CORPUS_DIR
    (size, then name: the same files every time), else the bundled fixtures."""
    corpus = Path(settings.CORPUS_DIR)
    files = sorted(corpus.glob("*.json")) if corpus.is_dir() else []
    if not files:
        return sorted(FIXTURES.glob("*.json"))
    return sorted(files, key=lambda p: (p.stat().st_size, p.name))[: max(1, settings.SAMPLE_SESSIONS)]


@transaction.atomic
def load_samples(project: Project) -> SampleResult:
    """Import the sample sessions into ``project`` (all or nothing; no compaction queued:
    the trigger is checked on the next append, and the page answers at once)."""
    out = SampleResult()
    for path in sample_files():
        for imported in convert_file_payload(path.read_bytes(), source=path.name):
            if imported.external_id and project.sessions.filter(external_id=imported.external_id).exists():
                out.skipped += 1
                continue
            out.created.append(import_session(project, imported, auto_compact=False, source=path.name).session.pk)
    return out
