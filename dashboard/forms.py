"""Forms of the dashboard pages.

The tuning page's policy form edits the settings people tune most, the trigger, and any
other setting as ``dotted.setting=value`` lines, on top of a starting policy (the session's
own or a preset). Policy A and policy B are the same form with prefixes ``a`` and ``b``.
Each error names the policy setting it is about (``cut.keep_messages: 'many' is not a
number``), as the engine's own validation errors do.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from compaction import PRESETS, get_preset, jsontext, locales
from compaction import policy as P
from compaction.hooks import list_hooks

from .selectors.triggers import TRIGGER_INFO, TRIGGER_KINDS, trigger_text
from .services.policies import SaveTarget, check_policy

#: The starting point meaning "this session's stored policy" rather than a preset.
CURRENT = "current"
#: The trigger choice that leaves the starting policy's trigger as it is.
KEEP = "keep"

def parse_overrides(text: str) -> dict[str, Any]:
    """``dotted.path=value`` lines (values read as JSON when they parse, else as text)
    into a dict of overrides. Raises ValueError naming the line."""
    out: dict[str, Any] = {}
    for n, line in enumerate((text or "").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise ValueError(f"line {n}: expected dotted.setting=value, got {line[:60]!r}")
        key, value = (part.strip() for part in line.split("=", 1))
        if not key:
            raise ValueError(f"line {n}: missing setting name before '='")
        try:
            out[key] = jsontext.loads(value)
        except ValueError:  # not JSON, NaN or Infinity, or nested too deep: the text itself
            out[key] = value
    return out


def describe(path: str) -> str:
    """The policy setting's own description (compaction.policy), shown under its input."""
    model: Any = P.Policy
    parts = path.split(".")
    try:
        for part in parts[:-1]:
            model = model.model_fields[part].annotation
        return str(model.model_fields[parts[-1]].description or "")
    except (KeyError, AttributeError):
        return ""


def _invalid_number(value: Any, whole: bool) -> ValidationError:
    text = str(value).strip()
    try:
        float(text)
    except ValueError:
        return ValidationError("%(value)r is not a number", code="invalid", params={"value": text})
    if whole:
        return ValidationError("%(value)r is not a whole number", code="invalid", params={"value": text})
    return ValidationError("%(value)r is not a number", code="invalid", params={"value": text})


NUMBER_ERRORS = {"required": "enter a number"}


class _QuotesWhatWasTyped(forms.Field):
    """A number field whose errors quote what was typed (Django's own message does not)."""

    whole = False

    def clean(self, value: Any) -> Any:
        try:
            return super().clean(value)
        except ValidationError as exc:
            if exc.code != "invalid":
                raise
            raise _invalid_number(value, whole=self.whole) from None


class WholeNumberField(_QuotesWhatWasTyped, forms.IntegerField):
    """An integer whose errors quote what was typed."""

    whole = True


class NumberField(_QuotesWhatWasTyped, forms.FloatField):
    """A number whose errors quote what was typed."""


class HookNamesField(forms.MultipleChoiceField):
    """Registered hook names, in order. A single list literal (``[]``, ``["a", "b"]``) is
    accepted too, for clients that post the list as one text field."""

    default_error_messages = {
        "invalid_choice": "no hook named %(value)r is registered",
        "invalid_list": "not a list of names",
    }

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, (list, tuple)) and len(value) == 1 and str(value[0]).strip().startswith("["):
            try:
                parsed = jsontext.loads(str(value[0]).replace("'", '"'))
            except ValueError:
                parsed = None
            if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
                raise ValidationError("%(value)r is not a list of names", code="invalid_list",
                                      params={"value": value[0]})
            value = parsed
        return [v.strip() for v in super().to_python(value) if v and v.strip()]


def language_choices() -> list[tuple[str, str]]:
    """'' (follow finalize.language / reduction.language) plus every locale file."""
    return [("", "as each section says (default: English)")] + [
        (code, f"{locales.display_name(code)} ({code})") for code in locales.available()]


