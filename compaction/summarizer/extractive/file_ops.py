"""What tool calls did to files: each touch read, created, edited, deleted or moved, with the
change in one line when the call shows it.

A call is judged by what it ran, never by its tool's name alone:

- **editor tools with a ``command``** (``str_replace_editor`` and kin): ``view`` reads;
  ``create`` creates; ``str_replace``, ``insert``, ``undo_edit`` edit. The same commands
  typed into a shell (``str_replace_editor view /app``) are read the same way;
- **file tools named by what they do**: ``Read``/``open``/``view_file`` read their path;
  ``Write``/``create``/``save`` create it (or rewrite a file seen before); ``Edit``,
  ``MultiEdit``, ``replace``, ``insert``, ``append`` edit it; ``delete``/``remove`` delete
  it; ``move``/``rename`` move it; ``apply_patch`` touches the files its patch names. A
  tool without a path argument (``TodoWrite``, a screenshot) touches no file, and search or
  listing tools (``Glob``, ``LS``, ``find_file``) only look. SWE-agent's ``edit`` and
  ``insert`` change the file last opened or created;
- **shell commands**, parsed into simple commands (quotes, ``&&``, pipes, here-documents):
  redirections and ``tee`` write their target; ``sed -i`` and ``perl -i`` edit the files
  after their expression (an expression is never a path); ``cp`` creates its target;
  ``mv`` moves; ``rm`` deletes; ``git apply``/``patch`` edit the files of their patch when
  the session wrote it; ``git checkout``/``restore`` of paths restores them; a Python
  script writes the files it ``open(..., "w")``s when its text is in the session;
  ``cat``, ``less``, ``head``, ``grep``, ``sed -n``, ``awk``, ``diff``... read.

Edits of a call whose result failed are dropped when the failing command is the edit
itself (a malformed patch, a ``str_replace`` that matched nothing). Everything is
deterministic and linear in the size of the calls.
"""
from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ... import jsontext
from ...identifiers import clean_path
from .words import squash

Action = Literal["read", "created", "edited", "deleted", "moved"]
ACTIONS: tuple[Action, ...] = ("read", "created", "edited", "deleted", "moved")
CHANGING: frozenset[str] = frozenset({"created", "edited", "deleted", "moved"})


@dataclass(frozen=True)
class Touch:
    """One thing a call did to one file."""

    path: str
    action: Action
    change: str = ""     # one line: "`old` → `new`", "`@@ -1,3 +1,4 @@` +2 −1", "+12 lines"
    via: str = ""        # the tool or shell program that did it ("sed", "Edit"...)


@dataclass
class _Call:
    touches: list[Touch] = field(default_factory=list)
    single: bool = True   # one simple command (its failure is the edit's failure)


_PATH_KEYS = ("path", "file_path", "filename", "file", "notebook_path", "target_file", "target", "dest")
_EDITOR_READ_COMMANDS = frozenset({"view", "read", "open", "show"})
_EDITOR_CREATE_COMMANDS = frozenset({"create", "write"})
_EDITOR_EDIT_COMMANDS = frozenset({"str_replace", "insert", "undo_edit", "edit", "append", "replace"})
# Tool names by what they do; checked on the name split into words ("write_file" -> write, file).
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_READ_WORDS = frozenset({"read", "view", "open", "cat", "show"})
_CREATE_WORDS = frozenset({"write", "create", "save"})
_EDIT_WORDS = frozenset({"edit", "multiedit", "replace", "insert", "append", "notebookedit", "patch", "modify", "update"})
_DELETE_WORDS = frozenset({"delete", "remove", "unlink"})
_MOVE_WORDS = frozenset({"move", "rename"})
_SEARCH_WORDS = frozenset({"glob", "ls", "list", "find", "search", "grep"})
_NOT_FILE_WORDS = frozenset({"todo", "plan", "memory", "screenshot", "task", "note", "notes"})
SHELL_KEYS = ("command", "cmd", "script")
_SHELL_NAMES = re.compile(r"^(?:bash|sh|shell|zsh|terminal|run|exec|execute|run_command|run_shell|"
                          r"execute_command|execute_bash|run_terminal_cmd|local_shell|container\.exec)$", re.I)
NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})

