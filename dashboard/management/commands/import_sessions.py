"""python manage.py import_sessions --project NAME PATH...

Imports session files (OpenAI chat JSON, one session or a list; OpenAI JSONL; Anthropic
Messages; Claude Code JSONL) with a progress bar. Each file is atomic: an invalid file
writes nothing and the error names the file, the line or index, and the fault. With
--all-or-nothing every file is imported in one transaction."""
from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from compaction.formats import FORMATS
from dashboard.services import ServiceError
from dashboard.services.keys import get_or_create_project
from dashboard.services.sessions import convert_file_payload, import_session


class Command(BaseCommand):
    help = "Import agent sessions from files into a project."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", help="Files or directories (*.json, *.jsonl).")
        parser.add_argument("--project", default="demo", help="Project name (created if needed). Default: demo.")
        parser.add_argument("--format", choices=FORMATS, default=None, help="Input format (default: detected).")
        parser.add_argument("--no-compact", action="store_true", help="Do not check the trigger / queue runs.")
        parser.add_argument("--all-or-nothing", action="store_true", help="One transaction for every file.")
        parser.add_argument("--skip-existing", action="store_true",
                            help="Skip sessions whose external_id already exists instead of failing.")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args, **opts):
        files = self._files(opts["paths"])
        if not files:
            raise CommandError("no session files found")
        project, _ = get_or_create_project(opts["project"])
        bar = None
        if not opts["no_progress"]:
            show = sys.stderr.isatty() or opts["verbosity"] >= 2
            try:
                from tqdm import tqdm  # noqa: PLC0415  (installed with litellm's openai client)
            except ImportError:
                bar = _Plain(len(files), self.stderr) if show else None
            else:
                bar = tqdm(total=len(files), unit="file", file=sys.stderr, dynamic_ncols=True, disable=not show)
        imported = skipped = 0
        failures: list[str] = []
        outer = transaction.atomic() if opts["all_or_nothing"] else _Null()
        try:
            with outer:
                for path in files:
                    if bar is not None:
                        bar.set_postfix_str(path.name[-40:])
                    try:
                        sessions = convert_file_payload(path.read_bytes(), format=opts["format"], source=str(path))
                        with transaction.atomic():
                            for imp in sessions:
                                if opts["skip_existing"] and imp.external_id and project.sessions.filter(
                                        external_id=imp.external_id).exists():
                                    skipped += 1
                                    continue
                                result = import_session(project, imp, auto_compact=not opts["no_compact"],
                                                        source=str(path))
                                imported += 1
                                if opts["verbosity"] >= 2:
                                    self.stdout.write(f"{path}: session {result.session.pk} "
                                                      f"({result.session.message_count} messages)")
                    except (ServiceError, OSError) as exc:
                        msg = str(exc) if str(path) in str(exc) else f"{path}: {exc}"
                        if opts["all_or_nothing"]:
                            raise CommandError(f"{msg}\nnothing was imported") from None
                        failures.append(msg)
                    if bar is not None:
                        bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        for msg in failures:
            self.stderr.write(self.style.ERROR(msg))
        self.stdout.write(f"Imported {imported} session(s) into project {project.name!r}"
                          + (f", skipped {skipped} existing" if skipped else "")
                          + (f", {len(failures)} file(s) failed" if failures else "") + ".")
        if failures:
            raise CommandError(f"{len(failures)} file(s) could not be imported (nothing written for them)")

    @staticmethod
    def _files(paths: list[str]) -> list[Path]:
        out: list[Path] = []
        for p in map(Path, paths):
            if p.is_dir():
                out.extend(sorted(x for x in p.iterdir() if x.suffix in (".json", ".jsonl") and x.is_file()))
            elif p.is_file():
                out.append(p)
            else:
                raise CommandError(f"{p}: no such file or directory")
        return out


class _Plain:
    """Progress lines for when tqdm is not installed."""

    def __init__(self, total: int, out):
        self.total, self.n, self.out = total, 0, out

    def set_postfix_str(self, text: str) -> None:
        self.name = text

    def update(self, k: int) -> None:
        self.n += k
        self.out.write(f"{self.n}/{self.total} file(s) {getattr(self, 'name', '')}")

    def close(self) -> None:
        pass


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
