"""Tuning: a preset picker and a policy form; every change re-simulates the stored session
(debounced htmx POST) and redraws where compactions would fire, LLM calls, peak and final
context, tokens saved, estimated cost and retention. A second policy can be compared side by
side. The policy can be saved as the project's policy or applied to this session.

Previews use the offline extractive summarizer (no model is called; summary sizes are
the offline summarizer's); cost is estimated at litellm's prices for the chosen models.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from compaction import PRESETS, CompactionError, PolicyError, get_preset
from compaction import policy as P

from ..models import Policy
from ..selectors.pages import load_session, session_raws, simulate_policy, simulation_chart, trigger_text
from ..services import ServiceError
from ..services.policies import (activate_policy, apply_service_defaults, create_policy, default_policy,
                                 set_session_policy, stored_policy_for, update_policy)
from ._common import page, parse_overrides

log = logging.getLogger("dashboard.pages")

CURRENT = "current"
SIDES = ("a", "b")


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    kind: str  # int | int_opt | float | text_opt | bool | select | select_opt | multi
    path: str
    choices: Any = ()  # ((value, label), ...) or a callable returning them (registries read at request time)

    @property
    def help(self) -> str:
        return describe(self.path)

    @property
    def options(self) -> tuple:
        return tuple(self.choices() if callable(self.choices) else self.choices)


def language_choices() -> tuple:
    """'' (follow finalize.language / reduction.language) plus every locale file."""
    from compaction import locales  # noqa: PLC0415

    return (("", "as each section says (default: English)"),) + tuple(
        (code, f"{locales.display_name(code)} ({code})") for code in locales.available())


def hook_choices(kind: str, none_label: str | None = None):
    """Registered hooks of ``kind`` by name (compaction.hooks.list_hooks), read per request."""
    def choices() -> tuple:
        from compaction.hooks import list_hooks  # noqa: PLC0415

        out = ((("", none_label),) if none_label is not None else ())
        return out + tuple((h["name"], f"{h['name']}: {h['description']}" if h["description"] else h["name"])
                           for h in list_hooks(kind))
    return choices


FIELDS = (
    Field("model", "Agent model", "text_opt", "model"),
    Field("context_window", "Context window (tokens)", "int_opt", "context_window"),
    Field("reserved_output_tokens", "Reserved for output (tokens)", "int", "reserved_output_tokens"),
    Field("keep_messages", "Kept tail: at most N messages", "int", "cut.keep_messages"),
    Field("keep_fraction", "Kept tail: at most this share of the window", "float", "cut.keep_fraction"),
    Field("user_turn", "Kept tail starts at a user turn", "select", "cut.user_turn",
          (("prefer", "prefer"), ("require", "require"), ("ignore", "ignore"))),
    Field("summarize", "Summarize when the trigger fires", "bool", "summarize"),
    Field("max_summary_words", "Summary word budget", "int", "summarizer.max_summary_words"),
    Field("summarizer_model", "Summarizer model (cost estimate)", "text_opt", "summarizer.model"),
    Field("injection", "Summary goes into", "select", "finalize.injection",
          (("user", "a user turn"), ("system", "the system message"))),
    Field("preserve_user_messages", "Re-insert recent user messages", "bool", "finalize.preserve_user_messages"),
    Field("reduction", "Reduce tool output first (no LLM)", "bool", "reduction.enabled"),
    # language of the engine's texts and hooks chosen among the registered names
    Field("language", "Language of the texts written into the context", "select_opt", "language", language_choices),
    Field("pre_summary", "Pre-summary hooks (rewrite the summarizer's input, in order)", "multi",
          "hooks.pre_summary", hook_choices("pre_summary")),
    Field("post_summary", "Post-summary hooks (rewrite the summary, in order)", "multi",
          "hooks.post_summary", hook_choices("post_summary")),
    Field("input_builder", "Summarizer input builder", "select_opt", "hooks.input_builder",
          hook_choices("input_builder", "built in (system + prompt)")),
    Field("tool_call_formatter", "Tool calls in the summarizer input", "select_opt", "hooks.tool_call_formatter",
          hook_choices("tool_call_formatter", "default line")),
    Field("tool_result_formatter", "Tool results in the summarizer input", "select_opt",
          "hooks.tool_result_formatter", hook_choices("tool_result_formatter", "default (clipped to fit)")),
    Field("hooks_abort", "A failing hook aborts the run", "bool", "hooks.abort_on_error"),
)

TRIGGER_KINDS = (
    ("tokens", "context tokens above", "threshold", int),
    ("window_fraction", "share of the usable window above", "fraction", float),
    ("messages", "messages above", "threshold", int),
    ("tokens_since_summary", "tokens since the last summary above", "threshold", int),
    ("window_fraction_since_summary", "window share since the last summary above", "fraction", float),
    ("messages_since_summary", "messages since the last summary above", "threshold", int),
)
TRIGGER_INFO = {k: (key, cast) for k, _label, key, cast in TRIGGER_KINDS}


def describe(path: str) -> str:
    """The policy field's own description (compaction.policy), shown under the input."""
    model: Any = P.Policy
    parts = path.split(".")
    try:
        for part in parts[:-1]:
            model = model.model_fields[part].annotation
        return model.model_fields[parts[-1]].description or ""
    except (KeyError, AttributeError):
        return ""