_HEREDOC = re.compile(r"<<-?[ \t]*(['\"]?)(\w+)\1([^\n]*)\n(.*?)\n[ \t]*\2[ \t]*(?=\n|$)", re.S)
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (\S+)|^\+\+\+ (?:b/)?(\S+)|^--- (?:a/)?(\S+)"
                         r"|^(@@ [^\n]*?@@|@@[^\n]*)|^\*\*\* Move to: (\S+)", re.M)
_PY_OPEN = re.compile(r"""\bopen\(\s*(?:([A-Za-z_]\w*)|[rbf]?(['"])([^'"\n]+)\2)\s*,\s*(?:mode\s*=\s*)?[rbf]?(['"])([^'"\n]*)\4""")
_PY_PATH_WRITE = re.compile(r"""\bPath\(\s*[rf]?(['"])([^'"\n]+)\1\s*\)\.write_(?:text|bytes)\(""")
_PY_ASSIGN = re.compile(r"""^\s*([A-Za-z_]\w*)\s*=\s*[rf]?(['"])([^'"\n]+)\2\s*$""", re.M)
_SWE_EDIT = re.compile(r"^edit\s+(\d+):(\d+)\s*\n(.*?)(?:\nend_of_edit\s*)?$", re.S)
_SWE_INSERT = re.compile(r"^insert\s+(\d+)\s*\n(.*?)(?:\nend_of_insert\s*)?$", re.S)
_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "\n", "(", ")", "|&", ";;"})
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "nice", "stdbuf"})
_READERS = frozenset("cat head tail less more nl wc bat view file stat xxd od hexdump strings md5sum sha1sum "
                     "sha256sum diff cmp sort uniq cut tac jq".split())
_GREPS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep"})
_PYTHONS = re.compile(r"^python(?:\d(?:\.\d+)?)?$")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_]\w*=")
MAX_COMMAND = 20000
_WHOLE_READERS = frozenset({"cat", "Read", "read_file", "view"})
_RESULT_TAGS = re.compile(r"<returncode>\s*-?\d+\s*</returncode>\s*|</?output>\n?")


