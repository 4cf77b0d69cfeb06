"""Project memberships outside the pages: the data migration that gives existing projects
their owners, and `manage.py add_member`."""
from __future__ import annotations

import importlib
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command

from dashboard.models import ProjectMembership
from dashboard.services.keys import get_or_create_project

migration = importlib.import_module("dashboard.migrations.0014_project_memberships")


def test_projects_without_members_get_every_superuser_as_owner(db, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="x")
    django_user_model.objects.create_user("staff", password="x", is_staff=True)
    lonely, _ = get_or_create_project("lonely")
    kept, _ = get_or_create_project("kept")
    ann = django_user_model.objects.create_user("ann", password="x")
    ProjectMembership.objects.create(project=kept, user=ann, role="viewer")
    migration.superusers_own_projects_without_members(apps, None)
    assert list(ProjectMembership.objects.filter(project=lonely).values_list("user__username", "role")) == [
        ("root", "owner")]
    assert list(ProjectMembership.objects.filter(project=kept).values_list("user__username", flat=True)) == ["ann"]
    assert root.is_superuser


def test_add_member_sets_changes_and_removes_a_role(db, django_user_model):
    project, _ = get_or_create_project("acme")
    bob = django_user_model.objects.create_user("bob", password="x")
    out = StringIO()
    call_command("add_member", "--project", "acme", "--user", "bob", stdout=out)
    assert ProjectMembership.objects.get(project=project, user=bob).role == "viewer"
    call_command("add_member", "--project", "acme", "--user", "bob", "--role", "owner", stdout=out)
    assert ProjectMembership.objects.get(project=project, user=bob).role == "owner"
    call_command("add_member", "--project", "acme", "--user", "bob", "--remove", stdout=out)
    assert not ProjectMembership.objects.filter(project=project).exists()
    with pytest.raises(CommandError, match="no project named 'nope'"):
        call_command("add_member", "--project", "nope", "--user", "bob")
    with pytest.raises(CommandError, match="no user named 'eve'"):
        call_command("add_member", "--project", "acme", "--user", "eve")


def test_the_demo_login_points_to_the_dashboard_and_owns_the_demo_project(db, tmp_path, settings):
    settings.DATA_DIR = tmp_path
    out = StringIO()
    call_command("load_demo", "--no-import", stdout=out)
    assert "sign in at / on the web server" in out.getvalue() and "/admin/login/" not in out.getvalue()
    assert ProjectMembership.objects.get(project__name="demo", user__username="demo").role == "owner"