def hook_choices(kind: str, none_label: str | None = None) -> Any:
    """Registered hooks of ``kind`` by name, read each time a form is built (the registry
    can change while the service runs)."""
    def choices() -> list[tuple[str, str]]:
        out = [("", none_label)] if none_label is not None else []
        return out + [(h["name"], f"{h['name']}: {h['description']}" if h["description"] else h["name"])
                      for h in list_hooks(kind)]
    return choices


#: Form field -> the policy setting it edits.
SETTINGS = {
    "model": "model",
    "context_window": "context_window",
    "reserved_output_tokens": "reserved_output_tokens",
    "keep_messages": "cut.keep_messages",
    "keep_fraction": "cut.keep_fraction",
    "user_turn": "cut.user_turn",
    "summarize": "summarize",
    "max_summary_words": "summarizer.max_summary_words",
    "summarizer_model": "summarizer.model",
    "injection": "finalize.injection",
    "preserve_user_messages": "finalize.preserve_user_messages",
    "reduction": "reduction.enabled",
    "language": "language",
    "pre_summary": "hooks.pre_summary",
    "post_summary": "hooks.post_summary",
    "input_builder": "hooks.input_builder",
    "tool_call_formatter": "hooks.tool_call_formatter",
    "tool_result_formatter": "hooks.tool_result_formatter",
    "hooks_abort": "hooks.abort_on_error",
}
#: The groups the policy form is laid out in, each a collapsed section of the page: its key,
#: its heading and the inputs it holds. The advanced group also holds the dotted lines.
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("trigger", "Trigger", ("trigger_kind", "trigger_value", "model", "context_window", "reserved_output_tokens")),
    ("reduction", "Reduction", ("reduction",)),
    ("summary", "Summary and kept tail", ("summarize", "keep_messages", "keep_fraction", "user_turn",
                                          "max_summary_words", "summarizer_model")),
    ("injection", "Injection", ("injection", "preserve_user_messages", "language")),
    ("advanced", "Advanced", ("pre_summary", "post_summary", "input_builder", "tool_call_formatter",
                              "tool_result_formatter", "hooks_abort", "advanced")),
)
#: Settings whose empty choice means "none" (stored as null).
OPTIONAL_CHOICES = ("language", "input_builder", "tool_call_formatter", "tool_result_formatter")


def _help(name: str) -> str:
    return describe(SETTINGS[name])


