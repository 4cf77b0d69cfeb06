"""python manage.py load_demo: a demo project with an API key, a login and sessions.

Idempotent. Imports ../shared/corpus/*.json when that folder exists (else the bundled
sample in dashboard/fixtures/), skipping sessions already imported. The API key and
the login are kept in DATA_DIR (demo_credentials.json, mode 600) so a restart prints the
same ones; delete that file to get new ones. ``--wait-for-worker N`` waits up to N seconds
for a worker's heartbeat before importing, so the compactions the import queues go to it
(``make run`` starts the worker first) instead of waiting for one in this process."""
from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from dashboard.models import ProjectRole
from dashboard.services.keys import authenticate, create_api_key, get_or_create_project
from dashboard.services.projects import set_member
from dashboard.services.workers import live_workers

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def default_corpus() -> Path:
    return Path(settings.BASE_DIR).parent / "shared" / "corpus"


class Command(BaseCommand):
    help = "Create the demo project, API key and login, and import demo sessions."

    def add_arguments(self, parser):
        parser.add_argument("--project", default="demo")
        parser.add_argument("--username", default="demo")
        parser.add_argument("--corpus", default=None, help="Folder of session files (default ../shared/corpus).")
        parser.add_argument("--no-import", action="store_true")
        parser.add_argument("--no-compact", action="store_true", help="Do not queue auto compactions on import.")
        parser.add_argument("--wait-for-worker", type=float, default=0.0, metavar="SECONDS",
                            help="Before importing, wait up to this long for a live worker.")
        parser.add_argument("--no-credentials", action="store_true",
                            help="Do not print the project, API key and login at the end.")

    def handle(self, *args, **opts):
        project, _ = get_or_create_project(opts["project"])
        creds_path = Path(settings.DATA_DIR) / "demo_credentials.json"
        creds = {}
        if creds_path.exists():
            try:
                creds = json.loads(creds_path.read_text(encoding="utf-8"))
            except ValueError:
                creds = {}
        key = creds.get("api_key")
        owner = authenticate(key) if key else None
        if owner is None or owner.pk != project.pk:
            _row, key = create_api_key(project, "demo")
        password = creds.get("password") or secrets.token_urlsafe(12)
        User = get_user_model()
        user, _ = User.objects.get_or_create(username=opts["username"], defaults={"email": ""})
        user.is_staff = user.is_superuser = True
        if not user.check_password(password):
            user.set_password(password)
        user.save()
        set_member(project, user, ProjectRole.OWNER)
        creds_path.write_text(json.dumps({"project": project.name, "api_key": key, "username": user.username,
                                          "password": password}), encoding="utf-8")
        creds_path.chmod(0o600)

        if not opts["no_import"]:
            if opts["wait_for_worker"] > 0:
                self._wait_for_worker(opts["wait_for_worker"])
            corpus = Path(opts["corpus"]) if opts["corpus"] else default_corpus()
            files = sorted(corpus.glob("*.json")) if corpus.is_dir() else []
            if not files:
                files = sorted(FIXTURES.glob("*.json"))
                self.stdout.write(f"No corpus at {corpus}; importing the bundled sample.")
            args = [str(f) for f in files] + ["--project", project.name, "--skip-existing"]
            if opts["no_compact"]:
                args.append("--no-compact")
            call_command("import_sessions", *args, stdout=self.stdout, stderr=self.stderr)

        if opts["no_credentials"]:
            return
        self.stdout.write("")
        self.stdout.write(f"Project:  {project.name}")
        self.stdout.write(f"API key:  {key}")
        self.stdout.write(f"Login:    {user.username} / {password}   (sign in at / on the web server)")
        self.stdout.write(f"(kept in {creds_path})")

    def _wait_for_worker(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not live_workers():
            if time.monotonic() >= deadline:
                self.stderr.write(f"No worker is live after {seconds:g} s; importing all the same.")
                return
            time.sleep(0.25)
