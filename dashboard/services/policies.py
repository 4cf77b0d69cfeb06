"""Policies: versioned compaction settings, one active per project, per-session override."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from django.conf import settings
from django.db import IntegrityError, transaction

from compaction import Policy, PolicyError, get_preset
from compaction.hooks import resolve as resolve_hooks

from ..models import PolicyVersion, Project, Session, StoredPolicy
from . import Conflict, Invalid, connections


def policy_invalid(exc: PolicyError) -> Invalid:
    """422 whose detail names the field, e.g. {"detail": "trigger.fraction: ...", "field": ...}."""
    err = Invalid(str(exc))
    err.field = exc.field  # type: ignore[attr-defined]
    return err


def check_hooks(policy: Policy) -> Policy:
    """Every hook the policy names is registered (compaction.hooks); else PolicyError naming
    the field (``hooks.pre_summary.0``...). Policies are JSON and hooks are code, so a name is
    checked against this process's registry when the policy is saved or a run requested."""
    resolve_hooks(policy.hooks)
    return policy


def check_policy(policy: Policy) -> Policy:
    """Everything a policy or overrides sent by a client must pass: its hooks are registered
    and it uses only what the operator's model connections allow (no server address, key
    variable or routing parameter of its own). PolicyError names the field."""
    return connections.check_client_policy(check_hooks(policy))


def runnable_policy(policy: Policy) -> Policy:
    """``policy`` with its model connection resolved, ready for the engine (simulate);
    a policy that may not run gives 422 naming the field."""
    try:
        return connections.resolve(policy)
    except PolicyError as exc:
        raise policy_invalid(exc) from None


def build_policy(policy: dict | None = None, preset: str | None = None,
                 overrides: dict[str, Any] | None = None) -> Policy:
    """A validated engine policy from a full dict, or a preset, plus dotted overrides."""
    try:
        if preset:
            if policy:
                raise PolicyError("give either a policy object or a preset name, not both", field="preset")
            base = get_preset(preset)
        else:
            base = Policy.load(policy or {})
        if overrides:
            base = base.with_overrides(overrides)
        return check_policy(base)
    except PolicyError as exc:
        raise policy_invalid(exc) from None


def default_policy() -> Policy:
    """The policy of a project with no active policy (settings.COMPACTION_DEFAULT_POLICY)."""
    value = settings.COMPACTION_DEFAULT_POLICY
    if not value:
        return get_preset("default")
    if value.startswith("{"):
        return Policy.load(json.loads(value))
    path = Path(value)
    if path.suffix == ".json" and path.is_file():
        return Policy.load(json.loads(path.read_text(encoding="utf-8")))
    return get_preset(value)


def apply_service_defaults(policy: Policy, session: Session | None = None) -> Policy:
    """Fill what a stored policy leaves open: the agent's model from the session (sets the
    tokenizer and window) and the default summarizer from the settings (the operator's
    ``default`` connection, when the policy names neither a model nor a connection)."""
    overrides: dict[str, Any] = {}
    if policy.model is None and session is not None and session.model:
        overrides["model"] = session.model
    s = policy.summarizer
    if s.use_agent_model:
        overrides.update(_agent_summarizer(policy, overrides.get("model") or policy.model))
    if (s.model is None and "summarizer.model" not in overrides and s.connection is None
            and settings.COMPACTION_SUMMARIZER_MODEL):
        overrides["summarizer.model"] = settings.COMPACTION_SUMMARIZER_MODEL
        overrides["summarizer.connection"] = connections.DEFAULT_NAME
    return policy.with_overrides(overrides) if overrides else policy


def _agent_summarizer(policy: Policy, agent_model: str | None) -> dict[str, Any]:
    """``use_agent_model`` in the service: the session's (or policy's) model summarizes when an
    operator connection allows it. A model named inside a message never does (a client would
    choose the server's network peer), so the engine's fallback to it is switched off."""
    overrides: dict[str, Any] = {"summarizer.use_agent_model": False}
    s = policy.summarizer
    if s.model is None and s.connection is None and agent_model:
        conn = next((c for c in connections.registry().values() if c.allows(agent_model)), None)
        if conn is not None:
            overrides["summarizer.model"] = agent_model
            overrides["summarizer.connection"] = conn.name
    return overrides


def stored_policy_for(session: Session, project: Project | None = None) -> StoredPolicy | None:
    if session.policy_id:
        return session.policy
    project = project or session.project
    return project.active_policy if project.active_policy_id else None


def effective_policy(session: Session) -> tuple[Policy, StoredPolicy | None]:
    """(engine policy, stored row it came from or None for the default)."""
    row = stored_policy_for(session)
    base = Policy.load(row.data) if row is not None else default_policy()
    return apply_service_defaults(base, session), row


def project_policy(project: Project) -> tuple[Policy, StoredPolicy | None]:
    """The policy new sessions of a project get (before session defaults)."""
    row = project.active_policy if project.active_policy_id else None
    base = Policy.load(row.data) if row is not None else default_policy()
    return apply_service_defaults(base), row


#: Where a policy saved from the tuning page applies.
SaveTarget = Literal["project", "session"]


# -- CRUD ------------------------------------------------------------------------------

@transaction.atomic
def create_policy(project: Project, name: str, engine_policy: Policy, description: str = "",
                  activate: bool = False) -> StoredPolicy:
    data = engine_policy.to_json()
    try:
        with transaction.atomic():
            row = StoredPolicy.objects.create(project=project, name=name, description=description or engine_policy.description,
                                        data=data, version=1)
    except IntegrityError:
        raise Conflict(f"a policy named {name!r} already exists in this project") from None
    PolicyVersion.objects.create(policy=row, version=1, data=data)
    if activate:
        activate_policy(project, row)
    return row


@transaction.atomic
def update_policy(row: StoredPolicy, *, engine_policy: Policy | None = None, name: str | None = None,
                  description: str | None = None) -> StoredPolicy:
    row = StoredPolicy.objects.select_for_update().get(pk=row.pk)
    changed = False
    if name is not None and name != row.name:
        if StoredPolicy.objects.filter(project_id=row.project_id, name=name).exclude(pk=row.pk).exists():
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
def delete_policy(row: StoredPolicy) -> None:
    project = Project.objects.select_for_update().get(pk=row.project_id)
    if project.active_policy_id == row.pk:
        raise Conflict("this is the project's active policy; activate another one (or none) before deleting it")
    row.delete()


@transaction.atomic
def activate_policy(project: Project, row: StoredPolicy | None) -> Project:
    project = Project.objects.select_for_update().get(pk=project.pk)
    project.active_policy = row
    project.save(update_fields=["active_policy"])
    return project


@transaction.atomic
def set_session_policy(session: Session, row: StoredPolicy | None) -> Session:
    Session.objects.filter(pk=session.pk).update(policy=row)
    session.policy = row
    return session


@transaction.atomic
def save_tuned_policy(session: Session, name: str, engine_policy: Policy, target: SaveTarget) -> StoredPolicy:
    """Save a policy tuned on a session's page under ``name`` (a new version when the
    project already has a policy of that name), then make it the project's active policy
    (``target="project"``) or this session's policy (``target="session"``). Raises
    PolicyError for an invalid name, ServiceError when the store refuses."""
    policy = engine_policy.with_overrides({"name": name})
    row = StoredPolicy.objects.filter(project_id=session.project_id, name=name).first()
    if row is None:
        row = create_policy(session.project, name, policy, description=policy.description)
    else:
        row = update_policy(row, engine_policy=policy)
    if target == "session":
        set_session_policy(session, row)
    else:
        activate_policy(session.project, row)
    return row
