"""python manage.py add_member --project NAME --user USERNAME [--role owner|viewer] [--remove]

Gives a user a role in a project (or changes it, or with --remove takes it away). Members
see only their projects on the dashboard; owners may also force, save tuned policies,
upload, delete and manage API keys."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dashboard.models import Project, ProjectRole
from dashboard.services import ServiceError
from dashboard.services.projects import remove_member, set_member


class Command(BaseCommand):
    help = "Add a user to a project as owner or viewer (or change or remove their role)."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project name.")
        parser.add_argument("--user", required=True, help="Username.")
        parser.add_argument("--role", choices=ProjectRole.values, default=ProjectRole.VIEWER)
        parser.add_argument("--remove", action="store_true", help="Take the user out of the project.")

    def handle(self, *args, **opts):
        project = Project.objects.filter(name=opts["project"]).first()
        if project is None:
            raise CommandError(f"no project named {opts['project']!r}")
        user = get_user_model().objects.filter(username=opts["user"]).first()
        if user is None:
            raise CommandError(f"no user named {opts['user']!r} (create one with: python manage.py createsuperuser, "
                               f"or in Django admin)")
        if opts["remove"]:
            removed = remove_member(project, user)
            self.stdout.write(f"{user.username} {'removed from' if removed else 'was not a member of'} {project.name}.")
            return
        try:
            set_member(project, user, opts["role"])
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{user.username} is now {opts['role']} of {project.name}.")
