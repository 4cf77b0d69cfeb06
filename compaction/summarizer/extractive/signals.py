"""What the extractive summary looks for in a transcript, and what it finds there.

Each detector is a regular expression or a small scan over text, linear in its size:

- the shell text of a call (:func:`shell_command`); what a call does to files is read by
  :mod:`.file_ops`; paths and URLs in text are found by
  :func:`compaction.identifiers.find_paths`, the rule the retention score uses too;
- placeholder paths of instructions and examples (``PLACEHOLDER_PATH``);
- what a call runs, so two runs of one command can be compared (:func:`call_signature`);
- the outcome of a tool result (:func:`outcome_of`: exit status, error line or first
  line of output) and its exception lines (:func:`exception_lines`);
- sentences that carry a user's constraint, an agent's decision or its plan
  (``CONSTRAINT``, ``DECISION``, ``STRONG_DECISION``, ``PLAN``, ``LOOKING``);
- a one-line description of a tool call (:func:`describe_call`).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache, lru_cache
from typing import Any

from ... import jsontext
from ...locales import available, section
from .words import squash

_EDITOR_KEYS = ("path", "file_path", "filename", "file", "notebook_path", "target", "target_file", "dest")
_HEREDOC = re.compile(r"(<<-?\s*['\"]?(\w+)['\"]?[^\n]*)\n.*?\n\2[ \t]*(?=\n|$)", re.DOTALL)
# The "command" of editor-style tools (str_replace_editor and kin) that writes or reads the file in "path".
_EDITOR_COMMANDS = ("create", "str_replace", "insert", "write", "edit", "undo_edit", "append")
_READ_COMMANDS = ("view", "read", "open", "show")
_SEGMENT = re.compile(r"\s*(?:&&|\|\||;|\||\n)\s*")


# Several detectors in a row (what a call changes, reads, runs...) start from the same call's
# arguments: the last few parses are kept so each call is decoded once, not five times.
# The cache is keyed on the text itself; callers only read the object it returns.
_RECENT_CALLS = 8


@lru_cache(maxsize=_RECENT_CALLS)
def _json_object(args: str) -> dict[str, Any] | None:
    """Tool-call arguments as a JSON object, or None when they are not one (shared: do not change it)."""
    try:
        obj = jsontext.loads(args) if args.strip().startswith("{") else None
    except ValueError:  # not JSON, or nested deeper than jsontext.MAX_DEPTH
        return None
    return obj if isinstance(obj, dict) else None


def _strings(obj: dict[str, Any], keys: Iterable[str]) -> list[str]:
    return [v for k in keys if isinstance(v := obj.get(k), str)]


@lru_cache(maxsize=_RECENT_CALLS)
def shell_command(args: str) -> str:
    """The shell text of a call's arguments: the ``command``-like value of a JSON object, or
    the raw arguments; here-document bodies are dropped (file content, not shell)."""
    obj = _json_object(args)
    command = args if obj is None else next(iter(_strings(obj, ("command", "cmd", "script"))), "")
    return _HEREDOC.sub(r"\1", command[:20000])


_CD = re.compile(r"^\s*cd\s+\S+\s*$")
_REDIRECT = re.compile(r"\s*\d?>&?\d?\s*\S*$|\s*2>&1")


def call_signature(name: str, args: str) -> str:
    """What a call runs, independent of how it was dressed up: the first shell command that is
    not a ``cd`` (without its redirections, at most three words), or the tool and its path.
    Two calls with one signature run the same thing: a failure of the first is fixed when
    the second succeeds."""
    obj = _json_object(args)
    if obj is not None and not _strings(obj, ("command", "cmd", "script")):
        path = next(iter(_strings(obj, _EDITOR_KEYS)), "")
        return f"{name} {path}".strip()
    if obj is not None and obj.get("command") in _EDITOR_COMMANDS + _READ_COMMANDS:
        return f"{name} {obj.get('command')} {next(iter(_strings(obj, _EDITOR_KEYS)), '')}".strip()
    for segment in _SEGMENT.split(shell_command(args)):
        if segment.strip() and not _CD.match(segment):
            words = _REDIRECT.sub("", segment).split()
            return " ".join(words[:3])
    return name


# A sed or perl substitution ("s/old/new/g", or its start "s/self.config.x") looks like a path.
SUBSTITUTION = re.compile(r"^[sy]/")

# Paths that only stand for a path in instructions or examples ("/path/to/working/dir",
# "path/to/file1", "filename.py", "your_script.py"): never a file of this session.
PLACEHOLDER_PATH = re.compile(
    r"(?:^|[/\\])(?:path[/\\]to|to[/\\]your|your[_-]?\w*|my[_-]\w+|some[_-]?\w*|example[_-]?\w*)(?:[/\\.]|$)"
    r"|(?:^|[/\\])(?:file(?:name)?\d*|foo|bar|baz)\.\w+$|<[^>]*>|\{[^}]*\}|YYYY|XXX|\.\.\.",
    re.I)

EXIT_STATUS = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"
                 r"|\b(?:exit(?:ed)?(?: with)?(?: status| code)?|return ?code|exit_code|status code)\s*[:=]?\s*(-?\d+)\b",
                 re.I)
_EXC_LINE = re.compile(
    r"^(?:E\s+)?((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure|Fault|Exit|Interrupt|Warning|Denied|Timeout|"
    r"NotFound|Invalid|Configured))\b(?::[ \t]*([^\n]*))?[ \t]*$",
    re.MULTILINE)
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):", re.MULTILINE)
# A test runner's closing tally ("==== 1 failed, 3 passed in 0.18s ====", "Ran 4 tests in
# 0.01s", "FAILED (failures=1)", "Tests: 1 failed, 2 passed", "test result: FAILED."): the
# result of a run, never an error of its own.
RESULT_LINE = re.compile(
    r"^[=\-_ ]*(?:\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?|rerun)\b[^\n]*"
    r"|no tests ran\b[^\n]*)\bin [\d.]+\s*(?:s|sec|seconds)\b[^\n]*$"
    r"|^Ran \d+ tests? in [\d.]+s$|^(?:FAILED|OK) \([^)\n]*\)$|^OK$"
    r"|^Tests?:\s+\d+ (?:failed|passed)[^\n]*$|^test result: (?:FAILED|ok)\.[^\n]*$"
    r"|^(?:FAIL|ok)\s+\S+\s+[\d.]+s$", re.I)
# The short summary lines of a test run that name the test that failed.
TEST_FAILURE = re.compile(r"^(?:FAILED|ERROR) \S+::\S+[^\n]*|^(?:FAIL|ERROR): \w+ \([^)\n]+\)[^\n]*", re.M)
_FAIL_LINE = re.compile(r"^(?:FAILED|FAIL:|ERROR:|error:|fatal:|Error:|npm ERR!|panic:)[^\n]*", re.MULTILINE)


class Phrases:
    """Phrases that mark a kind of sentence: English ones, matched in any letter case, and
    phrases of other languages. ``found_in(text)`` says whether ``text`` holds one.

    Nearly every sentence is plain ASCII: it is lower-cased and searched for the English
    phrases without IGNORECASE, which finds the same phrases (no other language's phrase
    can be in it) about four times faster than the case-insensitive pattern.
    """

    def __init__(self, english: str, others: str):
        if english != english.lower():
            raise ValueError("write the English phrases in lower case")
        self.pattern = re.compile(f"{english}|{others}", re.I)
        self._english_lower = re.compile(english)

    def found_in(self, text: str) -> bool:
        if text.isascii():
            return self._english_lower.search(text.lower()) is not None
        return self.pattern.search(text) is not None


CONSTRAINT = Phrases(
    r"\b(?:must|mustn't|should(?:n't| not)?|do not|don't|never|always|only|without|make sure|ensure|"
    r"required?|need(?:s)? to|please|avoid|keep)\b",
    r"不要|必须|务必|请|只能|禁止|してください|しないで|必ず|하지 마|반드시")
DECISION = Phrases(
    r"\b(?:i will|i'll|i am going to|i'm going to|let's|let us|we will|we'll|we should|decided?|because|instead|"
    r"so that|root cause|the (?:issue|problem|bug|fix) (?:is|was)|the fix|this means|which means|therefore)\b",
    r"因为|所以|决定|我将|我会|原因|ので|ため|することにし|때문에|하겠습니다|결정")
STRONG_DECISION = Phrases(
    r"\b(?:because|decided?|instead|root cause|the (?:issue|problem|bug|fix) (?:is|was)|the fix|therefore|"
    r"this means|which means)\b",
    r"因为|决定|原因|ため|때문에|결정")
# A sentence saying what the agent is about to do: the "next step" when it is the last one.
PLAN = Phrases(
    r"\b(?:let me|let's|let us|i'll|i will|i need to|i should|i'm going to|i am going to|next,? i|now i|"
    r"we need to|we should|the next step|then i|i'm about to)\b",
    r"接下来|下一步|我将|我会|我要|然后|次に|してみます|します|겠습니다|다음으로")
# Openings of sentences that only announce looking at something: plans, never decisions.
LOOKING = re.compile(
    r"^(?:now,? |first,? |ok(?:ay)?,? |great[,!]? |good[,!]? )?(?:let me|let's|let us|i'll|i will|i need to|i should)\s+"
    r"(?:now\s+|first\s+|also\s+)?(?:look|check|see|view|examine|explore|search|find|run|start|think|understand|"
    r"read|open|inspect|investigate|verify|test|try|look at|check out|take a look)\b",
    re.I)
NOTE = re.compile(r"^\[[^\]\n]{0,200}\]$")
# What an agent harness writes into the user turn on its own: format reminders, tool-call
# error notices, IDE and local-command wrappers. Never a request of the user's.
HARNESS = re.compile(
    r"^\s*(?:Please always provide EXACTLY ONE action"
    r"|Please (?:always )?(?:format|provide|use|include|make sure)\b[^\n]{0,160}?"
    r"\b(?:actions?|format(?:ted)?|backticks|tool calls?|function calls?|THOUGHT)\b"
    r"|Your (?:last |previous )?(?:output|response|reply|message) (?:was not|did not|didn't|must|should|has to)"
    r"|Tool call error\b|No (?:tool|function) calls? (?:found|detected)"
    r"|You (?:must|should) (?:always )?(?:call|use|provide) (?:a|one|exactly one) (?:tool|action)"
    r"|<local-command-(?:caveat|stdout|stderr)>|<ide_(?:opened_file|selection)>|<system-reminder>"
    r"|Caveat: The messages below were generated)",
    re.I)
BULLET = re.compile(r"^(?:[-*•>]+|\d{1,3}[.)])\s+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
# The same cuts in a text without "。！？": each starts with a whitespace character, and a
# pattern that starts with one lets the regex engine skip the text between cuts.
_SENTENCE_NO_CJK_STOP = re.compile(r"\s(?:(?<=[.!?]\s)\s*|(?<=\n)\n*)")
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


@cache
def _placeholder_openings() -> tuple[str, ...]:
    """How the engine's own placeholders for a cleared tool result begin, in every language."""
    out: list[str] = []
    for lang in available():
        texts = section("REDUCTION", lang)
        for key in ("cleared_placeholder", "force_cleaned_placeholder"):
            opening = texts[key].split("{", 1)[0].strip()
            if len(opening) >= 8:
                out.append(opening)
    return tuple(out)