def _json_object(args: str) -> dict[str, Any] | None:
    if not args.lstrip().startswith("{"):
        return None
    try:
        obj = jsontext.loads(args)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def snippet(text: str, words: int = 8, chars: int = 60) -> str:
    """A short one-line quote of code: its first non-blank line, backticks replaced so the
    quote can sit between backticks, cut to ``words`` words and about ``chars`` characters."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    line = squash(lines[0] if lines else "", words).replace("`", "'")
    if len(line) > chars:
        line = line[:chars].rstrip() + "…"
    elif len(lines) > 1 and not line.endswith("…"):
        line += " …"
    return line


def replacement(old: str, new: str) -> str:
    """``old`` → ``new`` as one line, from the first line that differs (an edit that keeps
    its first lines of context says what it changed, not what it kept); ``+N`` when nothing
    was replaced."""
    a, b = old.splitlines(), new.splitlines()
    while a and b and a[0].strip() == b[0].strip():
        a, b = a[1:], b[1:]
    while a and b and a[-1].strip() == b[-1].strip():
        a, b = a[:-1], b[:-1]
    gone, added = "\n".join(a), "\n".join(b)
    if not gone.strip():
        return _lines(_line_count(added))
    return f"`{snippet(gone)}` → `{snippet(added)}`" if added.strip() else f"`{snippet(gone)}` removed"


def _lines(n: int) -> str:
    # "+12", not "+12 lines": a count with its noun is an identifier the next summary must carry
    return f"+{n}"


def _line_count(text: str) -> int:
    return len(text.splitlines()) if text else 0


def patch_touches(text: str, via: str) -> list[Touch]:
    """The files a unified diff or an ``apply_patch`` envelope changes, each with its first
    hunk header and the lines it adds and removes."""
    files: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    old_path: str | None = None
    for line in text[:200_000].splitlines():
        m = _PATCH_FILE.match(line)
        if m:
            if m.group(1):                   # *** Add/Update/Delete File: path
                current = files.setdefault(m.group(2), {"action": {"Add": "created", "Delete": "deleted"}
                                                        .get(m.group(1), "edited"), "hunk": "", "add": 0, "del": 0})
                continue
            if m.group(4) is not None:       # --- a/path
                old_path = m.group(4)
                continue
            if m.group(3) is not None:       # +++ b/path
                path = m.group(3)
                if path == "/dev/null" and old_path:
                    current = files.setdefault(old_path, {"action": "deleted", "hunk": "", "add": 0, "del": 0})
                else:
                    action = "created" if old_path == "/dev/null" else "edited"
                    current = files.setdefault(path, {"action": action, "hunk": "", "add": 0, "del": 0})
                continue
            if m.group(5) and current is not None:
                if m.group(5).strip(" @"):     # a bare "@@" (apply_patch) says nothing
                    current["hunk"] = current["hunk"] or squash(m.group(5), 12)
                continue
            if m.group(6) and current is not None:
                current["moved_to"] = m.group(6)
                continue
        if current is None:
            continue
        if line.startswith("+") and not line.startswith("+++"):
            current["add"] += 1
        elif line.startswith("-") and not line.startswith("---"):
            current["del"] += 1
    out: list[Touch] = []
    for path, f in files.items():
        p = clean_path(path, named=True)
        if not p or p in NOT_FILES:
            continue
        counts = f"+{f['add']} −{f['del']}"
        if f.get("moved_to"):
            out.append(Touch(p, "moved", f"→ `{f['moved_to']}`", via))
            continue
        change = f"`{f['hunk']}` {counts}" if f["hunk"] else (counts if f["add"] or f["del"] else "")
        out.append(Touch(p, f["action"], change, via))
    return out


def python_writes(code: str) -> list[str]:
    """Files a Python text opens for writing (string literal paths, or names assigned one)."""
    names = {m.group(1): m.group(3) for m in _PY_ASSIGN.finditer(code[:200_000])}
    found: list[str] = []
    for m in _PY_OPEN.finditer(code[:200_000]):
        mode = m.group(5)
        if not any(c in mode for c in "wax+"):
            continue
        path = m.group(3) if m.group(3) else names.get(m.group(1) or "")
        if path and path not in found:
            found.append(path)
    for m in _PY_PATH_WRITE.finditer(code[:200_000]):
        if m.group(2) not in found:
            found.append(m.group(2))
    return [p for p in (clean_path(x, named=True) for x in found) if p and p not in NOT_FILES]


class FileTracker:
    """Reads the calls of a span in order. It remembers the file SWE-agent's editor has open
    and the text of files the span wrote whole, so a patch or a script run later is read."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.written: dict[str, str] = {}   # path -> its whole text, as last written or shown whole

    def saw(self, touches: list[Touch], result: str) -> None:
        """A call's result: the text of a file shown whole (``cat file``, an editor's view) is
        what a later rewrite of that file is compared with."""
        whole = [t for t in touches if t.action == "read" and t.via in _WHOLE_READERS]
        if len(whole) == 1 and len(touches) == 1:
            self.written[whole[0].path] = _RESULT_TAGS.sub("", result)

    def touches(self, name: str, args: str, failed: bool = False) -> list[Touch]:
        """The touches of one call (``failed``: its result reports a failure)."""
        call = self._classify(name or "", args or "")
        if failed and call.single:
            # The failing command was the edit itself: nothing changed.
            return [t for t in call.touches if t.action == "read"]
        return call.touches

    def _whole(self, path: str, text: str) -> str:
        """The change of writing ``text`` as the whole of ``path``: its size when the file is new
        to the span, else the first changed lines and the counts of lines added and removed."""
        before = self.written.get(path)
        self.written[path] = text
        if not text or not before:
            return ""   # a new file: its whole text is the change, too long for a line
        old, new = before.splitlines()[:4000], text.splitlines()[:4000]
        added = removed = 0
        first: tuple[str, str] | None = None
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            removed, added = removed + i2 - i1, added + j2 - j1
            if first is None:
                first = ("\n".join(old[i1:i2]), "\n".join(new[j1:j2]))
        if first is None:
            return "unchanged"
        return f"{replacement(*first)} +{added} −{removed}" if first[0].strip() else f"+{added} −{removed}"

    # -- tools ---------------------------------------------------------------------------
    def _classify(self, name: str, args: str) -> _Call:
        obj = _json_object(args)
        words = {w.lower() for w in _NAME_WORDS.findall(name)} | {name.lower()}
        command = obj.get("command") if obj is not None else None
        paths = [p for p in (clean_path(v, named=True) for v in _strings(obj, _PATH_KEYS)) if p] if obj else []
        if obj is not None and isinstance(command, str) and paths and not _SHELL_NAMES.match(name):
            return _Call(self._editor(command, paths[0], obj, name))
        if obj is not None and not _SHELL_NAMES.match(name) and not (words & _NOT_FILE_WORDS):
            tool = self._file_tool(words, name, paths, obj)
            if tool is not None:
                return _Call(tool)
        shell = _shell_text(obj, args) if (_SHELL_NAMES.match(name) or obj is None or _strings(obj, SHELL_KEYS)) else ""
        if shell:
            return self._shell(shell)
        return _Call([])

    def _editor(self, command: str, path: str, obj: dict[str, Any], via: str) -> list[Touch]:
        if command in _EDITOR_READ_COMMANDS:
            self.current = path
            return [Touch(path, "read", "", via)]
        if command in _EDITOR_CREATE_COMMANDS:
            self.current = path
            return [Touch(path, "created", self._whole(path, _text(obj, ("file_text", "content", "text"))), via)]
        if command == "insert":
            text = _text(obj, ("new_str", "text", "insert_text"))
            line = obj.get("insert_line")
            where = f" at line {line}" if isinstance(line, int) else ""
            return [Touch(path, "edited", f"{_lines(_line_count(text))}{where}", via)]
        if command == "undo_edit":
            return [Touch(path, "edited", "undo", via)]
        if command in _EDITOR_EDIT_COMMANDS:
            return [Touch(path, "edited", replacement(_text(obj, ("old_str", "old_string")),
                                                      _text(obj, ("new_str", "new_string"))), via)]
        return []

    def _file_tool(self, words: set[str], name: str, paths: list[str], obj: dict[str, Any]) -> list[Touch] | None:
        """Touches of a tool named by what it does; None when the name says nothing about files."""
        patch = _text(obj, ("patch", "diff")) or (_text(obj, ("input",)) if "patch" in words else "")
        if patch and ("patch" in words or "apply" in words):
            return patch_touches(patch, name)
        if words & _MOVE_WORDS:
            dest = next((clean_path(v, named=True) for v in _strings(obj, ("destination", "new_path", "target_path",
                                                                           "to", "dest"))), None)
            src = next((clean_path(v, named=True) for v in _strings(obj, ("source", "old_path", "from", "path",
                                                                          "file_path"))), None)
            return [Touch(src, "moved", f"→ `{dest}`" if dest else "", name)] if src else []
        if words & _DELETE_WORDS:
            return [Touch(p, "deleted", "", name) for p in paths]
        if words & _EDIT_WORDS:
            if not paths and self.current and words & {"edit", "insert"}:
                paths = [self.current]    # SWE-agent: edit/insert act on the open file
            edits = obj.get("edits")
            if isinstance(edits, list) and edits and all(isinstance(e, dict) for e in edits):
                first = replacement(_text(edits[0], ("old_string", "old_str")), _text(edits[0], ("new_string", "new_str")))
                change = f"{len(edits)} edits; {first}" if len(edits) > 1 else first
            elif "search" in obj or "old_string" in obj or "old_str" in obj:
                change = replacement(_text(obj, ("old_string", "old_str", "search")),
                                     _text(obj, ("new_string", "new_str", "replace")))
            else:
                change = _lines(_line_count(_text(obj, ('text', 'content', 'new_str'))))
            return [Touch(p, "edited", change, name) for p in paths]
        if words & _CREATE_WORDS:
            text = _text(obj, ("content", "file_text", "text", "contents"))
            if paths:
                self.current = paths[0]
            return [Touch(p, "created", self._whole(p, text), name) for p in paths]
        if words & _READ_WORDS:
            if paths:
                self.current = paths[0]
            return [Touch(p, "read", "", name) for p in paths]
        if words & _SEARCH_WORDS:
            return []
        return None

    # -- shell ---------------------------------------------------------------------------
    def _shell(self, command: str) -> _Call:
        command = command[:MAX_COMMAND]
        swe = self._swe_editor(command)
        if swe is not None:
            return _Call(swe)
        bodies: list[str] = []

        def keep_opener(m: re.Match[str]) -> str:
            bodies.append(m.group(4))
            return f"<< {m.group(2)}{m.group(3)}"

        text = _HEREDOC.sub(keep_opener, command)
        segments = _segments(text)
        out: list[Touch] = []
        heredoc = iter(bodies)
        for words, redirects in segments:
            out.extend(self._simple(words, redirects, heredoc))
        # "cd dir && patch ..." is one command as far as failing goes
        acting = [w for w, r in segments if r or (w and w[0] not in ("cd", "export", "set", "source", "."))]
        return _Call(_dedupe(out), single=len(acting) <= 1)

    def _swe_editor(self, command: str) -> list[Touch] | None:
        """SWE-agent's editor commands typed into its shell (``edit 12:14`` + text, ``open``...)."""
        m = _SWE_EDIT.match(command)
        if m:
            if not self.current:
                return []
            new = m.group(3)
            first, last = int(m.group(1)), int(m.group(2))
            span = f"line {first}" if first == last else f"lines {first}-{last}"
            return [Touch(self.current, "edited", f"{span} → `{snippet(new)}`", "edit")]
        m = _SWE_INSERT.match(command)
        if m:
            return [Touch(self.current, "edited", f"{_lines(_line_count(m.group(2)))} at line {m.group(1)}",
                          "insert")] if self.current else []
        return None

    def _simple(self, words: list[str], redirects: list[tuple[str, str]], heredoc: Iterable[str]) -> list[Touch]:
        out: list[Touch] = []
        body: str | None = None
        stdin: str | None = None
        for op, target in redirects:
            if op.startswith("<<") and op != "<<<":
                body = next(iter(heredoc), None)
            elif op == "<":
                stdin = clean_path(target, named=True)
        while words and (_ENV_ASSIGN.match(words[0]) or words[0] in _WRAPPERS):
            words = words[1:]
        if words and words[0] == "timeout" and len(words) > 2:
            words = words[2:]
        prog = words[0].rsplit("/", 1)[-1] if words else ""
        args = words[1:]
        for op, target in redirects:
            if ">" not in op or op.startswith(">&") and target.isdigit():
                continue
            p = clean_path(target, named=True) if _plain(target) else None
            if not p or p in NOT_FILES:
                continue
            if op.endswith(">>"):
                out.append(Touch(p, "edited", "appended", ">>"))
            else:
                change = self._whole(p, body) if body is not None else ""
                out.append(Touch(p, "created", change, ">"))
        if not prog or prog.startswith("#"):
            return out
        out.extend(self._program(prog, args, body, stdin))
        return out

    def _program(self, prog: str, args: list[str], body: str | None, stdin: str | None) -> list[Touch]:
        if prog in _READERS:
            return [Touch(p, "read", "", prog) for p in _operands(args)]
        if prog in _GREPS:
            return [Touch(p, "read", "", prog) for p in _grep_files(args)]
        if prog == "sed":
            return _sed(args)
        if prog == "perl":
            return _perl(args)
        if prog in ("awk", "gawk", "mawk"):
            return [Touch(p, "read", "", prog) for p in _awk_files(args)]
        if prog == "tee":
            append = any(a in ("-a", "--append") for a in args)
            return [Touch(p, "edited" if append else "created", "appended" if append else "", "tee")
                    for p in _operands(args)]
        if prog in ("cp", "mv"):
            ops = _operands(args, dirs=True)
            if len(ops) < 2:
                return []
            *sources, dest = ops
            if prog == "cp":
                target = dest + sources[-1].rsplit("/", 1)[-1] if dest.endswith("/") else dest
                return [Touch(target, "created", f"copy of `{sources[-1]}`", "cp")]
            return [Touch(s, "moved", f"→ `{dest}`", "mv") for s in sources]
        if prog == "rm":
            return [Touch(p, "deleted", "", "rm") for p in _operands(args, dirs=True)]
        if prog == "touch":
            return [Touch(p, "created", "", "touch") for p in _operands(args)]
        if prog == "git":
            return self._git(args)
        if prog == "patch":
            source = stdin or next((a for a in _operands(args) if a.endswith((".patch", ".diff"))), None)
            return self._apply(source, body, "patch")
        if _PYTHONS.match(prog):
            return self._python(args, body)
        if prog in ("open", "goto") and args:
            p = clean_path(args[0], named=True)
            if p:
                self.current = p
                return [Touch(p, "read", "", prog)]
            return []
        if prog == "create" and args:
            p = clean_path(args[0], named=True)
            if p:
                self.current = p
                self.written[p] = ""
                return [Touch(p, "created", "", prog)]
            return []
        if prog in ("str_replace_editor", "str_replace_based_edit_tool") and len(args) >= 2:
            p = clean_path(args[1], named=True)
            if not p:
                return []
            opts = _options(args[2:])
            obj = {"old_str": opts.get("--old_str", ""), "new_str": opts.get("--new_str", ""),
                   "file_text": opts.get("--file_text", ""), "insert_line": _int(opts.get("--insert_line"))}
            return self._editor(args[0], p, obj, prog)
        return []

    def _git(self, args: list[str]) -> list[Touch]:
        while len(args) >= 2 and args[0] in ("-C", "-c"):
            args = args[2:]
        if not args:
            return []
        sub, rest = args[0], args[1:]
        if sub in ("apply", "am"):
            if "--check" in rest or "--stat" in rest:
                return []
            return self._apply(next(iter(_operands(rest)), None), None, "git " + sub)
        if sub in ("checkout", "restore"):
            paths = rest[rest.index("--") + 1:] if "--" in rest else [a for a in rest if "/" in a or "." in a]
            return [Touch(p, "edited", "restored from git", "git " + sub) for p in _operands(paths)]
        if sub == "rm":
            return [Touch(p, "deleted", "", "git rm") for p in _operands(rest, dirs=True)]
        if sub == "mv":
            ops = _operands(rest, dirs=True)
            return [Touch(s, "moved", f"→ `{ops[-1]}`", "git mv") for s in ops[:-1]] if len(ops) >= 2 else []
        return []

    def _apply(self, source: str | None, body: str | None, via: str) -> list[Touch]:
        text = body if body is not None else self.written.get(source or "")
        touches = patch_touches(text, via) if text else []
        if not touches and source:
            return [Touch(source, "read", "", via)]
        return touches

    def _python(self, args: list[str], body: str | None) -> list[Touch]:
        code: str | None = None
        via = "python"
        if "-c" in args and args.index("-c") + 1 < len(args):
            code = args[args.index("-c") + 1]
        elif body is not None:
            code = body
        elif args and not args[0].startswith("-"):
            script = clean_path(args[0], named=True)
            code = self.written.get(script or "")
            via = f"python {script}"
        if not code:
            return []
        return [Touch(p, "edited", f"via `{via}`" if via != "python" else "by a Python script", via)
                for p in python_writes(code)]


