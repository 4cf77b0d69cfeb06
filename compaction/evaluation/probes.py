"""Summary probes: after each compaction, does the context sent next still answer the
questions an agent needs answered to carry on?

For every compaction that took original messages out of the context (a summary's evicted
span, or old rounds dropped by tailoring), probes are derived from those messages alone,
with parsing of this module's own (it never reads the summarizer's output or its parsing):

- ``file_edited``: each file the span's tool calls changed (editor commands other than
  ``view``, write/create/patch tools, and shell edits: ``sed -i``, redirections, ``tee``,
  ``mv``/``cp`` targets, ``rm``); the answer is the path.
- ``error_failing``: the errors the span's tool results showed that no later run of the same
  command in the span cleared; the answer is the exception or failed test's name. Test runners' summary lines ("1 failed in 0.18s") are results, not
  errors.
- ``user_request``: the last thing the user asked in the span (messages repeated more than
  twice in the session, such as a harness's format reminder, are not requests); held when
  most of its distinctive words are in the context.
- ``pending_action``: the span's last tool call, i.e. what the agent was doing when the
  span ends; the answer is its file path, else the head of its command.

A probe is *held* when the context sent at the next model call contains its answer (case
insensitive; any of its spellings). Everything is computed from the messages, in message
order, so a replay gives the same probes every time.
"""
from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import jsontext
from ..messages import iter_text
from ..retention import render_text

ProbeKind = Literal["file_edited", "error_failing", "user_request", "pending_action"]
PROBE_KINDS: tuple[ProbeKind, ...] = ("file_edited", "error_failing", "user_request", "pending_action")

#: At most this many probes of one kind per compaction (the most recent ones), so a span that
#: edited forty files does not outweigh every other question.
PER_KIND = 5
#: Share of a request's distinctive words the context must hold for the request to count as kept.
REQUEST_WORDS_HELD = 0.6
#: A user message seen more often than this in the session is harness boilerplate, not a request.
BOILERPLATE_REPEATS = 2

_EDITOR_READS = {"view", "read", "cat", "show", "list", "ls"}
_PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "target_file", "notebook_path")
_COMMAND_KEYS = ("command", "cmd", "script", "code", "input")
_SHELL_NAMES = re.compile(r"^(bash|sh|shell|zsh|terminal|run|run_command|execute_bash|execute_command|exec|"
                          r"run_shell_command|command|cmd|local_shell)$", re.IGNORECASE)
_WRITE_NAMES = re.compile(r"(write|edit|create|patch|replace|insert|append|multiedit|notebookedit)", re.IGNORECASE)
_READ_NAMES = re.compile(r"^(read|view|open|cat|ls|glob|grep|search|find|list)", re.IGNORECASE)
_PATCH_FILE = re.compile(r"^(?:\*\*\* (?:Update|Add|Delete) File: |\+\+\+ b/|\+\+\+ )(\S+)", re.MULTILINE)
_REDIRECT = re.compile(r"(?<![0-9&<>=-])>>?(?![=&])\s*([^\s;&|()<>]+)")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_EXCEPTION = re.compile(r"^(?:E\s+|\s*)(?:[\w.]+\.)?([A-Z]\w*(?:Error|Exception|Failure|Exit|Interrupt))(?::\s*(.*))?$",
                        re.MULTILINE)
_FAILED_TEST = re.compile(r"^(?:FAILED|ERROR)\s+(\S+?)(?:\s+-\s+.*)?$", re.MULTILINE)
_RUNNER_LINE = re.compile(r"^=+ .*\b(failed|passed|error)\b.* in [\d.]+s.*=+$", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]{3,}|\d[\d,.:/-]{2,}")
_STOP = frozenset("""this that with from have will your what when where which there their they them then than
into onto just also only some such very more most been being were does done make made like want need
please could would should about after before here these those over under again each other while""".split())


@dataclass(frozen=True)
class Probe:
    kind: ProbeKind
    answer: str
    #: lower-case strings, any of which in the context counts as the answer
    spellings: tuple[str, ...]
    #: for ``user_request``: the request's distinctive words (held by share, not by one string)
    words: tuple[str, ...] = ()

    def held_by(self, text: str) -> bool:
        if self.words:
            present = sum(1 for w in self.words if w in text)
            return present >= REQUEST_WORDS_HELD * len(self.words)
        return any(s in text for s in self.spellings)


@dataclass(frozen=True)
class ProbeResult:
    """The probes of one compaction and whether the next context held each."""

    at: int
    probes: list[tuple[Probe, bool]]

    @property
    def held(self) -> int:
        return sum(1 for _, ok in self.probes if ok)

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "held": self.held, "total": len(self.probes),
                "probes": [{"kind": p.kind, "answer": p.answer, "held": ok} for p, ok in self.probes]}