#: Characters an outcome line may take per word of its budget: ordinary text averages about
#: six, so only unbroken runs (base64, minified code) are cut
OUTCOME_CHARS_PER_WORD = 8


def outcome_of(result: str, errors: list[str] | None = None) -> tuple[bool, str]:
    """(failed?, short outcome text) of a tool result (``errors``: its exception lines, if known).
    A result the engine already cleared says only that: its placeholder is not the output."""
    if result.startswith(_placeholder_openings()):
        return False, "ran (output archived)"
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
        return True, f"exit {code}" + (f": {squash(detail, 30, 30 * OUTCOME_CHARS_PER_WORD)}" if detail else "")
    if errors and code is None:
        return True, f"error: {squash(errors[-1], 30, 30 * OUTCOME_CHARS_PER_WORD)}"
    first = _first_meaningful_line(result)
    prefix = "exit 0" if code == 0 else "ok"
    if not first:
        return False, prefix + " (no output)"
    return False, f"{prefix}: {squash(first, 18, 18 * OUTCOME_CHARS_PER_WORD)}"



def sentences(text: str) -> list[str]:
    cjk_stop = "。" in text or "！" in text or "？" in text
    pieces = (_SENTENCE if cjk_stop else _SENTENCE_NO_CJK_STOP).split(text)
    return [s.strip() for s in pieces if s and s.strip()]