# -- shell parsing ---------------------------------------------------------------------------

def programs(command: str) -> list[str]:
    """The programs a shell command runs, in order (``cd``, ``sed``, ``python``...), as this
    module reads it: here-documents are file text, not commands."""
    if _SWE_EDIT.match(command) or _SWE_INSERT.match(command):
        return [command.split(None, 1)[0]]
    found: list[str] = []
    for words, _ in _segments(_HEREDOC.sub(lambda m: f"<< {m.group(2)}{m.group(3)}", command[:MAX_COMMAND])):
        while words and (_ENV_ASSIGN.match(words[0]) or words[0] in _WRAPPERS):
            words = words[1:]
        if words and words[0] == "timeout" and len(words) > 2:
            words = words[2:]
        if words and not words[0].startswith("#"):
            found.append(words[0].rsplit("/", 1)[-1])
    return found


def _shell_text(obj: dict[str, Any] | None, args: str) -> str:
    if obj is None:
        return args
    return next(iter(_strings(obj, SHELL_KEYS)), "")


def _strings(obj: dict[str, Any] | None, keys: Iterable[str]) -> list[str]:
    return [v for k in keys if isinstance(v := (obj or {}).get(k), str)]


def _text(obj: dict[str, Any], keys: Iterable[str]) -> str:
    return next(iter(_strings(obj, keys)), "")


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _tokens(text: str) -> list[str]:
    lex = shlex.shlex(text, posix=True, punctuation_chars=";&|<>()\n")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = ""
    try:
        return list(lex)
    except ValueError:
        # An unbalanced quote: cut at quotes and whitespace instead (quoted text dropped).
        return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", " ", text).replace("&&", " && ").replace("|", " | ").replace(
            ";", " ; ").replace(">", " > ").replace("<", " < ").split(" ")


