"""What the extractive summary looks for in a transcript, and what it finds there.

Each detector is a regular expression or a small scan over text, linear in its size:

- the paths a tool call changes (:func:`changed_paths`: editor tools and shell
  redirections, ``sed -i``, ``cp``...); paths and URLs in text are found by
  :func:`compaction.identifiers.find_paths`, the rule the retention score uses too;
- the outcome of a tool result (:func:`outcome_of`: exit status, error line or first
  line of output) and its exception lines (:func:`exception_lines`);
- sentences that carry a user's constraint or an agent's decision (``CONSTRAINT``,
  ``DECISION``, ``STRONG_DECISION``);
- a one-line description of a tool call (:func:`describe_call`).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ...identifiers import clean_path
from .words import squash

_EXT_TAIL = re.compile(r"\.[A-Za-z0-9]{1,10}$")

# What a tool call changes. Tools named like editors change the path in their arguments;
# shell commands change the targets of redirections, sed -i, tee, cp/mv, touch, rm, mkdir.
_EDITOR_TOOL = re.compile(r"write|edit|create|replace|insert|patch|apply|append|delete|remove|save|notebook", re.I)
_EDITOR_KEYS = ("path", "file_path", "filename", "file", "notebook_path", "target", "target_file", "dest")
_SHELL_TARGETS = [
    re.compile(r"(?<![<>&0-9])>{1,2}\s*([^\s;&|<>()'\"]+)"),
    re.compile(r"\btee\s+(?:-a\s+)?([^\s;&|<>]+)"),
    re.compile(r"\bsed\s+-i\S*\s+(?:'[^']*'|\"[^\"]*\"|\S+)\s+([^\s;&|<>]+)"),
    re.compile(r"\b(?:cp|mv)\s+(?:-\w+\s+)*[^\s;&|<>]+\s+([^\s;&|<>]+)"),
    re.compile(r"\b(?:touch|rm|mkdir|truncate)\s+(?:-\w+\s+)*([^\s;&|<>]+)"),
    re.compile(r"\bgit\s+(?:apply|am)\b|\bpatch\s+-p\d"),
    re.compile(r"^(?:edit\s+\d+:\d+|create\s+([^\s;&|<>]+))", re.MULTILINE),  # SWE-agent's editor commands
]
_HEREDOC = re.compile(r"(<<-?\s*['\"]?(\w+)['\"]?[^\n]*)\n.*?\n\2[ \t]*(?=\n|$)", re.DOTALL)
_NOT_FILES = ("/dev/null", "/dev/stdout", "/dev/stderr", "&1", "&2")
# The "command" of editor-style tools (str_replace_editor and kin) that writes the file in "path".
_EDITOR_COMMANDS = ("create", "str_replace", "insert", "write", "edit", "undo_edit", "append")


def _json_object(args: str) -> dict[str, Any] | None:
    """Tool-call arguments as a JSON object, or None when they are not one."""
    try:
        obj = json.loads(args) if args.strip().startswith("{") else None
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return None
    return obj if isinstance(obj, dict) else None


def _strings(obj: dict[str, Any], keys: Iterable[str]) -> list[str]:
    return [v for k in keys if isinstance(v := obj.get(k), str)]


def changed_paths(name: str, args: str) -> tuple[bool, list[str]]:
    """(does the call change files?, the paths it changes) for a tool call."""
    obj = _json_object(args)
    if _EDITOR_TOOL.search(name or ""):
        paths = _strings(obj, _EDITOR_KEYS) if obj else []
        return True, [p for p in paths if clean_path(p, named=True)]
    command = args
    if obj is not None:
        command = next(iter(_strings(obj, ("command", "cmd", "script", "code"))), "")
        if obj.get("command") in _EDITOR_COMMANDS:
            return True, [p for p in _strings(obj, _EDITOR_KEYS) if clean_path(p, named=True)]
    targets: list[str] = []
    edits = False
    # A here-document body is file content, not shell: "x > y" inside it redirects nothing.
    command = _HEREDOC.sub(r"\1", command[:20000])
    for rx in _SHELL_TARGETS:
        for m in rx.finditer(command):
            edits = True
            if m.groups() and m.group(1):
                p = clean_path(m.group(1).strip("'\""), named=True)
                if p and p not in _NOT_FILES and ("/" in p or _EXT_TAIL.search(p)) and p not in targets:
                    targets.append(p)
    return edits, targets


EXIT_STATUS = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"
                 r"|\b(?:exit(?:ed)?(?: with)?(?: status| code)?|return ?code|exit_code|status code)\s*[:=]?\s*(-?\d+)\b",
                 re.I)
_EXC_LINE = re.compile(
    r"^(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure|Fault|Exit|Interrupt|Warning|Denied|Timeout|"
    r"NotFound|Invalid|Configured))\b(?::[ \t]*([^\n]*))?[ \t]*$",
    re.MULTILINE)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE)
_FAIL_LINE = re.compile(r"^(?:FAILED|FAIL:|ERROR:|error:|fatal:|Error:|npm ERR!|panic:)[^\n]*", re.MULTILINE)
CONSTRAINT = re.compile(
    r"\b(?:must|mustn't|should(?:n't| not)?|do not|don't|never|always|only|without|make sure|ensure|"
    r"required?|need(?:s)? to|please|avoid|keep)\b|不要|必须|务必|请|只能|禁止|してください|しないで|必ず|하지 마|반드시",
    re.I)
DECISION = re.compile(
    r"\b(?:I will|I'll|I am going to|I'm going to|let's|let us|we will|we'll|we should|decided?|because|instead|"
    r"so that|root cause|the (?:issue|problem|bug|fix) (?:is|was)|the fix|this means|which means|therefore)\b"
    r"|因为|所以|决定|我将|我会|原因|ので|ため|することにし|때문에|하겠습니다|결정",
    re.I)
STRONG_DECISION = re.compile(
    r"\b(?:because|decided?|instead|root cause|the (?:issue|problem|bug|fix) (?:is|was)|the fix|therefore|"
    r"this means|which means)\b|因为|决定|原因|ため|때문에|결정",
    re.I)
NOTE = re.compile(r"^\[[^\]\n]{0,200}\]$")
BULLET = re.compile(r"^(?:[-*•>]+|\d{1,3}[.)])\s+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_TAGS = re.compile(r"<returncode>\s*-?\d+\s*</returncode>|</?(?:returncode|output|stdout|stderr|warning|error)>")
_DECOR = re.compile(r"^[\s^~=\-_*#|+.]*$")

_CALL_KEYS = ("command", "cmd", "code", "script", "query", "pattern", "path", "file_path", "filename",
              "file", "url", "input", "text")


def path_key(p: str) -> str:
    return p[2:] if p.startswith("./") else p


def describe_call(name: str, args: str) -> str:
    """``name: key argument`` of a tool call on one line (the command, the path, the query...)."""
    obj = _json_object(args)
    main = ""
    if obj is not None:
        command, path = obj.get("command"), obj.get("path")
        if isinstance(command, str) and isinstance(path, str) and len(command) < 24:
            main = f"{command} {path}"   # editor-style tools: "str_replace /x.py"
        else:
            main = next((v for v in _strings(obj, _CALL_KEYS) if v.strip()), "")
            if not main and obj:
                main = json.dumps(obj, ensure_ascii=False, sort_keys=True)[:300]
    else:
        main = args
    main = main.strip()
    lines = main.splitlines()
    if len(lines) > 1:
        main = lines[0].rstrip() + " …"
    if len(main) > 160:
        main = main[:157].rstrip() + "…"
    return f"{name}: {main}" if main else name


def _meaningful_lines(text: str) -> list[str]:
    return [ln.strip() for ln in _TAGS.sub("", text).splitlines() if ln.strip() and not _DECOR.match(ln)]


def last_meaningful_line(text: str, window: int = 4000) -> str | None:
    lines = _meaningful_lines(text[-window:])
    return lines[-1] if lines else None


def _first_meaningful_line(text: str, window: int = 4000) -> str | None:
    lines = _meaningful_lines(text[:window])
    return lines[0] if lines else None


def exception_lines(text: str) -> list[str]:
    """Exception lines: ``Name: message`` lines and the closing line of each traceback."""
    out: list[tuple[int, str]] = []
    for m in _EXC_LINE.finditer(text):
        line = m.group(0).strip()
        if line.startswith("E "):
            line = line[1:].strip()
        out.append((m.start(), line))
    for m in _TRACEBACK.finditer(text):
        # The exception line is the first non-indented line after the frames.
        pos = m.end()
        for _ in range(400):
            nl = text.find("\n", pos)
            if nl < 0:
                break
            nxt = text.find("\n", nl + 1)
            line = text[nl + 1: nxt if nxt >= 0 else len(text)]
            pos = nl + 1
            if line and not line[0].isspace() and not _DECOR.match(line) and not line.startswith(
                    ("Traceback", "During handling", "The above exception")):
                out.append((pos, _TAGS.sub("", line).strip()))
                break
    seen: set[str] = set()
    result: list[str] = []
    for _, line in sorted(out):
        if line and line not in seen:
            seen.add(line)
            result.append(line)
    return result


def outcome_of(result: str, errors: list[str] | None = None) -> tuple[bool, str]:
    """(failed?, short outcome text) of a tool result (``errors``: its exception lines, if known)."""
    head, tail = result[:2000], result[-2000:]
    code: int | None = None
    for chunk in (head, tail):
        m = EXIT_STATUS.search(chunk)
        if m:
            code = int(m.group(1) or m.group(2))
            break
    if errors is None:
        errors = exception_lines(result) if ("Error" in result or "Exception" in result or "Traceback" in result
                                             or "E " in result) else []
    fails = _FAIL_LINE.findall(result[-20000:])
    if code not in (None, 0):
        detail = (errors[-1] if errors else None) or (fails[-1] if fails else None) or last_meaningful_line(result)
        return True, f"exit {code}" + (f": {squash(detail, 30)}" if detail else "")
    if errors and code is None:
        return True, f"error: {squash(errors[-1], 30)}"
    first = _first_meaningful_line(result)
    prefix = "exit 0" if code == 0 else "ok"
    if not first:
        return False, prefix + " (no output)"
    return False, f"{prefix}: {squash(first, 18)}"



def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]

