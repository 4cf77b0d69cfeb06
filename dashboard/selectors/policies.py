from __future__ import annotations

from typing import Any

from compaction.errors import PolicyError
from compaction.policy import Policy

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


def policy_warnings(data: dict[str, Any]) -> list[str]:
    """What a stored policy's settings cannot do at its window (thresholds the overflow guard
    pre-empts). A stored policy that no longer loads is reported as such, not raised."""
    try:
        return Policy.load(data).warnings()
    except PolicyError as exc:
        return [f"this stored policy no longer validates: {exc}"]