def _segments(text: str) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """Simple commands: (words, [(redirection operator, target)])."""
    out: list[tuple[list[str], list[tuple[str, str]]]] = []
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    tokens = [t for t in _tokens(text) if t != ""]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _OPERATORS or (tok and set(tok) <= set(";&|()\n") and tok not in ("&>",)):
            if words or redirects:
                out.append((words, redirects))
            words, redirects = [], []
        elif tok and set(tok) <= set("<>&|") and ("<" in tok or ">" in tok):
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if words and words[-1].isdigit():
                words.pop()             # "2>" : the descriptor, not an argument
            redirects.append((tok, target))
            i += 1
        else:
            words.append(tok)
        i += 1
    if words or redirects:
        out.append((words, redirects))
    return out


def _plain(word: str) -> bool:
    """A literal word: no expansion, glob or substitution to resolve."""
    return not any(c in word for c in "$*?{}[]`") and not word.startswith("-")


def _operands(args: list[str], dirs: bool = False) -> list[str]:
    """The file operands of a command: literal words that are not options or numbers."""
    out: list[str] = []
    for a in args:
        if not a or a.startswith(("-", "+", "%")) or a.isdigit() or not _plain(a) or a == "--" \
                or any(c.isspace() for c in a):
            continue   # options, numbers, formats ("%Y %n"), quoted phrases: not files
        p = clean_path(a, named=True) or (a if dirs and a.endswith("/") and a.strip("/.") else None)
        if p and p not in NOT_FILES and (dirs or not p.endswith("/")) and p not in out:
            out.append(p)
    return out


