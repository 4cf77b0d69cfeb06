"""Policies CRUD, the project's active policy, presets."""
from __future__ import annotations

from typing import Annotated

from ninja import Router
from ninja.params import functions as param

from compaction import PRESETS, get_preset, locales
from compaction.hooks import KINDS, list_hooks

from ..selectors import policies as sel
from ..services import policies as service
from . import convert
from .errors import ERROR_CODES
from .schemas import (
    MAX_ID,
    ActivePolicyIn,
    ActivePolicyOut,
    Error,
    HooksOut,
    PolicyCheckIn,
    PolicyCheckOut,
    PolicyIn,
    PolicyOut,
    PolicyPage,
    PolicyUpdateIn,
    PolicyVersionOut,
    PresetOut,
)

router = Router(tags=["policies"])
ERR = {code: Error for code in ERROR_CODES}
PolicyId = Annotated[int, param.Path(ge=1, le=MAX_ID, description="Policy id.")]
Cursor = Annotated[str | None, param.Query(None, max_length=200, description="next_cursor of the previous page.")]
Limit = Annotated[int | None, param.Query(None, ge=1, le=500, description="Page size (default 50).")]


def _active_id(request) -> int | None:
    return sel.get_project(request.auth.pk).active_policy_id


@router.get("/policies", response={200: PolicyPage, **ERR}, summary="List policies")
def list_policies(request, cursor: Cursor = None, limit: Limit = None):
    items, nxt = sel.list_policies(request.auth.pk, cursor, limit)
    active = _active_id(request)
    return {"items": [convert.policy_out(p, active) for p in items], "next_cursor": nxt}


@router.post("/policies", response={201: PolicyOut, **ERR}, summary="Create a policy")
def create_policy(request, body: PolicyIn):
    """From a whole policy object or a preset, plus dotted overrides. Invalid settings give
    422 naming the field."""
    engine = service.build_policy(body.policy, body.preset, body.overrides)
    project = sel.get_project(request.auth.pk)
    row = service.create_policy(project, body.name, engine, body.description, activate=body.activate)
    return 201, convert.policy_out(row, _active_id(request))


@router.post("/policies/validate", response={200: PolicyCheckOut, **ERR}, summary="Validate a policy")
def validate_policy(request, body: PolicyCheckIn):
    """Check settings without saving them: 422 naming the field when invalid, else the full
    policy and its warnings (thresholds the overflow guard will pre-empt)."""
    engine = service.build_policy(body.policy, body.preset, body.overrides)
    return {"valid": True, "policy": engine.to_json(), "warnings": engine.warnings()}


@router.get("/policies/{policy_id}", response={200: PolicyOut, **ERR}, summary="A policy")
def get_policy(request, policy_id: PolicyId):
    return convert.policy_out(sel.get_policy(request.auth.pk, policy_id), _active_id(request))


@router.put("/policies/{policy_id}", response={200: PolicyOut, **ERR}, summary="Update a policy (new version)")
def update_policy(request, policy_id: PolicyId, body: PolicyUpdateIn):
    row = sel.get_policy(request.auth.pk, policy_id)
    engine = None
    if body.policy is not None or body.preset:
        engine = service.build_policy(body.policy, body.preset, body.overrides)
    elif body.overrides:
        engine = service.build_policy(row.data, None, body.overrides)
    row = service.update_policy(row, engine_policy=engine, name=body.name, description=body.description)
    return convert.policy_out(row, _active_id(request))


@router.delete("/policies/{policy_id}", response={204: None, **ERR}, summary="Delete a policy")
def delete_policy(request, policy_id: PolicyId):
    """409 while it is the project's active policy. Sessions that used it as an override
    follow the project's active policy again; past runs keep their snapshot."""
    service.delete_policy(sel.get_policy(request.auth.pk, policy_id))
    return 204, None


@router.get("/policies/{policy_id}/versions", response={200: list[PolicyVersionOut], **ERR},
            summary="Every version of a policy")
def policy_versions(request, policy_id: PolicyId):
    row = sel.get_policy(request.auth.pk, policy_id)
    return [{"version": v.version, "policy": v.data, "created_at": v.created_at} for v in sel.list_versions(row)]


def _active_out(request) -> dict:
    project = sel.get_project(request.auth.pk)
    engine, row = service.project_policy(project)
    return {"project": project.name, "policy": convert.policy_out(row, row.pk) if row is not None else None,
            "effective": engine.to_json(), "source": "policy" if row is not None else "default"}


@router.get("/project/policy", response={200: ActivePolicyOut, **ERR}, summary="The project's active policy")
def get_active_policy(request):
    return _active_out(request)


@router.put("/project/policy", response={200: ActivePolicyOut, **ERR}, summary="Set the project's active policy")
def put_active_policy(request, body: ActivePolicyIn):
    project = sel.get_project(request.auth.pk)
    row = sel.get_policy(project.pk, body.policy_id) if body.policy_id is not None else None
    service.activate_policy(project, row)
    return _active_out(request)


@router.get("/presets", response={200: list[PresetOut], **ERR}, summary="Built-in policy presets")
def presets(request):
    out = []
    for name in PRESETS:
        p = get_preset(name)
        out.append({"name": name, "description": p.description, "policy": p.to_json()})
    return out


@router.get("/hooks", response={200: HooksOut, **ERR}, summary="Registered hooks and languages")
def hooks(request):
    """What a policy's `hooks` section may name (by kind) and the languages `language` accepts.
    Hooks are Python callables registered with `compaction.hooks.register_hook`; a policy
    naming an unregistered one is refused with 422 naming the field."""

    return {"kinds": list(KINDS), "hooks": list_hooks(),
            "languages": [{"code": c, "name": locales.display_name(c)} for c in locales.available()]}
