"""python manage.py create_api_key --project NAME [--name LABEL]

Creates the project if needed and prints a new key. The key is shown once: only its
SHA-256 is stored."""
from django.core.management.base import BaseCommand

from dashboard.services.keys import create_api_key, get_or_create_project


class Command(BaseCommand):
    help = "Create an API key for a project (creating the project if needed) and print it."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project name.")
        parser.add_argument("--name", default="", help="A label for the key.")
        parser.add_argument("--quiet", action="store_true", help="Print only the key.")

    def handle(self, *args, **opts):
        project, created = get_or_create_project(opts["project"])
        _row, key = create_api_key(project, opts["name"])
        if opts["quiet"]:
            self.stdout.write(key)
            return
        if created:
            self.stdout.write(f"Created project {project.name!r}.")
        self.stdout.write(f"API key for project {project.name!r} (shown once, store it now):")
        self.stdout.write(key)