def _dotted(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def comparable(value: Any) -> str:
    """A form value as a text two values can be compared by, the same way the page's script
    compares what is typed with the active policy: numbers by value ("8" and "8.0" agree),
    lists as JSON, booleans as true/false, None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return json.dumps([str(v) for v in value], separators=(",", ":"), ensure_ascii=False)
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    # written as JavaScript's String(Number(text)) writes it
    return str(int(number)) if number.is_integer() and abs(number) < 1e21 else repr(number)


def starting_policy(preset: str, current: P.Policy) -> P.Policy:
    """The policy a side starts from: ``current`` (the session's) or a preset."""
    return get_preset(preset) if preset in PRESETS else current


def initial_values(policy: P.Policy, preset: str) -> dict[str, Any]:
    """The form's values for ``policy`` loaded from ``preset``."""
    data = policy.to_json()
    values: dict[str, Any] = {name: _dotted(data, path) for name, path in SETTINGS.items()}
    for name in OPTIONAL_CHOICES:
        if values[name] is None:
            values[name] = ""
    trig = data.get("trigger") or {}
    if trig.get("kind") in TRIGGER_INFO:
        values["trigger_kind"] = trig["kind"]
        values["trigger_value"] = trig.get(TRIGGER_INFO[trig["kind"]][0])
    else:
        values["trigger_kind"], values["trigger_value"] = KEEP, None
    return {**values, "preset": preset, "loaded": preset, "advanced": ""}


@dataclass(frozen=True)
class FieldRow:
    """One input of a group, and whether it differs from the session's active policy."""

    field: forms.BoundField
    changed: bool


@dataclass(frozen=True)
class FieldGroup:
    """One collapsed section of the policy form."""

    key: str
    title: str
    rows: list[FieldRow]
    errors: bool

    @property
    def changed(self) -> int:
        return sum(1 for row in self.rows if row.changed)

    @property
    def open(self) -> bool:
        """The trigger (what the sweep and the recommendation are about) is always open; any
        other group opens when it holds an error or a setting that differs from the active
        policy, so nothing that matters is hidden."""
        return self.key == "trigger" or self.errors or self.changed > 0


class PolicyForm(forms.Form):
    use_required_attribute = False  # the server names the setting in error; the browser must not block the preview

    preset = forms.ChoiceField(label="Start from")
    loaded = forms.CharField(widget=forms.HiddenInput, required=False)
    trigger_kind = forms.ChoiceField(label="Trigger fires on")
    trigger_value = NumberField(label="Threshold", required=False, error_messages=NUMBER_ERRORS)

    model = forms.CharField(label="Agent model", required=False, empty_value=None, help_text=_help("model"))
    context_window = WholeNumberField(label="Context window (tokens)", required=False,
                                      help_text=_help("context_window"))
    reserved_output_tokens = WholeNumberField(label="Reserved for output (tokens)", error_messages=NUMBER_ERRORS,
                                              help_text=_help("reserved_output_tokens"))
    keep_messages = WholeNumberField(label="Kept tail: at most N messages", error_messages=NUMBER_ERRORS,
                                     help_text=_help("keep_messages"))
    keep_fraction = NumberField(label="Kept tail: at most this share of the window", error_messages=NUMBER_ERRORS,
                                help_text=_help("keep_fraction"))
    user_turn = forms.ChoiceField(label="Kept tail starts at a user turn", help_text=_help("user_turn"),
                                  choices=[("prefer", "prefer"), ("require", "require"), ("ignore", "ignore")])
    summarize = forms.BooleanField(label="Summarize when the trigger fires", required=False,
                                   help_text=_help("summarize"))
    max_summary_words = WholeNumberField(label="Summary word budget", error_messages=NUMBER_ERRORS,
                                         help_text=_help("max_summary_words"))
    summarizer_model = forms.CharField(label="Summarizer model (cost estimate)", required=False, empty_value=None,
                                       help_text=_help("summarizer_model"))
    injection = forms.ChoiceField(label="Summary goes into", help_text=_help("injection"),
                                  choices=[("user", "a user turn"), ("system", "the system message"),
                                           ("first_user", "the first kept user message")])
    preserve_user_messages = forms.BooleanField(label="Re-insert recent user messages", required=False,
                                                help_text=_help("preserve_user_messages"))
    reduction = forms.BooleanField(label="Reduce tool output first (no LLM)", required=False,
                                   help_text=_help("reduction"))
    language = forms.ChoiceField(label="Language of the texts written into the context", required=False,
                                 choices=language_choices, help_text=_help("language"))
    pre_summary = HookNamesField(label="Pre-summary hooks (rewrite the summarizer's input, in order)",
                                 required=False, choices=hook_choices("pre_summary"), help_text=_help("pre_summary"))
    post_summary = HookNamesField(label="Post-summary hooks (rewrite the summary, in order)", required=False,
                                  choices=hook_choices("post_summary"), help_text=_help("post_summary"))
    input_builder = forms.ChoiceField(label="Summarizer input builder", required=False,
                                      choices=hook_choices("input_builder", "built in (system + prompt)"),
                                      help_text=_help("input_builder"))
    tool_call_formatter = forms.ChoiceField(label="Tool calls in the summarizer input", required=False,
                                            choices=hook_choices("tool_call_formatter", "default line"),
                                            help_text=_help("tool_call_formatter"))
    tool_result_formatter = forms.ChoiceField(label="Tool results in the summarizer input", required=False,
                                              choices=hook_choices("tool_result_formatter",
                                                                   "default (clipped to fit)"),
                                              help_text=_help("tool_result_formatter"))
    hooks_abort = forms.BooleanField(label="A failing hook aborts the run", required=False,
                                     help_text=_help("hooks_abort"))

    advanced = forms.CharField(label="Any other setting", required=False, strip=False,
                               widget=forms.Textarea(attrs={"rows": 3, "placeholder":
                                                            "cut.search=backward\npin_first_user_message=true"}))

    def __init__(self, data: Any = None, *, prefix: str, current: P.Policy, current_label: str,
                 session_model: str = "", preset: str = CURRENT) -> None:
        """``current`` is the session's stored policy (the "current" starting point). A bound
        form starts from the preset it posts; an unbound one from ``preset``."""
        if data is not None:
            posted = data.get(f"{prefix}-preset") or CURRENT
            preset = posted if posted in PRESETS else CURRENT
        self.base = starting_policy(preset, current)
        self.trigger_desc = trigger_text(self.base.trigger)
        initial = initial_values(self.base, preset) if data is None else None
        super().__init__(data, prefix=prefix, initial=initial, auto_id="%s")
        self.side = prefix
        presets, kinds = self.fields["preset"], self.fields["trigger_kind"]
        assert isinstance(presets, forms.ChoiceField) and isinstance(kinds, forms.ChoiceField)
        presets.choices = [(CURRENT, f"this session's policy ({current_label})")] + [
            (p, f"preset: {p}") for p in PRESETS]
        keep = [(KEEP, f"as in the preset: {self.trigger_desc}")] if self["trigger_kind"].value() == KEEP else []
        kinds.choices = keep + [(k, label) for k, label, _key, _cast in TRIGGER_KINDS]
        self._decorate(session_model)
        active = initial_values(current, CURRENT)
        #: Each grouped input's value in the session's active policy, as ``comparable`` writes it.
        self.active_values = {name: "" if name == "advanced" else comparable(active.get(name))
                              for _key, _title, names in GROUPS for name in names}
        self._mark_changed()

    def differs(self, name: str) -> bool:
        """Whether the input shows a value other than the active policy's (any dotted line
        in the advanced box counts: it overrides something)."""
        value = self[name].value()
        if name == "advanced":
            return any(line.strip() and not line.strip().startswith("#") for line in str(value or "").splitlines())
        return comparable(value) != self.active_values[name]

    def _mark_changed(self) -> None:
        """The active value on every grouped input (the page's script compares what is typed
        with it) and the ``changed`` class on those that differ now."""
        for name, active in self.active_values.items():
            attrs = self.fields[name].widget.attrs
            attrs["data-active"] = active
            classes = [c for c in str(attrs.get("class", "")).split() if c != "changed"]
            if self.differs(name):
                classes.append("changed")
            if classes:
                attrs["class"] = " ".join(classes)
            else:
                attrs.pop("class", None)

    def groups(self) -> list[FieldGroup]:
        """The inputs in their groups, in page order."""
        return [FieldGroup(key, title, [FieldRow(self[name], self.differs(name)) for name in names],
                           errors=self.is_bound and any(self.errors.get(name) for name in names))
                for key, title, names in GROUPS]

    def _decorate(self, session_model: str) -> None:
        """Ids, test ids, help links and placeholders of the inputs."""
        placeholders = {"model": f"the session's: {session_model or 'unknown'}",
                        "context_window": "from the model table", "summarizer_model": "offline extractive"}
        for name, field in self.fields.items():
            attrs = field.widget.attrs
            html_name = self.add_prefix(name)
            attrs["data-testid"] = html_name
            if name in SETTINGS:
                attrs["aria-describedby"] = f"{html_name}-help"
            if isinstance(field.widget, forms.CheckboxInput):
                attrs["role"] = "switch"
            elif isinstance(field.widget, forms.NumberInput):
                attrs["min"] = "0"
            elif isinstance(field.widget, forms.SelectMultiple):
                attrs["size"] = str(len(list(field.widget.choices)) or 1)
            if name in placeholders:
                attrs["placeholder"] = placeholders[name]
        self.fields["preset"].widget.attrs["aria-describedby"] = f"{self.side}-preset-help"
        self.fields["trigger_value"].widget.attrs.update({
            "step": "any", "data-testid": f"{self.side}-threshold", "aria-describedby": f"{self.side}-trigger-help"})

    def setting_fields(self) -> list[forms.BoundField]:
        """The inputs of the policy settings, in order (the template lays them out)."""
        return [self[name] for name in SETTINGS]

    def clean_advanced(self) -> dict[str, Any]:
        try:
            return parse_overrides(self.cleaned_data.get("advanced") or "")
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        kind = data.get("trigger_kind")
        if kind in TRIGGER_INFO:
            key, cast = TRIGGER_INFO[kind]
            value = data.get("trigger_value")
            if value is None:
                if "trigger_value" not in self.errors:
                    self.add_error("trigger_value", "enter a number")
            elif cast is int and not float(value).is_integer():
                self.add_error("trigger_value", f"{self.data.get(self.add_prefix('trigger_value'))!r} "
                                                "is not a whole number")
            else:
                data["trigger"] = {"kind": kind, key: cast(value)}
        return data

    def setting_of(self, name: str) -> str:
        """The policy setting an input edits, as errors name it."""
        if name == "trigger_value":
            kind = self.data.get(self.add_prefix("trigger_kind"))
            return f"trigger.{TRIGGER_INFO[kind][0]}" if kind in TRIGGER_INFO else "trigger"
        return SETTINGS.get(name, name)

    def problems(self) -> list[str]:
        """Every error as ``setting: message``."""
        return [f"{self.setting_of(name)}: {message}" for name, messages in self.errors.items()
                for message in messages]

    def policy(self) -> P.Policy:
        """The policy the form describes: the starting policy with the form's settings, the
        trigger and the dotted lines applied. Call after ``is_valid()``; raises PolicyError
        naming the setting the engine refused."""
        if not self.is_bound:
            return self.base
        data = self.cleaned_data
        overrides: dict[str, Any] = {path: data[name] for name, path in SETTINGS.items()}
        for name in OPTIONAL_CHOICES:
            overrides[SETTINGS[name]] = data[name] or None
        if "trigger" in data:
            overrides["trigger"] = data["trigger"]
        overrides.update(data["advanced"])
        policy = check_policy(self.base.with_overrides(overrides))
        self.trigger_desc = trigger_text(policy.trigger)
        return policy


def side_form(data: Any, side: str, *, current: P.Policy, current_label: str,
              session_model: str = "") -> tuple[PolicyForm, bool]:
    """The form of one side of a posted tuning page, and whether it was reset: a preset
    chosen in the select but not loaded yet gives a fresh form filled from that preset."""
    posted = data.get(f"{side}-preset") or CURRENT
    preset = posted if posted in PRESETS else CURRENT
    if data.get(f"{side}-loaded") != posted:
        return PolicyForm(prefix=side, current=current, current_label=current_label, session_model=session_model,
                          preset=preset), True
    return PolicyForm(data, prefix=side, current=current, current_label=current_label,
                      session_model=session_model), False


class SavePolicyForm(forms.Form):
    """Name a tuned policy and choose where it applies."""

    name = forms.CharField(max_length=200, error_messages={"required": "Give the policy a name."})
    target = forms.CharField(required=False)
    save_side = forms.CharField(required=False)

    def clean_name(self) -> str:
        return str(self.cleaned_data["name"]).strip()

    def clean_target(self) -> SaveTarget:
        return "session" if self.cleaned_data.get("target") == "session" else "project"

    def clean_save_side(self) -> str:
        return "b" if self.cleaned_data.get("save_side") == "b" else "a"