@dataclass
class ProbeReport:
    """Probes over a whole replay: per compaction, per kind and pooled."""

    compactions: list[ProbeResult] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(len(c.probes) for c in self.compactions)

    @property
    def held(self) -> int:
        return sum(c.held for c in self.compactions)

    @property
    def score(self) -> float | None:
        return round(self.held / self.total, 4) if self.total else None

    def by_kind(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {k: {"held": 0, "total": 0} for k in PROBE_KINDS}
        for c in self.compactions:
            for p, ok in c.probes:
                out[p.kind]["total"] += 1
                out[p.kind]["held"] += ok
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "held": self.held, "total": self.total, "by_kind": self.by_kind(),
                "compactions": [c.to_dict() for c in self.compactions]}


# -- reading tool calls ---------------------------------------------------------------------------

def _arguments(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    fn = call.get("function") or {}
    name = str(fn.get("name") or "")
    args = fn.get("arguments")
    parsed: Any = args
    if isinstance(args, str):
        try:
            parsed = jsontext.loads(args)
        except ValueError:  # not JSON (a raw command string), or nested too deep
            parsed = {"command": args}
    return name, parsed if isinstance(parsed, dict) else {}


def _first(args: dict[str, Any], keys: Iterable[str]) -> str | None:
    for k in keys:
        v = args.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def _plain_path(token: str) -> str | None:
    token = token.strip("'\"`")
    if not token or token.startswith(("-", "=")) or token in ("/dev/null", "&1", "&2") or token.startswith("/dev/"):
        return None
    if "$" in token or "*" in token or "{" in token:
        return None
    if "/" not in token and "." not in token:
        return None
    return token


def _split(command: str) -> list[str]:
    try:
        return shlex.split(command, posix=True)
    except ValueError:
        return command.split()


def shell_edits(command: str) -> list[str]:
    """Files a shell command writes, moves into, or deletes."""
    out: list[str] = []
    heredoc: str | None = None
    for line in command.splitlines():
        if heredoc is not None:
            # a here-document's body is data (often code with its own ">"), not commands
            if line.strip() == heredoc:
                heredoc = None
            continue
        opened = _HEREDOC.search(line)
        if opened is not None:
            heredoc = opened.group(1)
            line = line[:opened.start()] + line[opened.end():]
        if line.lstrip().startswith("#"):
            continue
        for piece in re.split(r"&&|\|\||;|\|", line):
            words = _split(piece)
            if not words:
                continue
            head = words[0]
            if head == "sed" and any(w.startswith("-i") for w in words[1:]):
                # the files are the trailing non-option words after the expression
                rest = [w for w in words[1:] if not w.startswith("-")]
                out += [p for w in rest[1:] if (p := _plain_path(w))]
            elif head == "tee":
                out += [p for w in words[1:] if (p := _plain_path(w))]
            elif head in ("mv", "cp") and len(words) >= 3:
                p = _plain_path(words[-1])
                if p:
                    out.append(p)
            elif head == "rm":
                out += [p for w in words[1:] if (p := _plain_path(w))]
            elif head == "patch" or (head == "git" and len(words) > 1 and words[1] in ("apply", "checkout")):
                out += [p for w in words[2:] if (p := _plain_path(w)) and not p.endswith((".patch", ".diff"))]
            for target in _REDIRECT.findall(piece):
                p = _plain_path(target)
                if p:
                    out.append(p)
    return out


def edited_files(call: dict[str, Any]) -> list[str]:
    """Files one tool call changed, by what the call did (its command), not what it is called."""
    name, args = _arguments(call)
    command = _first(args, _COMMAND_KEYS)
    path = _first(args, _PATH_KEYS)
    if _SHELL_NAMES.match(name) and command:
        return shell_edits(command)
    patch = _first(args, ("patch", "diff", "input")) if "patch" in name.lower() else None
    if patch:
        return _PATCH_FILE.findall(patch)
    if path is None:
        return []
    sub = args.get("command")
    if isinstance(sub, str) and sub.strip():
        return [] if sub.strip().lower() in _EDITOR_READS else [path]
    if _READ_NAMES.match(name) or not _WRITE_NAMES.search(name):
        return []
    return [path]


def path_spellings(path: str) -> tuple[str, ...]:
    """The path as written, and without a leading ``./`` or the first directories of an
    absolute path (a summary may name ``core/validators.py`` for ``/repo/core/validators.py``)."""
    low = path.lower().rstrip("/")
    parts = [p for p in low.split("/") if p and p != "."]
    out = {low}
    if len(parts) >= 2:
        out.add("/".join(parts[-2:]))
    elif parts:
        out.add(parts[-1])
    return tuple(sorted(out))


# -- errors ---------------------------------------------------------------------------------------

def errors_in(text: str) -> list[str]:
    """Exception names and failed test ids a tool result shows; runner summary lines are not errors."""
    found: list[str] = []
    for m in _EXCEPTION.finditer(text):
        found.append(m.group(1))
    for m in _FAILED_TEST.finditer(text):
        test = m.group(1).split("::")[-1]
        if not _RUNNER_LINE.match(m.group(0)):
            found.append(test)
    return list(dict.fromkeys(found))


def _command_key(call: dict[str, Any]) -> str:
    name, args = _arguments(call)
    return name + "\0" + (_first(args, _COMMAND_KEYS) or _first(args, _PATH_KEYS) or "")


def failing_errors(span: Sequence[dict[str, Any]]) -> list[str]:
    """Errors the span's tool results showed that no later run of the same command cleared
    (a clean result, or one without that error), oldest first."""
    calls: dict[str, str] = {}
    results: list[tuple[str, list[str]]] = []
    for raw in span:
        for call in raw.get("tool_calls") or []:
            if isinstance(call, dict):
                calls[str(call.get("id") or "")] = _command_key(call)
        if raw.get("role") == "tool":
            text = "\n".join(iter_text(raw.get("content")))
            results.append((calls.get(str(raw.get("tool_call_id") or ""), ""), errors_in(text)))
    failing: list[str] = []
    for index, (key, errors) in enumerate(results):
        later = [e for k, e in results[index + 1:] if key and k == key]
        for error in errors:
            if any(error not in e for e in later):
                continue   # the same command ran again without it: fixed
            if error in failing:
                failing.remove(error)
            failing.append(error)
    return failing


# -- requests and actions -------------------------------------------------------------------------

def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def request_words(text: str, limit: int = 30) -> tuple[str, ...]:
    words: list[str] = []
    for w in _WORD.findall(text):
        low = w.lower().strip("'-")
        if len(low) < 4 or low in _STOP or low in words:
            continue
        words.append(low)
        if len(words) >= limit:
            break
    return tuple(words)


def action_answer(call: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """What a tool call was doing, as the context would name it: its path, else the head of its command."""
    name, args = _arguments(call)
    path = _first(args, _PATH_KEYS)
    if path:
        return path, path_spellings(path)
    command = _first(args, _COMMAND_KEYS)
    if command:
        line = next((ln.strip() for ln in command.splitlines() if ln.strip()), "")
        # "cd /repo && python x.py": the directory change is not the action
        line = re.sub(r"^cd\s+\S+\s*(&&|;)\s*", "", line)
        head = " ".join(line.split()[:3])[:60].lower()
        return (head, (head,)) if head else None
    return (name, (name.lower(),)) if name else None


# -- probes ---------------------------------------------------------------------------------------

def probes_for(span: Sequence[dict[str, Any]], history: Sequence[dict[str, Any]]) -> list[Probe]:
    """The probes of one evicted span (original messages, in order); ``history`` is the session
    up to the compaction (to recognise repeated harness messages)."""
    probes: list[Probe] = []
    edited: list[str] = []
    for raw in span:
        for call in raw.get("tool_calls") or []:
            if isinstance(call, dict):
                for path in edited_files(call):
                    if path in edited:
                        edited.remove(path)
                    edited.append(path)
    probes += [Probe("file_edited", p, path_spellings(p)) for p in edited[-PER_KIND:]]
    errors = failing_errors(span)
    probes += [Probe("error_failing", e, (e.lower(),)) for e in errors[-PER_KIND:]]
    repeats = Counter(_norm("\n".join(iter_text(r.get("content")))) for r in history if r.get("role") == "user")
    for raw in reversed(span):
        if raw.get("role") != "user":
            continue
        text = "\n".join(iter_text(raw.get("content")))
        if repeats[_norm(text)] > BOILERPLATE_REPEATS:
            continue
        words = request_words(text)
        if len(words) >= 3:
            probes.append(Probe("user_request", text[:80], (), words))
            break
    for raw in reversed(span):
        calls = [c for c in raw.get("tool_calls") or [] if isinstance(c, dict)]
        if raw.get("role") == "assistant" and calls:
            answer = action_answer(calls[-1])
            if answer is not None:
                probes.append(Probe("pending_action", answer[0], answer[1]))
            break
    return probes


def context_text(messages: Iterable[dict[str, Any]]) -> str:
    """The lower-cased text probes are looked for in: content, tool-call names and arguments."""
    return render_text(list(messages)).lower()


def score(at: int, span: Sequence[dict[str, Any]], history: Sequence[dict[str, Any]],
          context: Sequence[dict[str, Any]]) -> ProbeResult:
    probes = probes_for(span, history)
    if not probes:
        return ProbeResult(at, [])
    text = context_text(context)
    return ProbeResult(at, [(p, p.held_by(text)) for p in probes])
