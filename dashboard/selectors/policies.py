from __future__ import annotations

from ..models import PolicyVersion, Project, StoredPolicy
from ..services import NotFound
from .pagination import paginate


def get_policy(project_id: int, policy_id: int) -> StoredPolicy:
    row = StoredPolicy.objects.filter(project_id=project_id, pk=policy_id).first()
    if row is None:
        raise NotFound(f"policy {policy_id} not found")
    return row


def list_policies(project_id: int, cursor: str | None = None, limit: int | None = None):
    return paginate(StoredPolicy.objects.filter(project_id=project_id), cursor, limit, key="id")


def list_versions(policy: StoredPolicy) -> list[PolicyVersion]:
    return list(PolicyVersion.objects.filter(policy=policy).order_by("version"))


def get_project(project_id: int) -> Project:
    return Project.objects.select_related("active_policy").get(pk=project_id)