def _options(args: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    for i, a in enumerate(args):
        if a.startswith("--") and i + 1 < len(args):
            opts[a] = args[i + 1]
    return opts


_GREP_VALUE_OPTS = frozenset({"-A", "-B", "-C", "-m", "-d", "-D", "--max-count", "--context", "-g", "--glob",
                              "-t", "--type", "--include", "--exclude"})


def _grep_files(args: list[str]) -> list[str]:
    pattern_given = False
    rest: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-e", "--regexp", "-f", "--file"):
            pattern_given, skip = True, True
            continue
        if a in _GREP_VALUE_OPTS:
            skip = True
            continue
        if a.startswith("-") and a != "-":
            continue
        rest.append(a)
    if not pattern_given and rest:
        rest = rest[1:]
    return _operands(rest)


def _script_and_files(args: list[str], script_flags: str) -> tuple[list[str], list[str], bool]:
    """(scripts, file operands, in-place?) of sed- or perl-like arguments: the expression
    (the first operand, or each ``-e`` value) is never taken for a file."""
    scripts: list[str] = []
    files: list[str] = []
    in_place = False
    take_next = False
    for a in args:
        if take_next:
            scripts.append(a)
            take_next = False
        elif a.startswith("--"):
            in_place = in_place or a.startswith("--in-place")
            if a.startswith("--expression="):
                scripts.append(a.split("=", 1)[1])
            take_next = a in ("--expression", "--file")
        elif a.startswith("-") and len(a) > 1:
            letters = a[1:].split(".", 1)[0]      # "-i.bak": in place, with a backup suffix
            in_place = in_place or "i" in letters
            take_next = letters[-1:] in script_flags
        elif not scripts:
            scripts.append(a)
        else:
            files.append(a)
    return scripts, _operands(files), in_place


def _sed(args: list[str]) -> list[Touch]:
    scripts, files, in_place = _script_and_files(args, "ef")
    if in_place:
        change = "; ".join(f"`{snippet(s, 12, 80)}`" for s in scripts[:2])
        return [Touch(p, "edited", change, "sed -i") for p in files]
    return [Touch(p, "read", "", "sed") for p in files]


def _perl(args: list[str]) -> list[Touch]:
    scripts, files, in_place = _script_and_files(args, "eE")
    if in_place:
        return [Touch(p, "edited", f"`{snippet(scripts[0], 12, 80)}`" if scripts else "", "perl -i") for p in files]
    return []


def _awk_files(args: list[str]) -> list[str]:
    rest: list[str] = []
    skip = False
    program_given = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-f", "-v", "-F"):
            skip = True
            program_given = program_given or a == "-f"
            continue
        if a.startswith("-"):
            continue
        rest.append(a)
    return _operands(rest if program_given else rest[1:])


def _dedupe(touches: list[Touch]) -> list[Touch]:
    seen: set[tuple[str, str]] = set()
    out: list[Touch] = []
    for t in touches:
        if (t.path, t.action) not in seen:
            seen.add((t.path, t.action))
            out.append(t)
    return out
