"""Offline extractive summarizer, reachable through litellm as ``extractive/default``.

No model, no network: the summary is assembled from pieces of the transcript
itself, picked by simple and predictable rules, so the same request always gives
the same bytes. It is the default when a policy names no summarizer model, and it
is labelled as extractive in its first line so nobody mistakes it for an LLM
summary.

What it keeps, each under its own heading and together within the word budget:

- **User requests**: the task as first stated and the latest request, close to
  verbatim, plus sentences that carry constraints ("must", "do not", "only"...);
- **Decisions**: agent sentences that state a plan or a reason ("I will",
  "let's", "decided", "because", "the root cause"...);
- **Files and paths**: paths and URLs, those the user or the agent wrote (and
  those a tool call changed) ranked above those only seen in tool output;
- **Commands and outcomes**: tool calls with their key argument and what came
  back (exit status, the error line, or the first line of output), failures and
  edits first;
- **Errors**: exception lines, the last line of each traceback, the closing
  line of failed commands, with repeat counts;
- **Current state**: the agent's last message and the last tool activity.

A previous summary is folded in: when it is itself extractive, its items are
merged section by section with the new ones (old task statement kept, old
"latest" request demoted); otherwise its text becomes an "Earlier summary"
section with its own share of the budget.

Budget: ``max_summary_words`` words, where a CJK character counts as one word
and any other run of non-space characters (bullets and headings included) as
one. The budget is also held below half the size of the input, so a summary of a
short span still shrinks it.

The transcript is read in the format of :mod:`.render`; the request is parsed
back from the tags of the default prompt (see :mod:`.prompts`). Everything is
regex scanning over the text, linear in its size: a megabyte of transcript takes
a fraction of a second.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from .prompts import CONVERSATION_CLOSE, CONVERSATION_OPEN, NO_PREVIOUS_SUMMARY, PREVIOUS_CLOSE, PREVIOUS_OPEN

PROVIDER = "extractive"
EXTRACTIVE_MODEL = f"{PROVIDER}/default"
LABEL = "Extractive summary (no LLM)"
DEFAULT_WORDS = 600        # when the request states no budget
UNLIMITED_WORDS = 1500     # when the policy says 0 (no limit stated)
MIN_WORDS = 40

# -- words -------------------------------------------------------------------------

_CJK = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\u3040-\u30ff\uff00-\uffef"
_WORD = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_ELLIPSIS = "…"


def count_words(text: str, stop_at: int | None = None) -> int:
    """Words as the budget counts them: each CJK character, each other non-space run."""
    n = 0
    for _ in _WORD.finditer(text):
        n += 1
        if stop_at is not None and n >= stop_at:
            break
    return n


def truncate_words(text: str, limit: int) -> str:
    """At most ``limit`` words of ``text``; a cut is shown by a trailing ellipsis (one word)."""
    if limit <= 0:
        return ""
    ends: list[int] = []
    for m in _WORD.finditer(text):
        ends.append(m.end())
        if len(ends) > limit:
            break
    if len(ends) <= limit:
        return text
    if limit == 1:
        return _ELLIPSIS
    return text[:ends[limit - 2]].rstrip() + " " + _ELLIPSIS


def squash(text: str, max_words: int = 120) -> str:
    """One line: whitespace collapsed, at most ``max_words`` words (cheap on huge input)."""
    head = text[: max_words * 24 + 64]
    return truncate_words(" ".join(head.split()), max_words)


# -- parsing the transcript ----------------------------------------------------------

_HEADER = re.compile(
    r"^\[(?P<role>user|assistant|system|developer)\]: "
    # a call starts a line, or directly follows "[assistant]: " when the message has no text
    r"|(?:^|(?<=^\[assistant\]: ))\[Called tool: (?P<call>[^\s\[\]]+) with args: "
    r"|^\[(?P<tool>[^\[\]\n]{1,100}?) returned: ",
    re.MULTILINE)


@dataclass
class Event:
    kind: str              # user | assistant | system | call | result
    text: str
    order: int
    name: str | None = None
    call: "Event | None" = None      # for results: the call they answer
    result: "Event | None" = None    # for calls: their result
    _memo: dict | None = None

    def _cached(self, key: str, fn):
        if self._memo is None:
            self._memo = {}
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def scan_text(self) -> str:
        """The text to scan; very large results are scanned at both ends only."""
        t = self.text
        return t if len(t) <= 400_000 else t[:200_000] + "\n" + t[-200_000:]

    def changes(self) -> tuple[bool, list[str]]:
        return self._cached("changes", lambda: changed_paths(self.name or "", self.text))

    def outcome(self) -> tuple[bool, str]:
        return self._cached("outcome", lambda: outcome_of(self.scan_text(), self.exceptions()))

    def exceptions(self) -> list[str]:
        def scan() -> list[str]:
            t = self.scan_text()
            if "Error" in t or "Exception" in t or "Traceback" in t or "Configured" in t or "E " in t:
                return exception_lines(t)
            return []
        return self._cached("exceptions", scan)


def _strip_bracket(body: str) -> str:
    body = body.rstrip()
    return body[:-1] if body.endswith("]") else body


def parse_transcript(text: str) -> list[Event]:
    events: list[Event] = []
    matches = list(_HEADER.finditer(text))
    pending: list[Event] = []
    for j, m in enumerate(matches):
        end = matches[j + 1].start() if j + 1 < len(matches) else len(text)
        body = text[m.end():end]
        order = len(events)
        if m.group("role"):
            role = m.group("role")
            events.append(Event("system" if role == "developer" else role, body.strip(), order))
        elif m.group("call"):
            ev = Event("call", _strip_bracket(body).strip(), order, name=m.group("call"))
            events.append(ev)
            pending.append(ev)
        else:
            name = m.group("tool").strip()
            ev = Event("result", _strip_bracket(body).strip(), order, name=name)
            # Results answer calls in order; prefer the oldest open call of the same tool.
            for k, call in enumerate(pending):
                if call.name == name:
                    ev.call = pending.pop(k)
                    break
            else:
                if pending:
                    ev.call = pending.pop(0)
            if ev.call is not None:
                ev.call.result = ev
            events.append(ev)
    return events


def parse_request(messages: Iterable[dict]) -> tuple[str, str | None, int | None]:
    """(conversation text, previous summary or None, word budget or None) from prompt messages."""
    user_text = ""
    system_text = ""
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else getattr(msg, "content", None)
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        role = msg.get("role") if isinstance(msg, dict) else getattr(msg, "role", None)
        if role == "user" and content:
            user_text = content
        elif role == "system" and content:
            system_text = content
    previous: str | None = None
    conversation = user_text
    p_open = user_text.find(PREVIOUS_OPEN + "\n")
    joint = "\n" + PREVIOUS_CLOSE + "\n\n" + CONVERSATION_OPEN + "\n"
    if p_open >= 0:
        p_close = user_text.find(joint, p_open)
        if p_close >= 0:
            previous = user_text[p_open + len(PREVIOUS_OPEN) + 1:p_close]
            start = p_close + len(joint)
            c_close = user_text.rfind("\n" + CONVERSATION_CLOSE)
            conversation = user_text[start:c_close if c_close >= start else len(user_text)]
    else:
        c_open = user_text.find(CONVERSATION_OPEN + "\n")
        if c_open >= 0:
            start = c_open + len(CONVERSATION_OPEN) + 1
            c_close = user_text.rfind("\n" + CONVERSATION_CLOSE)
            conversation = user_text[start:c_close if c_close >= start else len(user_text)]
    if previous is not None and previous.strip() in ("", NO_PREVIOUS_SUMMARY):
        previous = None
    words = None
    found = re.search(r"at most (\d+) words", user_text[:20000]) or re.search(r"at most (\d+) words", system_text)
    if found:
        words = int(found.group(1))
    return conversation, previous, words


# -- what to look for --------------------------------------------------------------------

_EXT = ("py|pyi|pyx|ipynb|js|mjs|cjs|jsx|ts|tsx|vue|svelte|json|jsonl|md|rst|txt|yml|yaml|toml|cfg|ini|"
        "go|rs|java|kt|scala|c|h|cc|cpp|hpp|cs|rb|php|pl|lua|swift|dart|r|sh|bash|zsh|ps1|bat|html|htm|"
        "css|scss|less|sql|xml|csv|tsv|lock|gradle|proto|log|patch|diff|tex|dcm|mk|tmpl|tpl|j2|pem|crt|"
        "png|jpg|jpeg|gif|svg|pdf|zip|tar|gz")
_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]}]+")
_PATH = re.compile(
    rf"(?<![\w./~@+-])(?:~|\.{{1,2}})?/?(?:[\w.@+-]+/)+[\w.@+-]*"
    rf"|(?<![\w./@+-])[A-Za-z0-9_][\w-]*(?:\.[\w-]+)*\.(?:{_EXT})\b")
_HAS_ALNUM = re.compile(r"[A-Za-z0-9]")
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


def changed_paths(name: str, args: str) -> tuple[bool, list[str]]:
    """(does the call change files?, the paths it changes) for a tool call."""
    try:
        obj = json.loads(args) if args.strip().startswith("{") else None
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        obj = None
    if _EDITOR_TOOL.search(name or ""):
        paths = [obj[k] for k in _EDITOR_KEYS if obj and isinstance(obj.get(k), str)]
        return True, [p for p in paths if _clean_path(p)]
    command = args
    if obj is not None:
        command = next((obj[k] for k in ("command", "cmd", "script", "code") if isinstance(obj.get(k), str)), "")
        if isinstance(obj.get("command"), str) and obj["command"] in ("create", "str_replace", "insert", "write",
                                                                      "edit", "undo_edit", "append"):
            paths = [obj[k] for k in _EDITOR_KEYS if isinstance(obj.get(k), str)]
            return True, [p for p in paths if _clean_path(p)]
    targets: list[str] = []
    edits = False
    # A here-document body is file content, not shell: "x > y" inside it redirects nothing.
    command = _HEREDOC.sub(r"\1", command[:20000])
    for rx in _SHELL_TARGETS:
        for m in rx.finditer(command):
            edits = True
            if m.groups() and m.group(1):
                p = _clean_path(m.group(1).strip("'\""))
                if p and p not in _NOT_FILES and ("/" in p or _EXT_TAIL.search(p)) and p not in targets:
                    targets.append(p)
    return edits, targets


_RC = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"
                 r"|\b(?:exit(?:ed)?(?: with)?(?: status| code)?|return ?code|exit_code|status code)\s*[:=]?\s*(-?\d+)\b",
                 re.I)
_EXC_LINE = re.compile(
    r"^(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure|Fault|Exit|Interrupt|Warning|Denied|Timeout|"
    r"NotFound|Invalid|Configured))\b(?::[ \t]*([^\n]*))?[ \t]*$",
    re.MULTILINE)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE)
_FAIL_LINE = re.compile(r"^(?:FAILED|FAIL:|ERROR:|error:|fatal:|Error:|npm ERR!|panic:)[^\n]*", re.MULTILINE)
_CONSTRAINT = re.compile(
    r"\b(?:must|mustn't|should(?:n't| not)?|do not|don't|never|always|only|without|make sure|ensure|"
    r"required?|need(?:s)? to|please|avoid|keep)\b|不要|必须|务必|请|只能|禁止|してください|しないで|必ず|하지 마|반드시",
    re.I)
_DECISION = re.compile(
    r"\b(?:I will|I'll|I am going to|I'm going to|let's|let us|we will|we'll|we should|decided?|because|instead|"
    r"so that|root cause|the (?:issue|problem|bug|fix) (?:is|was)|the fix|this means|which means|therefore)\b"
    r"|因为|所以|决定|我将|我会|原因|ので|ため|することにし|때문에|하겠습니다|결정",
    re.I)
_STRONG_DECISION = re.compile(
    r"\b(?:because|decided?|instead|root cause|the (?:issue|problem|bug|fix) (?:is|was)|the fix|therefore|"
    r"this means|which means)\b|因为|决定|原因|ため|때문에|결정",
    re.I)
_NOTE = re.compile(r"^\[[^\]\n]{0,200}\]$")
_BULLET = re.compile(r"^(?:[-*•>]+|\d{1,3}[.)])\s+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_TAGS = re.compile(r"<returncode>\s*-?\d+\s*</returncode>|</?(?:returncode|output|stdout|stderr|warning|error)>")
_DECOR = re.compile(r"^[\s^~=\-_*#|+.]*$")

_CALL_KEYS = ("command", "cmd", "code", "script", "query", "pattern", "path", "file_path", "filename",
              "file", "url", "input", "text")


def _clean_path(raw: str) -> str | None:
    p = raw.rstrip(".,:;'\"`")
    if not p or len(p) > 200 or not _HAS_ALNUM.search(p):
        return None
    if "/" in p:
        if p.startswith("//"):
            return None
        parts = [c for c in p.split("/") if c not in ("", ".", "..", "~")]
        if not parts or any(not _HAS_ALNUM.search(c) for c in parts):
            return None
        if p.endswith("/"):
            # a directory: "src/app/" is one, "a/" from a diff header is not
            return p if (p.startswith(("/", "./", "../", "~/")) or len(parts) >= 2) else None
        if not (p.startswith(("/", "./", "../", "~/")) or p.count("/") >= 2 or _EXT_TAIL.search(p)):
            return None  # "and/or", "input/output"
        if re.fullmatch(r"[\d/.:-]+", p):
            return None  # dates, fractions
    return p


def find_paths(text: str) -> list[str]:
    found = [u.rstrip(".,:;'\"") for u in _URL.findall(text)]
    scrubbed = _URL.sub(" ", text) if found else text
    for m in _PATH.finditer(scrubbed):
        p = _clean_path(m.group(0))
        if p:
            found.append(p)
    return found


def _path_key(p: str) -> str:
    return p[2:] if p.startswith("./") else p


def describe_call(name: str, args: str) -> str:
    try:
        obj = json.loads(args) if args.strip().startswith("{") else None
    except ValueError:
        obj = None
    main = ""
    if isinstance(obj, dict):
        if isinstance(obj.get("command"), str) and isinstance(obj.get("path"), str) and len(obj["command"]) < 24:
            main = f"{obj['command']} {obj['path']}"   # editor-style tools: "str_replace /x.py"
        else:
            for key in _CALL_KEYS:
                value = obj.get(key)
                if isinstance(value, str) and value.strip():
                    main = value
                    break
            else:
                main = json.dumps(obj, ensure_ascii=False, sort_keys=True)[:300] if obj else ""
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


def _last_meaningful_line(text: str, window: int = 4000) -> str | None:
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
    result = []
    for _, line in sorted(out):
        if line and line not in seen:
            seen.add(line)
            result.append(line)
    return result


def outcome_of(result: str, errors: list[str] | None = None) -> tuple[bool, str]:
    """(failed?, short outcome text) of a tool result (``errors``: its exception lines, if known)."""
    head, tail = result[:2000], result[-2000:]
    code = None
    for chunk in (head, tail):
        m = _RC.search(chunk)
        if m:
            code = int(m.group(1) or m.group(2))
            break
    if errors is None:
        errors = exception_lines(result) if ("Error" in result or "Exception" in result or "Traceback" in result
                                             or "E " in result) else []
    fails = _FAIL_LINE.findall(result[-20000:])
    if code not in (None, 0):
        detail = (errors[-1] if errors else None) or (fails[-1] if fails else None) or _last_meaningful_line(result)
        return True, f"exit {code}" + (f": {squash(detail, 30)}" if detail else "")
    if errors and code is None:
        return True, f"error: {squash(errors[-1], 30)}"
    first = _first_meaningful_line(result)
    prefix = "exit 0" if code == 0 else "ok"
    if not first:
        return False, prefix + " (no output)"
    return False, f"{prefix}: {squash(first, 18)}"


# -- items and sections ------------------------------------------------------------------

@dataclass
class Item:
    text: str
    rank: tuple        # larger is kept first
    order: float       # output order inside the section
    key: str = ""      # for de-duplication

    _words: int | None = None

    def words(self) -> int:
        if self._words is None:
            self._words = count_words(self.text) + 1  # the bullet
        return self._words


SECTIONS = [  # (title, weight)
    ("Earlier summary", 24),
    ("User requests", 26),
    ("Decisions", 14),
    ("Files and paths", 14),
    ("Commands and outcomes", 18),
    ("Errors", 12),
    ("Current state", 10),
]
TITLES = [t for t, _ in SECTIONS]
WEIGHTS = dict(SECTIONS)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


# -- languages ---------------------------------------------------------------------------
# The summary is built with English headings and prefixes (the keys of the EXTRACTIVE locale
# section) and translated when rendered; a previous summary in any language is read back
# through the reverse tables.
_PREFIXES = ("Task:", "Latest request:", "Request:", "Constraint:")


def _words(language: str) -> dict[str, str]:
    from ..locales import has, section  # noqa: PLC0415

    return section("EXTRACTIVE", language if has(language) else "en")


def _reverse_tables() -> tuple[tuple[str, ...], dict[str, str], dict[str, str]]:
    from ..locales import available  # noqa: PLC0415

    labels, headings, prefixes = [], {}, {}
    for lang in available():
        words = _words(lang)
        labels.append(words["label"])
        headings.update({words[t]: t for t in TITLES})
        prefixes.update({words[p]: p for p in _PREFIXES})
    return tuple(labels), headings, prefixes


def _localize_line(text: str, words: dict[str, str]) -> str:
    for p in _PREFIXES:
        if text.startswith(p):
            return words[p] + (" " if words[p].endswith(":") else "") + text[len(p):].lstrip()
    return text


def _parse_previous(previous: str) -> tuple[dict[str, list[str]], bool]:
    """Sections of a previous extractive summary ({title: [bullet texts]}), or the prose."""
    labels, headings, prefixes = _reverse_tables()
    if not previous.lstrip().startswith(labels):
        return {}, False
    sections: dict[str, list[str]] = {}
    current = None
    for line in previous.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            current = headings.get(title, title)
            sections.setdefault(current, [])
        elif current and line.startswith("- "):
            item = line[2:].strip()
            for local, english in prefixes.items():
                if item.startswith(local) and local != english:
                    item = english + " " + item[len(local):].lstrip()
                    break
            sections[current].append(item)
    return sections, True


def _requests(events: list[Event], prev: dict[str, list[str]]) -> list[Item]:
    # Harness notes such as "[Request interrupted by user]" are not requests.
    users = [e for e in events if e.kind == "user" and e.text and not _NOTE.match(e.text)]
    items: list[Item] = []
    prev_items = prev.get("User requests", [])
    has_task = any(t.startswith("Task:") for t in prev_items)
    for k, text in enumerate(prev_items):
        if text.startswith("Latest request:"):
            text = "Request:" + text[len("Latest request:"):]
        top = text.startswith("Task:")
        items.append(Item(text, (6 if top else 3, k), -1000 + k, key=text))
    # A re-inserted copy of the task statement comes back in every later span: it is the
    # task, not a new request, so it must not be listed again as "Latest request".
    task_head = next((" ".join(t[len("Task:"):].split())[:100] for t in prev_items if t.startswith("Task:")), None)
    if task_head:
        users = [e for e in users if " ".join(squash(e.text, 140).split())[:100] != task_head]
    for pos, ev in enumerate(users):
        first, last = pos == 0, pos == len(users) - 1
        if first and not has_task:
            items.append(Item("Task: " + squash(ev.text, 140), (7, 0), ev.order))
        elif last:
            items.append(Item("Latest request: " + squash(ev.text, 80), (6, 1), ev.order))
        else:
            items.append(Item("Request: " + squash(ev.text, 50), (2, ev.order), ev.order))
    # Constraint sentences from every user message, deduplicated, capped per message.
    shown = " ".join(" ".join(it.text.split()) for it in items)
    seen: set[str] = set()
    for ev in users:
        taken = 0
        for sent in _sentences(ev.text[:20000]):
            sent = _BULLET.sub("", sent)
            if taken >= 4 or sent.endswith(":") or not _CONSTRAINT.search(sent):
                continue  # a line ending in ":" introduces a list; it says nothing alone
            line = squash(sent, 35)
            norm = " ".join(line.split())
            if count_words(line) < 4 or norm in seen or norm.rstrip(" " + _ELLIPSIS) in shown:
                continue
            seen.add(norm)
            taken += 1
            items.append(Item("Constraint: " + line, (1, -ev.order), ev.order + 0.5, key=norm))
    return items


def _decisions(events: list[Event], prev: dict[str, list[str]]) -> list[Item]:
    items = [Item(t, (1, -1000 + k), -1000 + k, key=t) for k, t in enumerate(prev.get("Decisions", []))]
    seen = {it.key for it in items}
    for ev in events:
        if ev.kind != "assistant" or not ev.text:
            continue
        for s_idx, sent in enumerate(_sentences(ev.text[:20000])):
            if not _DECISION.search(sent) or count_words(sent, stop_at=4) < 4:
                continue
            if sent.lstrip().startswith(("```", "    ", "$ ", ">>>")):
                continue
            line = squash(sent, 40)
            if line in seen:
                continue
            seen.add(line)
            strong = 2 if _STRONG_DECISION.search(sent) else 1
            items.append(Item(line, (strong, ev.order), ev.order + s_idx / 1000, key=line))
    return items


def _files(events: list[Event], prev: dict[str, list[str]]) -> list[Item]:
    score: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    shown_as: dict[str, str] = {}
    changed: set[str] = set()
    referenced: set[str] = set()
    for ev in events:
        if ev.kind == "result":
            text = ev.scan_text()
            per_result: dict[str, int] = {}
            for p in find_paths(text):
                k = _path_key(p)
                per_result[k] = per_result.get(k, 0) + 1
                shown_as.setdefault(k, p)
                first_seen.setdefault(k, ev.order)
            for k, n in per_result.items():
                score[k] = score.get(k, 0) + min(n, 3)
            continue
        paths = find_paths(ev.text)
        if ev.kind == "call":
            _, targets = ev.changes()
            changed.update(_path_key(p) for p in targets)
            paths += [p for p in targets if p not in paths]
        for p in paths:
            k = _path_key(p)
            score[k] = score.get(k, 0) + 3
            referenced.add(k)
            shown_as[k] = shown_as.get(k) if k in shown_as and len(shown_as[k]) >= len(p) else p
            first_seen.setdefault(k, ev.order)
    # "validators.py" said in passing is the same file as "django/core/validators.py"
    # when exactly one known path has that name: fold the mentions into the full path.
    by_base: dict[str, list[str]] = {}
    for key in score:
        if "/" in key and not key.endswith("/"):
            by_base.setdefault(key.rsplit("/", 1)[1], []).append(key)
    for key in [k for k in score if "/" not in k]:
        owners = by_base.get(key)
        if owners and len(owners) == 1:
            full = owners[0]
            score[full] += score.pop(key)
            first_seen[full] = min(first_seen[full], first_seen.pop(key))
            if key in changed:
                changed.add(full)
            if key in referenced:
                referenced.add(full)
    items: list[Item] = []
    prev_list = prev.get("Files and paths", [])
    prev_keys: dict[str, int] = {}
    for k, text in enumerate(prev_list):
        path = text.split(" (", 1)[0]
        prev_keys[_path_key(path)] = k
    for k, text in enumerate(prev_list):
        path = text.split(" (", 1)[0]
        key = _path_key(path)
        if key in score:
            continue  # listed again below with fresh evidence
        items.append(Item(text, (2, len(prev_list) - k, 0), -1000 + k, key=key))
    for key, s in score.items():
        note = "changed" if key in changed else ("mentioned" if key in referenced else "seen in tool output")
        tier = 4 if key in changed else (3 if key in referenced or key in prev_keys else 1)
        items.append(Item(f"{shown_as[key]} ({note})", (tier, s, first_seen[key]), 0, key=key))
    # Listed by importance: changed files first, then what was referenced, then the rest.
    for pos, it in enumerate(sorted(items, key=lambda i: i.rank, reverse=True)):
        it.order = pos
    return items


def _commands(events: list[Event], prev: dict[str, list[str]]) -> tuple[list[Item], list[Item]]:
    """(command items, error items)."""
    cmd_items = [Item(t, (0, k), -1000 + k, key=t) for k, t in enumerate(prev.get("Commands and outcomes", []))]
    err_counts: dict[str, list] = {}   # line -> [count, first order, rank]
    for k, t in enumerate(prev.get("Errors", [])):
        err_counts[t] = [0, -1000 + k, 2]
    calls = [e for e in events if e.kind == "call"]
    last_calls = {id(c) for c in calls[-5:]}
    for ev in calls:
        desc = describe_call(ev.name or "tool", ev.text)
        failed, outcome = (False, "no result yet") if ev.result is None else ev.result.outcome()
        edit = ev.changes()[0]
        if failed:
            # A failure with an error message beats a bare non-zero status (grep finding nothing).
            tier = 3 if ":" in outcome else 1.5
        else:
            tier = 2.5 if edit else (2 if id(ev) in last_calls else 1)
        cmd_items.append(Item(f"{desc} → {outcome}", (tier, ev.order), ev.order, key=desc + outcome))
    for ev in events:
        if ev.kind not in ("result", "user"):
            continue
        failed = ev.kind == "result" and ev.outcome()[0]
        lines = ev.exceptions()
        if failed and not lines:
            last = _last_meaningful_line(ev.scan_text())
            if last and not _RC.search(last):
                lines = [last]
        for line in lines:
            line = squash(line, 40)
            entry = err_counts.get(line)
            if entry is None:
                err_counts[line] = [1, ev.order, 3 if failed else 1]
            else:
                entry[0] += 1
                entry[2] = max(entry[2], 3 if failed else 1)
    err_items = []
    for line, (n, order, rank) in err_counts.items():
        text = line if n <= 1 else f"{line} (×{n})"
        err_items.append(Item(text, (rank, order), order, key=line))
    return cmd_items, err_items


def _state(events: list[Event], prev: dict[str, list[str]]) -> list[Item]:
    items: list[Item] = []
    last_text = next((e for e in reversed(events) if e.kind == "assistant" and e.text), None)
    if last_text is not None:
        items.append(Item("Last agent message: " + squash(last_text.text, 70), (3,), 0))
    last_call = next((e for e in reversed(events) if e.kind == "call"), None)
    if last_call is not None:
        desc = describe_call(last_call.name or "tool", last_call.text)
        outcome = "no result yet" if last_call.result is None else last_call.result.outcome()[1]
        items.append(Item(f"Last tool call: {desc} → {outcome}", (2,), 1))
    if not items:
        items = [Item(t, (1,), k) for k, t in enumerate(prev.get("Current state", []))]
    return items


# -- budget ------------------------------------------------------------------------------

def _allocate(demand: dict[str, int], budget: int) -> dict[str, int]:
    """Split ``budget`` across sections by weight; sections that need less give the rest back."""
    alloc: dict[str, int] = {}
    open_ = {t for t, d in demand.items() if d > 0}
    left = budget
    while open_:
        total_w = sum(WEIGHTS[t] for t in open_)
        shares = {t: left * WEIGHTS[t] / total_w for t in open_}
        settled = {t for t in open_ if demand[t] <= shares[t]}
        if not settled:
            for t in sorted(open_, key=TITLES.index):
                alloc[t] = int(shares[t])
            break
        for t in settled:
            alloc[t] = demand[t]
            left -= demand[t]
        open_ -= settled
    return alloc


def _heading_words(title: str) -> int:
    return count_words(title) + 1  # "## " is a word too


def _select(items: list[Item], room: int, title: str) -> list[Item]:
    """Best-ranked items that fit in ``room`` words (heading included), in output order."""
    room -= _heading_words(title)
    chosen: list[Item] = []
    seen: set[str] = set()
    for it in sorted(items, key=lambda i: i.rank, reverse=True):
        key = it.key or it.text
        if key in seen:
            continue
        w = it.words()
        if w <= room:
            chosen.append(it)
            seen.add(key)
            room -= w
        elif room >= 8 or (not chosen and room >= 5):
            # Cut the item to the room left, unless only a useless stub would remain.
            cut = Item(truncate_words(it.text, room - 1), it.rank, it.order, key)
            chosen.append(cut)
            seen.add(key)
            room -= cut.words()
            break
        else:
            break
    return sorted(chosen, key=lambda i: i.order)


def _render(header: str, sections: dict[str, list[Item]], language: str = "en") -> str:
    words = _words(language)
    parts = [header]
    for title in TITLES:
        items = sections.get(title)
        if items:
            parts.append(f"## {words[title]}\n" + "\n".join(f"- {_localize_line(it.text, words)}" for it in items))
    return "\n\n".join(parts)


def summarize_text(conversation: str, previous_summary: str | None = None, max_words: int | None = None,
                   language: str = "en") -> str:
    """The extractive summary of a rendered transcript (see the module docstring)."""
    if max_words is None:
        max_words = DEFAULT_WORDS
    elif max_words <= 0:
        max_words = UNLIMITED_WORDS
    input_words = count_words(conversation, stop_at=2 * max_words + 1)
    if previous_summary:
        input_words += count_words(previous_summary, stop_at=2 * max_words + 1)
    budget = max(min(max_words, MIN_WORDS), min(max_words, input_words // 2))

    events = parse_transcript(conversation)
    prev_sections, prev_is_extractive = _parse_previous(previous_summary) if previous_summary else ({}, False)
    sections: dict[str, list[Item]] = {}
    if previous_summary and not prev_is_extractive:
        sections["Earlier summary"] = [Item(s, (0, -k), k) for k, s in enumerate(_sentences(previous_summary))]
    sections["User requests"] = _requests(events, prev_sections)
    sections["Decisions"] = _decisions(events, prev_sections)
    sections["Files and paths"] = _files(events, prev_sections)
    sections["Commands and outcomes"], sections["Errors"] = _commands(events, prev_sections)
    sections["Current state"] = _state(events, prev_sections)

    n_user = sum(1 for e in events if e.kind == "user")
    n_agent = sum(1 for e in events if e.kind == "assistant")
    n_calls = sum(1 for e in events if e.kind == "call")
    def header_in(lang: str) -> str:
        words = _words(lang)
        h = f"{words['label']}: " + words["counts"].format(users=n_user, agents=n_agent, calls=n_calls)
        return h + (words["folded"] if previous_summary else "") + "."

    # The budget arithmetic runs on the English rendering (a CJK heading would count one
    # "word" per character); the chosen items are then rendered in the policy's language.
    header = header_in("en")
    room = budget - count_words(header)
    if room <= 8:
        return truncate_words(header_in(language), budget)

    demand = {t: (sum(i.words() for i in its) + _heading_words(t) if its else 0) for t, its in sections.items()}
    for t in TITLES:
        demand.setdefault(t, 0)
    alloc = _allocate(demand, room)
    chosen = {t: _select(sections[t], alloc.get(t, 0), t) for t in sections if alloc.get(t, 0) > 0}
    # Words some sections could not use go to the sections that were cut, in section order.
    spare = room - sum(sum(i.words() for i in its) + _heading_words(t) for t, its in chosen.items() if its)
    if spare > 12:
        for t in TITLES:
            if t in sections and demand[t] > alloc.get(t, 0):
                used_before = sum(i.words() for i in chosen.get(t, [])) + (_heading_words(t) if chosen.get(t) else 0)
                extra = _select(sections[t], used_before + spare, t)
                used_after = sum(i.words() for i in extra) + (_heading_words(t) if extra else 0)
                chosen[t] = extra
                spare -= used_after - used_before
                if spare <= 12:
                    break
    text = _render(header, chosen)
    # Safety net: the heading/bullet arithmetic is exact, but never exceed the budget.
    if count_words(text) > budget:
        return truncate_words(text, budget)
    return text if language == "en" else _render(header_in(language), chosen, language)


# -- litellm provider ------------------------------------------------------------------------

def _make_handler_class(litellm):
    class ExtractiveLLM(litellm.CustomLLM):
        """litellm custom provider ``extractive``: deterministic extractive summaries."""

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any):
            meta = (kwargs.get("litellm_params") or {}).get("metadata") or {}
            conversation, previous, words = parse_request(messages)
            language = "en"
            if isinstance(meta, dict):
                if isinstance(meta.get("max_summary_words"), int):
                    words = meta["max_summary_words"]
                if isinstance(meta.get("language"), str):
                    language = meta["language"]
            text = summarize_text(conversation, previous, words, language)
            prompt_chars = sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else 0
                               for m in messages if isinstance(m, dict))
            prompt_tokens = math.ceil(prompt_chars / 4)
            completion_tokens = math.ceil(len(text) / 4)
            return litellm.ModelResponse(
                model=EXTRACTIVE_MODEL,
                choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                       "total_tokens": prompt_tokens + completion_tokens},
            )

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any):
            return self.completion(model, messages, *args, **kwargs)

    return ExtractiveLLM


def register(litellm=None) -> None:
    """Add the ``extractive`` provider to litellm's ``custom_provider_map`` (idempotent).

    Only our own entry is added; the rest of the map is left as it was.
    """
    if litellm is None:
        from .._env import litellm as _load  # noqa: PLC0415

        litellm = _load()
    if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
        handler = _make_handler_class(litellm)()
        litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": PROVIDER, "custom_handler": handler}]
    litellm.utils.custom_llm_setup()
