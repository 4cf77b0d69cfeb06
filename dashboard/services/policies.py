"""Policies: versioned compaction settings, one active per project, per-session override."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from compaction import Policy as EnginePolicy
from compaction import PolicyError, get_preset

from ..models import Policy, PolicyVersion, Project, Session
from . import Conflict, Invalid


def policy_invalid(exc: PolicyError) -> Invalid:
    """422 whose detail names the field, e.g. {"detail": "trigger.fraction: ...", "field": ...}."""
    err = Invalid(str(exc))
    err.field = exc.field  # type: ignore[attr-defined]
    return err


def check_hooks(policy: EnginePolicy) -> EnginePolicy:
    """Every hook the policy names is registered (compaction.hooks); else PolicyError naming
    the field (``hooks.pre_summary.0``...). Policies are JSON and hooks are code, so a name is
    checked against this process's registry when the policy is saved or a run requested."""
    from compaction.hooks import resolve  # noqa: PLC0415

    resolve(policy.hooks)
    return policy


def build_policy(policy: dict | None = None, preset: str | None = None,
                 overrides: dict[str, Any] | None = None) -> EnginePolicy:
    """A validated engine policy from a full dict, or a preset, plus dotted overrides."""
    try:
        if preset:
            if policy:
                raise PolicyError("give either a policy object or a preset name, not both", field="preset")
            base = get_preset(preset)
        else:
            base = EnginePolicy.load(policy or {})
        if overrides:
            base = base.with_overrides(overrides)
        return check_hooks(base)
    except PolicyError as exc:
        raise policy_invalid(exc) from None


def default_policy() -> EnginePolicy:
    """The policy of a project with no active policy (settings.COMPACTION_DEFAULT_POLICY)."""
    value = settings.COMPACTION_DEFAULT_POLICY
    if not value:
        return get_preset("default")
    if value.startswith("{"):
        return EnginePolicy.load(json.loads(value))
    path = Path(value)
    if path.suffix == ".json" and path.is_file():
        return EnginePolicy.load(json.loads(path.read_text(encoding="utf-8")))
    return get_preset(value)


def apply_service_defaults(policy: EnginePolicy, session: Session | None = None) -> EnginePolicy:
    """Fill what a stored policy leaves open: the agent's model from the session (sets the
    tokenizer and window) and the default summarizer from the settings."""
    overrides: dict[str, Any] = {}
    if policy.model is None and session is not None and session.model:
        overrides["model"] = session.model
    if policy.summarizer.model is None and settings.COMPACTION_SUMMARIZER_MODEL:
        overrides["summarizer.model"] = settings.COMPACTION_SUMMARIZER_MODEL
        if policy.summarizer.api_base is None and settings.COMPACTION_SUMMARIZER_API_BASE:
            overrides["summarizer.api_base"] = settings.COMPACTION_SUMMARIZER_API_BASE
        if policy.summarizer.api_key_env is None and settings.COMPACTION_SUMMARIZER_API_KEY_ENV:
            overrides["summarizer.api_key_env"] = settings.COMPACTION_SUMMARIZER_API_KEY_ENV
    return policy.with_overrides(overrides) if overrides else policy


def stored_policy_for(session: Session, project: Project | None = None) -> Policy | None:
    if session.policy_id:
        return session.policy
    project = project or session.project
    return project.active_policy if project.active_policy_id else None


def effective_policy(session: Session) -> tuple[EnginePolicy, Policy | None]:
    """(engine policy, stored row it came from or None for the default)."""
    row = stored_policy_for(session)
    base = EnginePolicy.load(row.data) if row is not None else default_policy()
    return apply_service_defaults(base, session), row


def project_policy(project: Project) -> tuple[EnginePolicy, Policy | None]:
    """The policy new sessions of a project get (before session defaults)."""
    row = project.active_policy if project.active_policy_id else None
    base = EnginePolicy.load(row.data) if row is not None else default_policy()
    return apply_service_defaults(base), row


# -- CRUD ------------------------------------------------------------------------------

@transaction.atomic
def create_policy(project: Project, name: str, engine_policy: EnginePolicy, description: str = "",
                  activate: bool = False) -> Policy:
    data = engine_policy.to_json()
    try:
        with transaction.atomic():
            row = Policy.objects.create(project=project, name=name, description=description or engine_policy.description,
                                        data=data, version=1)
    except IntegrityError:
        raise Conflict(f"a policy named {name!r} already exists in this project") from None
    PolicyVersion.objects.create(policy=row, version=1, data=data)
    if activate:
        activate_policy(project, row)
    return row


@transaction.atomic
def update_policy(row: Policy, *, engine_policy: EnginePolicy | None = None, name: str | None = None,
                  description: str | None = None) -> Policy:
    row = Policy.objects.select_for_update().get(pk=row.pk)
    changed = False
    if name is not None and name != row.name:
        if Policy.objects.filter(project_id=row.project_id, name=name).exclude(pk=row.pk).exists():
            raise Conflict(f"a policy named {name!r} already exists in this project")
        row.name = name
        changed = True
    if description is not None and description != row.description:
        row.description = description
        changed = True
    if engine_policy is not None:
        data = engine_policy.to_json()
        if data != row.data:
            row.data = data
            row.version += 1
            PolicyVersion.objects.create(policy=row, version=row.version, data=data)
            changed = True
    if changed:
        row.save()
    return row


@transaction.atomic
def delete_policy(row: Policy) -> None:
    project = Project.objects.select_for_update().get(pk=row.project_id)
    if project.active_policy_id == row.pk:
        raise Conflict("this is the project's active policy; activate another one (or none) before deleting it")
    row.delete()


@transaction.atomic
def activate_policy(project: Project, row: Policy | None) -> Project:
    project = Project.objects.select_for_update().get(pk=project.pk)
    project.active_policy = row
    project.save(update_fields=["active_policy"])
    return project


@transaction.atomic
def set_session_policy(session: Session, row: Policy | None) -> Session:
    Session.objects.filter(pk=session.pk).update(policy=row)
    session.policy = row
    return session