def dotted(data: dict, path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def base_policy(session, preset: str) -> P.Policy:
    """The policy a side starts from: this session's (stored, without service defaults) or a preset."""
    if preset == CURRENT or preset not in PRESETS:
        row = stored_policy_for(session)
        return P.Policy.load(row.data) if row is not None else default_policy()
    return get_preset(preset)


def form_values(policy: P.Policy) -> dict:
    data = policy.to_json()
    values = {f.name: dotted(data, f.path) for f in FIELDS}
    for f in FIELDS:
        if f.kind == "select_opt" and values[f.name] is None:
            values[f.name] = ""
    trig = data.get("trigger") or {}
    if trig.get("kind") in TRIGGER_INFO:
        values["trigger_kind"] = trig["kind"]
        values["trigger_value"] = trig.get(TRIGGER_INFO[trig["kind"]][0])
    else:
        values["trigger_kind"] = "keep"
        values["trigger_value"] = ""
    values["trigger_desc"] = trigger_text(policy.trigger)
    values["advanced"] = ""
    return values


class FormError(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def _number(raw: str, cast, field: str, optional: bool = False):
    raw = (raw or "").strip()
    if raw == "":
        if optional:
            return None
        raise FormError(field, "enter a number")
    try:
        value = float(raw)
    except ValueError:
        raise FormError(field, f"{raw!r} is not a number") from None
    if cast is int:
        if not value.is_integer():
            raise FormError(field, f"{raw!r} is not a whole number")
        return int(value)
    return value


def _multi(posted: list[str], field: str) -> list[str]:
    """Values of a multiple select; a single list literal (``[]``, ``["a", "b"]``) is accepted too,
    for clients that post the list as one text field."""
    if len(posted) == 1 and posted[0].strip().startswith("["):
        try:
            parsed = json.loads(posted[0].replace("'", '"'))
        except ValueError:
            raise FormError(field, f"{posted[0]!r} is not a list of names") from None
        if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
            raise FormError(field, f"{posted[0]!r} is not a list of names")
        posted = parsed
    return [v.strip() for v in posted if v and v.strip()]


def policy_from_form(session, data: QueryDict, side: str) -> tuple[P.Policy, dict, bool]:
    """(policy, the form values to show, whether the preset changed). A changed preset
    resets the side's fields to the preset. Raises FormError / PolicyError."""
    preset = data.get(f"{side}-preset") or CURRENT
    base = base_policy(session, preset)
    if data.get(f"{side}-loaded") != preset:
        return base, form_values(base), True
    values: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    for f in FIELDS:
        raw = data.get(f"{side}-{f.name}", "")
        if f.kind == "multi":
            value = _multi(data.getlist(f"{side}-{f.name}"), f.path)
            known = dict(f.options)
            unknown = [v for v in value if v not in known]
            if unknown:
                raise FormError(f.path, f"no hook named {unknown[0]!r} is registered; choose among "
                                        f"{', '.join(known) or 'none'}")
            values[f.name] = value
            overrides[f.path] = value
            continue
        if f.kind == "select_opt":
            known = dict(f.options)
            if raw not in known:
                raise FormError(f.path, f"{raw!r} is not available; choose one of {', '.join(k for k in known if k)}")
            values[f.name] = raw
            overrides[f.path] = raw or None
            continue
        if f.kind == "bool":
            value = raw in ("1", "on", "true")
        elif f.kind in ("int", "int_opt"):
            value = _number(raw, int, f.path, optional=f.kind == "int_opt")
        elif f.kind == "float":
            value = _number(raw, float, f.path)
        elif f.kind == "text_opt":
            value = raw.strip() or None
        else:
            value = raw
            if f.options and value not in dict(f.options):
                raise FormError(f.path, f"choose one of {', '.join(dict(f.options))}")
        values[f.name] = value
        overrides[f.path] = value
    kind = data.get(f"{side}-trigger_kind", "keep")
    values["trigger_kind"], values["trigger_value"] = kind, data.get(f"{side}-trigger_value", "")
    if kind in TRIGGER_INFO:
        key, cast = TRIGGER_INFO[kind]
        overrides["trigger"] = {"kind": kind, key: _number(values["trigger_value"], cast, f"trigger.{key}")}
    values["advanced"] = data.get(f"{side}-advanced", "")
    try:
        overrides.update(parse_overrides(values["advanced"]))
    except ValueError as exc:
        raise FormError("advanced", str(exc)) from None
    policy = base.with_overrides(overrides)
    values["trigger_desc"] = trigger_text(policy.trigger)
    return policy, values, False


def _side_context(side: str, preset: str, values: dict) -> dict:
    return {"side": side, "preset": preset, "values": values, "fields": FIELDS, "trigger_kinds": TRIGGER_KINDS}


def _initial(session) -> dict:
    a = base_policy(session, CURRENT)
    b = get_preset("deepagents") if "deepagents" in PRESETS else a
    return {"a": _side_context("a", CURRENT, form_values(a)),
            "b": _side_context("b", "deepagents", form_values(b))}


def _policy_label(session, side_preset: str, side: str) -> str:
    if side_preset == CURRENT:
        row = stored_policy_for(session)
        name = row.name if row is not None else default_policy().name
        return f"{side.upper()}: {name}"
    return f"{side.upper()}: {side_preset}"


def _current_label(session) -> str:
    row = stored_policy_for(session)
    return row.name if row is not None else f"service default: {default_policy().name}"


@login_required
@require_GET
def tuning(request: HttpRequest, pk: int) -> HttpResponse:
    session = load_session(pk)
    ctx = {"nav": "session", "tab": "tuning", "session": session, "sides": _initial(session), "compare": False,
           "presets": list(PRESETS), "current_label": _current_label(session), "policy_row": stored_policy_for(session)}
    return page(request, "pages/tuning.html", ctx, project=session.project)


@login_required
@require_POST
def preview(request: HttpRequest, pk: int) -> HttpResponse:
    """Simulate the form's policies over the stored history. Always answers 200 with the
    preview (errors are shown in it), so htmx swaps it in."""
    session = load_session(pk)
    compare = request.POST.get("compare") in ("1", "on")
    sides, reports, errors, reset = {}, [], [], []
    raws = None
    for side in SIDES:
        if side == "b" and not compare:
            preset = request.POST.get("b-preset") or "deepagents"
            try:
                _pol, values, _changed = policy_from_form(session, request.POST, side)
            except (FormError, PolicyError):
                values = form_values(base_policy(session, preset))
            sides[side] = _side_context(side, preset, values)
            if request.POST.get("b-loaded") != preset:
                reset.append(side)
            continue
        preset = request.POST.get(f"{side}-preset") or CURRENT
        try:
            policy, values, changed = policy_from_form(session, request.POST, side)
        except (FormError, PolicyError) as exc:
            field = getattr(exc, "field", None)
            msg = str(exc)
            errors.append({"side": side.upper(), "field": field,
                           "message": msg if not field or msg.startswith(field) else f"{field}: {msg}"})
            posted = {k[len(side) + 1:]: v for k, v in request.POST.items() if k.startswith(f"{side}-")}
            sides[side] = _side_context(side, preset, {**form_values(base_policy(session, preset)), **posted})
            continue
        sides[side] = _side_context(side, preset, values)
        if changed:
            reset.append(side)
        if raws is None:
            raws = session_raws(session)
        effective = apply_service_defaults(policy, session)
        try:
            report = simulate_policy(session, raws, effective)
        except (CompactionError, PolicyError, ValueError) as exc:
            errors.append({"side": side.upper(), "field": None, "message": f"simulation failed: {exc}"})
            continue
        except Exception as exc:  # noqa: BLE001 - an engine fault must not take the page down
            log.exception("simulation of session %s failed", session.pk)
            errors.append({"side": side.upper(), "field": None,
                           "message": f"simulation failed: {type(exc).__name__}: {exc}"})
            continue
        report["label"] = _policy_label(session, preset, side)
        report["trigger_desc"] = values["trigger_desc"]
        reports.append(report)
    chart = simulation_chart([(r["label"], r) for r in reports]) if reports else {}
    ctx = {"session": session, "reports": reports, "errors": errors, "chart": chart, "sides": sides,
           "rows": compare_rows(reports) if reports else [],
           "reset": reset, "compare": compare, "presets": list(PRESETS), "current_label": _current_label(session)}
    if not getattr(request, "htmx", False):
        ctx.update({"nav": "session", "tab": "tuning", "policy_row": stored_policy_for(session),
                    "preview_inline": True})
        return page(request, "pages/tuning.html", ctx, project=session.project)
    return render(request, "pages/tuning.html#preview-response", ctx)


@login_required
@require_POST
def save(request: HttpRequest, pk: int) -> HttpResponse:
    """Save side A's policy (as edited) under a name, then make it the project's active
    policy (``target=project``) or this session's policy (``target=session``)."""
    session = load_session(pk)
    target = request.POST.get("target", "project")
    side = request.POST.get("save_side", "a") if request.POST.get("save_side") in SIDES else "a"
    name = request.POST.get("name", "").strip()[:200]
    error = ok = None
    row = None
    if not name:
        error = "Give the policy a name."
    else:
        try:
            policy, _values, _changed = policy_from_form(session, request.POST, side)
            policy = policy.with_overrides({"name": name})
            with transaction.atomic():
                row = Policy.objects.filter(project_id=session.project_id, name=name).first()
                if row is None:
                    row = create_policy(session.project, name, policy, description=policy.description)
                else:
                    row = update_policy(row, engine_policy=policy)
                if target == "session":
                    set_session_policy(session, row)
                    ok = f"Saved “{name}” (version {row.version}) and applied it to this session."
                else:
                    activate_policy(session.project, row)
                    ok = f"Saved “{name}” (version {row.version}) as the active policy of {session.project.name}."
        except (FormError, PolicyError, ServiceError) as exc:
            error = str(exc)
    return render(request, "pages/tuning.html#save-result", {"session": session, "save_error": error, "save_ok": ok})


def compare_rows(reports: list[dict]) -> list[dict]:
    """The preview table: one row per figure, one column per policy, plus "no compaction"."""
    from ..templatetags.studio import percent, thousands, usd  # noqa: PLC0415

    def row(label: str, cells: list, baseline: Any = "", key: str = "") -> dict:
        return {"label": label, "cells": cells, "baseline": baseline, "key": key}

    first = reports[0]
    rows = [
        row("Trigger", [r["trigger_desc"] for r in reports], "never"),
        row("Context window", [f"{thousands(r['window'])} ({r['window_source']})" for r in reports], ""),
        row("Compactions", [f"{len(r['compactions'])}" + (f" (+{len(r['failed_compactions'])} failed)"
                                                          if r["failed_compactions"] else "") for r in reports],
            "0", key="compactions"),
        row("Fire before messages", [", ".join(f"#{c['at']}" for c in r["compactions"][:15])
                                     + (" …" if len(r["compactions"]) > 15 else "") or "–" for r in reports], "–"),
        row("LLM calls (summaries)", [thousands(r["llm_calls"]) for r in reports], "0", key="llm_calls"),
        row("Model calls", [thousands(r["model_calls"]) for r in reports], thousands(first["model_calls"])),
        row("Peak context", [thousands(r["peak_context_tokens"]) for r in reports], thousands(first["baseline_peak"]),
            key="peak"),
        row("Final context", [thousands(r["final_context_tokens"]) for r in reports],
            thousands(first["baseline_final"]), key="final"),
        row("Calls over the window", [thousands(r["overflow_calls"]) for r in reports],
            thousands(sum(1 for v in first["baseline"] if v > first["window"]))),
        row("Input tokens sent (all calls)", [thousands(r["tokens_sent"]) for r in reports],
            thousands(first["tokens_sent_baseline"])),
        row("Tokens saved", [f"{thousands(r['tokens_saved'])} ({percent(r['tokens_saved'] / r['tokens_sent_baseline'] if r['tokens_sent_baseline'] else None)})"
                             for r in reports], "0", key="saved"),
        row("Estimated agent cost", [f"{usd(r['cost'])} at {r['price_model']}" if r["price"] else
                                     f"no price for {r['price_model'] or 'an unknown model'}" for r in reports],
            usd(first["cost_baseline"]) if first["price"] else "–", key="cost"),
        row("Estimated summary cost", [usd(r["summarizer_cost"]) if r["summarizer_cost"] is not None else
                                       f"no price for {r['summarizer_model']}" for r in reports], "$0"),
        row("Retention (referenced, mean)", [percent(r["retention_mean"]) for r in reports], "100%", key="retention"),
        row("Integrity", ["ok" if r["integrity"]["tool_pairs_ok"] and r["integrity"]["replay_exact"] else
                          "BROKEN: " + (r["integrity"].get("error") or "tool pairs") for r in reports], ""),
    ]
    return rows
