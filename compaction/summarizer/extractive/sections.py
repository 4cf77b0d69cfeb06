"""The summary's sections, each a list of ranked items built from the transcript.

- **Task and constraints**: the task as first stated (short), or a pointer to it when the
  context keeps the task message word for word right after the summary; later requests
  and the latest one, and sentences that carry constraints ("must", "do not", "only"...)
  unless a kept message holds them; a constraint that introduces the exact command to run
  ("You MUST use this EXACT command to submit:" and a fenced block) carries that command. Harness boilerplate is no request: notes such as
  "[Request interrupted by user]", format reminders and wrappers (``HARNESS``), messages
  repeated word for word, and nudges of one shape repeated more than twice;
- **Files edited**: files a call created, edited, deleted or moved (read from what it ran,
  see :mod:`.file_ops`), how often, and the last change a call showed in one line;
- **Files read**: files a call read without changing them (an editor's ``view``,
  ``cat``/``grep``/``sed -n``...);
- **Other paths**: other paths and URLs the agent wrote or a call named, then those
  only seen in tool output: the best ranked few one per line, the rest (a listing's
  hundreds of names) counted by folder with a few examples. A path that only the instructions name (never a call, a
  result or the agent) is left out, and so is a placeholder such as
  ``/path/to/working/dir`` or ``filename.py`` that no call read or changed;
- **Commands and outcomes**: tool calls with their key argument and what came back
  (exit status, the error line, or the first line of output), failures and edits first;
- **Errors**: exception lines, the failing tests a runner names, and the closing line of
  other failed commands (a runner's tally, "1 failed in 0.18s", is a result, not an
  error), each *open* (still failing) or *fixed*: fixed when a later run of the same
  command (see :func:`.signals.call_signature`) succeeded, naming the file change or the
  command in between that fixed it;
- **Decisions**: whole sentences of the agent that state a reason or a choice
  ("because", "the fix is", "instead"...), never a cut fragment;
- **Current state**: the agent's last message and the last tool activity;
- **Next step**: the call still waiting for its result, else a request the agent has not
  answered, else the agent's last stated plan that names what it acts on (never a filler
  such as "Let's try this."), else the open request;
- **Names used**: the identifiers (code names, error names, hashes, quoted strings...)
  the user and the agent wrote, most used first, then the code names and paths of the
  latest tool results (what the agent just read, latest first), filled last with the words
  the other sections left (see :mod:`.budget`), without those already shown.

A previous extractive summary is merged section by section (old task statement
kept, old "latest" request demoted, old open errors closed when their command now
succeeds); a previous summary of any other kind becomes an "Earlier summary" section.
Every item carries a rank (larger is kept first when the budget is short) and an
order (its place in the section).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ...identifiers import find_paths
from ...retention import Kind, argument_texts, text_identifiers
from .file_ops import NOT_FILES
from .signals import (
    BULLET,
    CONSTRAINT,
    DECISION,
    EXIT_STATUS,
    HARNESS,
    LOOKING,
    NOTE,
    PLACEHOLDER_PATH,
    PLAN,
    RESULT_LINE,
    STRONG_DECISION,
    SUBSTITUTION,
    TEST_FAILURE,
    call_signature,
    describe_call,
    last_meaningful_line,
    path_key,
    sentences,
    shell_command,
)
from .transcript import Event
from .words import ELLIPSIS, count_words, squash

Title = Literal["Earlier summary", "Task and constraints", "Files edited", "Files read", "Other paths",
                "Commands and outcomes", "Errors", "Decisions", "Current state", "Next step", "Names used"]
SECTIONS: list[tuple[Title, int]] = [  # (title, weight in the budget)
    ("Earlier summary", 22),
    ("Task and constraints", 20),
    ("Files edited", 10),
    ("Files read", 7),
    ("Other paths", 5),
    ("Commands and outcomes", 16),
    ("Errors", 10),
    ("Decisions", 12),
    ("Current state", 6),
    ("Next step", 8),
    ("Names used", 0),   # filled last, with the words the other sections left
]
TITLES: list[Title] = [t for t, _ in SECTIONS]
WEIGHTS: dict[Title, int] = dict(SECTIONS)
NAMES: Title = "Names used"
# Headings of the first extractive summaries, read back into today's sections.
LEGACY_TITLES: dict[str, Title] = {"User requests": "Task and constraints", "Files and paths": "Other paths"}

Sections = dict[Title, list["Item"]]
Previous = dict[str, list[str]]   # a previous extractive summary: {English title: [bullet texts]}

TASK_WORDS = 60          # the task as first stated, when the context does not keep it verbatim
# The task line when the context keeps the task message word for word right after the summary.
TASK_POINTER = "Task: stated in the user's first message, kept verbatim right after this summary."
# The next step when nothing more precise is known than the task itself.
OPEN_TASK = "Open request: the task above, not reported done yet."
# Paths only seen in tool output kept one per line; the rest, a listing's hundreds of names
# (``ls``, ``find``, a package manager's cache), are counted by folder instead.
OUTPUT_PATHS_MAX = 8
OUTPUT_FOLDERS_MAX = 3        # folders counted one per line; the others in a single count
OUTPUT_NAMES_SHOWN = 3        # names a folder's line shows as examples
_IN_OUTPUT = " (in output)"
_OUTPUT_COUNT = re.compile(r" \(\d+ more (?:files?|paths) in output\b")
_DECISION_MAX_WORDS = 45  # a longer "sentence" is a paragraph the splitter could not cut: left out
_TASK_TAGS = re.compile(r"<(pr_description|issue|task|problem_statement|request)>(.*?)</\1>", re.S | re.I)
_TAG = re.compile(r"</?[A-Za-z_][\w-]*>")
_LEAD_IN = re.compile(r"^(?:Consider the following (?:PR description|issue)|Here is the (?:issue|task))\s*:\s*", re.I)
_MARKDOWN = re.compile(r"\*\*|__|^#+\s+|^THOUGHT:\s*|^Thought:\s*", re.M)
# Every markup _MARKDOWN removes holds one of these; most sentences hold none and skip the
# substitution, which tries five alternatives at every character.
_MARKDOWN_MARKS = ("**", "__", "#", "THOUGHT:", "Thought:")
_SENTENCE_START = re.compile(r"^[A-Z0-9`\"'(\u2e80-\u9fff\uac00-\ud7af\u3040-\u30ff]")
_SENTENCE_END = re.compile(r"[.!?。！？)`\"']$")
_SHELL_EXAMPLE = re.compile(r"\s[|>]\s|^(?:cat|ls|find|grep|git|cd|sed|echo|python)\s")
_NAME_KINDS: tuple[Kind, ...] = ("code", "error", "hex_id", "uuid", "quoted", "number_unit", "path", "url")


@dataclass
class Item:
    text: str
    rank: tuple[float, ...]   # larger is kept first
    order: float              # output order inside the section
    key: str = ""             # for de-duplication
    whole: bool = False       # never cut to fit (a sentence is kept whole or left out)

    _words: int | None = field(default=None, repr=False, compare=False)

    def words(self) -> int:
        """Words of the item as rendered, its bullet included."""
        if self._words is None:
            self._words = count_words(self.text) + 1  # the bullet
        return self._words


def build_sections(events: list[Event], previous_summary: str | None, previous: Previous | None,
                   kept_verbatim: tuple[str, ...] = ()) -> Sections:
    """Every section's candidate items; ``previous`` holds the sections of a previous
    extractive summary, None when the previous summary (if any) is prose; ``kept_verbatim``
    the text the context keeps word for word after the summary of each re-inserted user
    message (the summary points to those instead of repeating them)."""
    prev = previous or {}
    sections: Sections = {}
    if previous_summary and previous is None:
        sections["Earlier summary"] = [Item(s, (0, -k), k) for k, s in enumerate(sentences(previous_summary))]
    boiler = _boilerplate(events)
    sections["Task and constraints"] = _requests(events, prev, boiler, kept_verbatim)
    facts = _path_facts(events)
    edited, read, other = _files(facts, prev)
    sections["Files edited"], sections["Files read"], sections["Other paths"] = edited, read, other
    sections["Commands and outcomes"], sections["Errors"] = _commands(events, prev)
    sections["Decisions"] = _decisions(events, prev)
    sections["Next step"], plan = _next_step(events, prev, boiler)
    sections["Current state"] = _state(events, prev, plan)
    sections[NAMES] = _names(events, prev, {k for k, f in facts.items() if f.instructions_only})
    return sections


# -- task and constraints ------------------------------------------------------------------------

def _task_text(text: str) -> str:
    """The task inside a harness's instructions (``<pr_description>``...) when it is tagged."""
    tagged = _TASK_TAGS.search(text[:50000])
    if tagged:
        text = tagged.group(2)
    return _LEAD_IN.sub("", _TAG.sub(" ", text).strip())


def _short(text: str, words: int, chars: int = 480) -> str:
    """At most ``words`` words and about ``chars`` characters (code in a request is dense)."""
    text = squash(text, words)
    if len(text) <= chars:
        return text
    cut = text.rfind(" ", 0, chars)
    return text[:cut if cut > chars // 2 else chars].rstrip() + " " + ELLIPSIS



#: "use this exact command", "run the following command": a sentence that hands the agent a
#: command to type, introduced by a colon
_COMMAND_INTRO = re.compile(r"\b(?:exact|following|this|these)\s+(?:\w+\s+)?commands?\b", re.IGNORECASE)
_FENCE = re.compile(r"^`{3}[\w+-]*$")


def _required_command(sentence: str, following: list[str]) -> str | None:
    """The command a constraint sentence ending in ":" introduces ("You MUST use this EXACT
    command to submit:" then a fenced block): the first line after the fence, else None."""
    if not (sentence.endswith(":") and CONSTRAINT.found_in(sentence) and _COMMAND_INTRO.search(sentence)):
        return None
    lines = [s.strip() for s in following if not _FENCE.match(s.strip())]
    if not lines or not following or not _FENCE.match(following[0].strip()):
        return None
    command = lines[0].splitlines()[0].strip()
    return command if 0 < len(command) <= 200 else None

def verbatim_key(text: str) -> str:
    """How a user message is recognised as one the context keeps word for word: its first
    200 characters, whitespace squashed (a clipped copy in the transcript still matches).
    A key is its own key: the summarizer may get keys instead of texts."""
    return " ".join(text.split())[:200].rstrip()


def _shape(text: str) -> str:
    return re.sub(r"\d+", "0", " ".join(text.lower().split()))[:300]


def _boilerplate(events: list[Event]) -> set[int]:
    """Orders of the user events that are no request: harness notes ("[Request interrupted by
    user]"), format reminders and wrappers (``HARNESS``), and nudges of one shape (digits
    aside) repeated more than twice."""
    users = [e for e in events if e.kind == "user" and e.text]
    shapes: dict[str, int] = {}
    for e in users:
        shapes[_shape(e.text)] = shapes.get(_shape(e.text), 0) + 1
    return {e.order for e in users if NOTE.match(e.text) or HARNESS.match(e.text) or shapes[_shape(e.text)] > 2}


def _requests(events: list[Event], prev: Previous, boiler: set[int], kept_texts: tuple[str, ...]) -> list[Item]:
    kept = frozenset(verbatim_key(t) for t in kept_texts)
    # Harness boilerplate is no request, and a message repeated word for word is a nudge.
    users = [e for e in events if e.kind == "user" and e.text and e.order not in boiler]
    seen_texts: dict[str, int] = {}
    for e in users:
        seen_texts[e.text] = seen_texts.get(e.text, 0) + 1
    first_user = users[0] if users else None
    users = [e for e in users if e is first_user or seen_texts[e.text] == 1]
    items: list[Item] = []
    prev_items = prev.get("Task and constraints", [])
    has_task = any(t.startswith("Task:") for t in prev_items)
    pointer = TASK_POINTER in prev_items
    # A pointer to a task message no longer kept verbatim gives way to the task itself, read
    # from its re-inserted copy (the first one in the span).
    task_copy = next((e for e in users if e.preserved), None) if pointer else None
    if task_copy is not None and verbatim_key(task_copy.text) not in kept:
        prev_items = [t for t in prev_items if t != TASK_POINTER]
        has_task = False
        users = [task_copy] + [e for e in users if e is not task_copy]
    for k, text in enumerate(prev_items):
        if text.startswith("Latest request:"):
            text = "Request:" + text[len("Latest request:"):]
        top = text.startswith("Task:")
        items.append(Item(text, (6 if top else 3, k), -1000 + k, key=text))
    # A re-inserted copy of the task statement comes back in every later span: it is the
    # task, not a new request, so it must not be listed again as "Latest request".
    task_head = next((" ".join(t[len("Task:"):].split())[:60] for t in prev_items if t.startswith("Task:")), None)
    if task_head:
        users = [e for e in users if " ".join(_short(_task_text(e.text), TASK_WORDS).split())[:60] != task_head]
    if pointer and has_task:
        users = [e for e in users if e is not task_copy]
    # Other re-inserted copies are earlier requests: listed, never as the latest one.
    fresh = [e for e in users if not e.preserved]
    latest = fresh[-1] if fresh else None
    for pos, ev in enumerate(users):
        if pos == 0 and not has_task:
            # The task kept word for word right after the summary is pointed to, not repeated.
            task = TASK_POINTER if verbatim_key(ev.text) in kept else "Task: " + _short(_task_text(ev.text), TASK_WORDS)
            items.append(Item(task, (7, 0), ev.order))
        elif ev is latest:
            items.append(Item("Latest request: " + squash(ev.text, 80), (6, 1), ev.order))
        elif not (ev.preserved and verbatim_key(ev.text) in kept):
            items.append(Item("Request: " + squash(ev.text, 50), (2, ev.order), ev.order))
    # A constraint the context keeps word for word (in a re-inserted message) is not repeated;
    # one past the kept beginning of a long message is.
    kept_text = " ".join(" ".join(t.split()) for t in kept_texts)
    # Constraint sentences from every user message, deduplicated, capped per message.
    shown = " ".join(" ".join(it.text.split()) for it in items)
    seen: set[str] = set()
    for ev in users:
        taken = 0
        parts = ev.sentences()
        for pos, sent in enumerate(parts):
            sent = BULLET.sub("", sent)
            command = _required_command(sent, parts[pos + 1:pos + 4])
            if command:
                # "You MUST use this EXACT command to submit:" says nothing without the
                # command that follows it; the agent runs it word for word at the end
                line = squash(sent, 25) + " `" + squash(command, 25) + "`"
                if line not in seen and command not in kept_text:
                    seen.add(line)
                    items.append(Item("Constraint: " + line, (2, -ev.order), ev.order + 0.4, key=line))
                continue
            if taken >= 4 or sent.endswith(":") or not CONSTRAINT.found_in(sent):
                continue  # a line ending in ":" introduces a list; it says nothing alone
            line = squash(sent, 35)
            norm = " ".join(line.split())
            if count_words(line) < 4 or norm in seen or norm.rstrip(" " + ELLIPSIS) in shown \
                    or (kept_text and " ".join(sent.split()) in kept_text):
                continue
            seen.add(norm)
            taken += 1
            items.append(Item("Constraint: " + line, (1, -ev.order), ev.order + 0.5, key=norm))
    return items


# -- files ---------------------------------------------------------------------------------------

@dataclass
class _PathFacts:
    shown: str                    # the longest spelling seen
    first: int                    # order of the first event naming it
    score: int = 0                # how much it was talked about
    verbs: list[str] = field(default_factory=list)   # how calls changed it, in order
    change: str = ""              # the last change a call showed ("`old` → `new`", "+12 −3")
    reads: int = 0
    referenced: bool = False      # the agent wrote it or a call named it
    in_output: bool = False       # a tool result showed it
    instructions_only: bool = True
    user_named: bool = False      # the user wrote it (a request, or instructions)

    def merge(self, other: _PathFacts) -> None:
        self.first = min(self.first, other.first)
        self.score += other.score
        self.verbs += other.verbs
        self.change = self.change or other.change
        self.reads += other.reads
        self.referenced = self.referenced or other.referenced
        self.in_output = self.in_output or other.in_output
        self.instructions_only = self.instructions_only and other.instructions_only
        self.user_named = self.user_named or other.user_named


def _path_facts(events: list[Event]) -> dict[str, _PathFacts]:
    facts: dict[str, _PathFacts] = {}

    def note(p: str, order: int) -> _PathFacts:
        k = path_key(p)
        f = facts.get(k)
        if f is None:
            f = facts[k] = _PathFacts(p, order)
        elif len(p) > len(f.shown):
            f.shown = p
        return f

    for ev in events:
        if ev.kind == "result":
            per_result: dict[str, int] = {}
            for p in find_paths(ev.scan_text()):
                per_result[p] = per_result.get(p, 0) + 1
            for p, n in per_result.items():
                f = note(p, ev.order)
                f.score += min(n, 3)
                f.in_output, f.instructions_only = True, False
            continue
        if ev.kind == "call":
            for touch in ev.touches:
                f = note(touch.path, ev.order)
                if touch.action == "read":
                    f.reads += 1
                    continue
                # Writing a whole file the session had already seen replaces it; it creates nothing,
                # and touching it changes nothing worth a line.
                seen = f.reads or f.in_output or f.verbs
                if touch.via == "touch" and seen:
                    continue
                f.verbs.append("rewritten" if touch.action == "created" and seen else touch.action)
                if touch.change:
                    f.change = touch.change
            # What the call names outside file contents it writes (here-documents, editor text);
            # a sed or perl expression ("s/old/new/") is not a path.
            named = [p for p in find_paths(shell_command(ev.text)) if not SUBSTITUTION.match(p)]
            for p in dict.fromkeys(named + [t.path for t in ev.touches]):
                if p in NOT_FILES:
                    continue
                f = note(p, ev.order)
                f.score += 3
                f.referenced, f.instructions_only = True, False
            continue
        for p in find_paths(ev.text):
            f = note(p, ev.order)
            f.score += 3
            if ev.kind == "assistant":
                f.referenced, f.instructions_only = True, False
            elif ev.kind == "user":
                f.user_named = True
    # "validators.py" said in passing is the same file as "django/core/validators.py"
    # when exactly one known path has that name: fold the mentions into the full path.
    by_base: dict[str, list[str]] = {}
    for key in facts:
        if "/" in key and not key.endswith("/"):
            by_base.setdefault(key.rsplit("/", 1)[1], []).append(key)
    for key in [k for k in facts if "/" not in k]:
        owners = by_base.get(key)
        if owners and len(owners) == 1:
            facts[owners[0]].merge(facts.pop(key))
    # Likewise "django/db/x.py" and "/testbed/django/db/x.py" are one file seen from two directories.
    by_tail: dict[str, list[str]] = {}
    for key in facts:
        if key.startswith("/") and not key.endswith("/"):
            parts = key.split("/")
            for i in range(2, len(parts) - 1):
                by_tail.setdefault("/".join(parts[i:]), []).append(key)
    for key in [k for k in facts if "/" in k and not k.startswith(("/", "."))]:
        owners = by_tail.get(key[2:] if key.startswith("~/") else key)
        if owners and len(owners) == 1 and owners[0] in facts:
            facts[owners[0]].merge(facts.pop(key))
    for f in facts.values():
        # A file the user named and the session then met is one the user pointed at.
        if f.user_named and not f.instructions_only:
            f.referenced = True
    return facts


def _verbs_note(verbs: list[str], change: str = "") -> str:
    """"created, edited ×3: `old` → `new`": how the calls changed a file, then the last change shown."""
    counts: dict[str, int] = {}
    for v in verbs:
        counts[v] = counts.get(v, 0) + 1
    note = ", ".join(v if n == 1 else f"{v} ×{n}" for v, n in counts.items())
    if not change:
        return note
    return f"{note} {change}" if change.startswith("→") else f"{note}: {change}"


def _files(facts: dict[str, _PathFacts], prev: Previous) -> tuple[list[Item], list[Item], list[Item]]:
    """(files edited, files read, other paths)."""
    edited: list[Item] = []
    read: list[Item] = []
    other: list[Item] = []
    for key, f in facts.items():
        placeholder = PLACEHOLDER_PATH.search(f.shown) is not None
        if f.verbs:
            edited.append(Item(f"{f.shown} ({_verbs_note(f.verbs, f.change)})", (4, len(f.verbs), -f.first), 0,
                               key=key))
        elif f.reads and not placeholder:
            note = f" (×{f.reads})" if f.reads > 1 else ""
            read.append(Item(f.shown + note, (3, f.reads, f.score, -f.first), 0, key=key))
        elif f.instructions_only or placeholder:
            continue   # named by the instructions or an example only: not a file of this session
        elif f.referenced:
            other.append(Item(f.shown, (2, f.score, -f.first), 0, key=key))
        else:
            other.append(Item(f"{f.shown} (in output)", (1, f.score, -f.first), 0, key=key))
    # Files of the previous summary come after the fresh ones unless listed again with new evidence.
    earlier = {t: list(prev.get(t, [])) for t in ("Files edited", "Files read", "Other paths")}
    for text in list(earlier["Other paths"]):
        # A summary from before the split said "(changed)" / "(mentioned)" / "(seen in tool output)".
        path, _, note = text.partition(" (")
        if note in ("changed)", "mentioned)", "seen in tool output)"):
            earlier["Other paths"].remove(text)
            earlier["Files edited" if note == "changed)" else "Other paths"].append(
                path + (" (edited)" if note == "changed)" else ""))
    for title, bucket in (("Files edited", edited), ("Files read", read), ("Other paths", other)):
        fresh = {it.key for it in bucket}
        for i, text in enumerate(earlier[title]):
            path = text.split(" (", 1)[0]
            if path_key(path) not in fresh:
                tier = 2.5 if title == "Files edited" else 0.45 if _OUTPUT_COUNT.search(text) else 1.5
                bucket.append(Item(text, (tier, -i), 0, key=path_key(path)))
    other = _group_output_paths(other)
    for bucket in (edited, read, other):
        for pos, it in enumerate(sorted(bucket, key=lambda i: i.rank, reverse=True)):
            it.order = pos
    return edited, read, other


def _group_output_paths(items: list[Item]) -> list[Item]:
    """Keep the best ranked paths seen only in tool output one per line, and count the rest
    by folder ("`src/pkg/` (14 more files in output: a.py, b.py, c.py, …)"): a summary that
    lists every file a directory listing printed says nothing the folder does not."""
    seen_only = [it for it in items if it.text.endswith(_IN_OUTPUT)]   # this span's, then earlier ones
    if len(seen_only) <= OUTPUT_PATHS_MAX:
        return items
    ranked = sorted(seen_only, key=lambda i: i.rank, reverse=True)
    rest = {id(it) for it in ranked[OUTPUT_PATHS_MAX - 1:]}
    kept = [it for it in items if id(it) not in rest]
    folders: dict[str, list[str]] = {}
    for it in seen_only:   # in the order the session met them
        if id(it) in rest:
            folder, _, name = it.text.removesuffix(_IN_OUTPUT).rstrip("/").rpartition("/")
            names = folders.setdefault(folder, [])
            if name not in names:
                names.append(name)
    biggest = sorted(folders.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for n, (folder, names) in enumerate(biggest[:OUTPUT_FOLDERS_MAX]):
        shown = ", ".join(names[:OUTPUT_NAMES_SHOWN]) + (f", {ELLIPSIS}" if len(names) > OUTPUT_NAMES_SHOWN else "")
        where = f"`{folder}/`" if folder else "Without a folder"
        noun = "file" if len(names) == 1 else "files"
        kept.append(_counted(f"{where} ({len(names)} more {noun} in output: {shown})", (0.5, len(names), -n)))
    others = sum(len(names) for _, names in biggest[OUTPUT_FOLDERS_MAX:])
    if others:
        kept.append(_counted(f"Elsewhere ({others} more paths in output, in {len(biggest) - OUTPUT_FOLDERS_MAX} "
                             f"other folders)", (0.4,)))
    # a folder counted again now replaces the earlier summary's count of it
    last = {it.key: n for n, it in enumerate(kept) if it.key}
    return [it for n, it in enumerate(kept) if not it.key or last[it.key] == n]


def _counted(text: str, rank: tuple[float, ...]) -> Item:
    """A line counting paths, keyed as an earlier summary's copy of it is (its text up to " (")."""
    return Item(text, rank, 0, key=path_key(text.split(" (", 1)[0]))


# -- commands and errors -------------------------------------------------------------------------

@dataclass
class _ErrorSeen:
    first: int                    # order of the first event showing it
    count: int = 0
    last: int = 0                 # order of the last event showing it
    rank: int = 1                 # 3 when a command failed with it, 1 when only seen in text
    signature: str | None = None  # the last command that failed with it


_ERROR_SUFFIX = re.compile(r" \((?:after|in) `([^`]*)`(?:, ×\d+)?(?:; fix: [^()]*)?\)$")
# Programs that only look: a run of one of them between a failure and its fix fixed nothing.
_LOOKING_PROGRAMS = frozenset("cat head tail less more grep egrep rg ls find tree sed awk wc diff git echo pwd "
                              "which file stat nl sort".split())


def _fix_action(calls: list[Event], after: int, before: int, failing: str) -> str | None:
    """What fixed an error seen at ``after`` that the run at ``before`` no longer shows: the
    last file change in between ("edited `x.py`"), else the last other command that did
    something (``pip install pytz``); None when the same command simply passed again."""
    # calls that failed fixed nothing
    between = [c for c in calls if after < c.order < before and not (c.result is not None and c.result.outcome()[0])]
    for c in reversed(between):
        changed = [t for t in c.touches if t.action != "read"]
        if changed:
            t = changed[-1]
            return f"{t.action} `{t.path}`"
    for c in reversed(between):
        sig = call_signature(c.name or "", c.text)
        words = sig.split()
        if sig != failing and words and words[0] not in _LOOKING_PROGRAMS and not c.touches:
            return f"`{squash(sig, 8)}`"
    return None


def _commands(events: list[Event], prev: Previous) -> tuple[list[Item], list[Item]]:
    """(command items, error items)."""
    cmd_items = [Item(t, (0, k), -1000 + k, key=t) for k, t in enumerate(prev.get("Commands and outcomes", []))]
    calls = [e for e in events if e.kind == "call"]
    last_calls = {id(c) for c in calls[-5:]}
    # The last successful run of each command: an error of that command before it is fixed.
    last_success: dict[str, int] = {}
    for ev in calls:
        desc = describe_call(ev.name or "tool", ev.text)
        failed, outcome = (False, "no result yet") if ev.result is None else ev.result.outcome()
        if ev.result is not None and not failed:
            last_success[call_signature(ev.name or "", ev.text)] = ev.order
        edit = ev.changes_files()
        if failed:
            # A failure with an error message beats a bare non-zero status (grep finding nothing).
            tier = 3 if ":" in outcome else 1.5
        else:
            tier = 2.5 if edit else (2 if id(ev) in last_calls else 1)
        cmd_items.append(Item(f"{desc} → {outcome}", (tier, ev.order), ev.order, key=desc + outcome))

    errors: dict[str, _ErrorSeen] = {}
    for ev in events:
        if ev.kind not in ("result", "user"):
            continue
        failed = ev.kind == "result" and ev.outcome()[0]
        lines = [ln for ln in ev.exceptions() if not RESULT_LINE.match(ln)]
        if failed and not lines:
            # A test run names the tests that failed; its closing tally is a result, not an error.
            lines = TEST_FAILURE.findall(ev.scan_text()[-20000:])[-3:]
            last = last_meaningful_line(ev.scan_text())
            if not lines and last and not EXIT_STATUS.search(last) and not RESULT_LINE.match(last):
                lines = [last]
        signature = call_signature(ev.call.name or "", ev.call.text) if ev.kind == "result" and ev.call else None
        for line in lines:
            line = squash(line, 40)
            seen = errors.setdefault(line, _ErrorSeen(ev.order))
            seen.count += 1
            seen.last = ev.order
            seen.rank = max(seen.rank, 3 if failed else 1)
            if failed:
                seen.signature = signature
    err_items: list[Item] = []
    for k, text in enumerate(prev.get("Errors", [])):
        body = text.split(":", 1)[1].strip() if text.startswith(("Open:", "Fixed:")) else text
        m = _ERROR_SUFFIX.search(body)
        line = body[:m.start()] if m else body
        if line in errors:
            continue   # seen again: judged afresh below
        if text.startswith("Open:") and m and m.group(1) in last_success:
            fix = _fix_action(calls, -1, last_success[m.group(1)], m.group(1))
            text = "Fixed:" + text[len("Open:"):]
            if fix and text.endswith(")"):
                text = text[:-1] + f"; fix: {fix})"
        elif not text.startswith(("Open:", "Fixed:")):
            text = "Open: " + text
        err_items.append(Item(text, (2 if text.startswith("Open:") else 1, -k), -1000 + k, key=line))
    for line, seen in errors.items():
        sig = seen.signature
        fixed = sig is not None and last_success.get(sig, -1) > seen.last
        count = f", ×{seen.count}" if seen.count > 1 else ""
        if fixed and sig is not None:
            # Fixed by the last change made between the failure and the run that passed.
            fix = _fix_action(calls, seen.last, last_success[sig], sig)
            suffix = f" (in `{sig}`{count}; fix: {fix})" if fix else f" (after `{sig}`{count})"
        else:
            suffix = f" (in `{sig}`{count})" if sig else (f" (×{seen.count})" if count else "")
        status = "Fixed: " if fixed else "Open: "
        # Open errors are what the agent still has to deal with: they are kept first.
        err_items.append(Item(status + line + suffix, (seen.rank + (0 if fixed else 1), seen.last), seen.first,
                              key=line))
    return cmd_items, err_items


# -- decisions, state, next step --------------------------------------------------------------------

def _clean_sentence(sent: str) -> str:
    text = BULLET.sub("", sent.strip())
    if any(mark in text for mark in _MARKDOWN_MARKS):
        text = _MARKDOWN.sub("", text)
    return " ".join(text.split())


def _decisions(events: list[Event], prev: Previous) -> list[Item]:
    items = [Item(t, (1, -1000 + k), -1000 + k, key=t, whole=True) for k, t in enumerate(prev.get("Decisions", []))]
    seen = {it.key for it in items}
    for ev in events:
        if ev.kind != "assistant" or not ev.text:
            continue
        for s_idx, raw in enumerate(ev.sentences()):
            if raw.lstrip().startswith(("```", "    ", "$ ", ">>>", "|")):
                continue
            sent = _clean_sentence(raw)
            if not DECISION.found_in(sent) or LOOKING.match(sent):
                continue
            n = count_words(sent, stop_at=_DECISION_MAX_WORDS + 1)
            # Whole sentences only: a capitalised start, a closing stop, not too long to keep whole.
            if n < 6 or n > _DECISION_MAX_WORDS or not _SENTENCE_START.match(sent) or not _SENTENCE_END.search(sent):
                continue
            if sent in seen:
                continue
            seen.add(sent)
            strong = 2 if STRONG_DECISION.found_in(sent) else 1
            items.append(Item(sent, (strong, ev.order), ev.order + s_idx / 1000, key=sent, whole=True))
    return items


def _state(events: list[Event], prev: Previous, plan: str | None) -> list[Item]:
    """The agent's last message (without the plan the next step states) and the last call."""
    items: list[Item] = []
    last_text = next((e for e in reversed(events) if e.kind == "assistant" and e.text), None)
    if last_text is not None:
        said = last_text.text
        if plan is not None:
            said = " ".join(s for s in last_text.sentences() if _clean_sentence(s).rstrip(":.") != plan.rstrip(":."))
        if said.strip():
            items.append(Item("Last agent message: " + squash(said, 70), (3,), 0))
    last_call = next((e for e in reversed(events) if e.kind == "call"), None)
    if last_call is not None:
        desc = describe_call(last_call.name or "tool", last_call.text)
        outcome = "no result yet" if last_call.result is None else last_call.result.outcome()[1]
        items.append(Item(f"Last tool call: {desc} → {outcome}", (2,), 1))
    if not items:
        items = [Item(t, (1,), k) for k, t in enumerate(prev.get("Current state", []))]
    return items


# Words that carry no content of their own in a stated intention: "Let's try this." and
# "Let's check if there are other occurrences." say nothing the agent could resume from.
_FILLER_WORDS = frozenset(
    "let let's lets me us i i'll i'm will would shall now then next first also just again still once more "
    "the a an this that these those it its it's if whether there here are is was be been being to of for on in "
    "at by with from into out up some any other others all what which see check try look run do does make sure "
    "we we'll our can could need needs should going am go and or so okay ok great good fine now, alright well "
    "thing things something anything everything approach way issue problem change changes works work working "
    "correctly properly one ones occurrences case cases result results output again. further quickly "
    "verify confirm test implement fix apply proceed continue start".split())
_CONCRETE_KINDS: tuple[Kind, ...] = ("code", "path", "url", "error", "quoted", "number_unit", "hex_id")


def _concrete(plan: str) -> bool:
    """A plan names what it acts on: an identifier, a quoted piece, or three content words."""
    if "`" in plan or any(text_identifiers(plan)[k] for k in _CONCRETE_KINDS):
        return True
    words = [w.strip(".,:;!?()\"'").lower() for w in plan.split()]
    return sum(1 for w in words if w and w not in _FILLER_WORDS) >= 3


def _next_step(events: list[Event], prev: Previous, boiler: set[int]) -> tuple[list[Item], str | None]:
    """(items, the plan sentence as the last agent message says it, if the step is one): the
    pending tool call, else a request the agent has not answered yet, else the agent's last
    stated intention that names what it acts on, else the open request."""
    last_call = next((e for e in reversed(events) if e.kind == "call"), None)
    if last_call is not None and last_call.result is None and events[-1].kind in ("call", "assistant"):
        return [Item("Pending call: " + describe_call(last_call.name or "tool", last_call.text), (3,), 0)], None
    users = [e for e in events if e.kind == "user" and e.text and e.order not in boiler and not e.preserved]
    last_user = users[-1] if users else None
    if last_user is not None and not any(e.kind in ("assistant", "call") for e in events[last_user.order + 1:]):
        return [Item("Unanswered request: " + squash(last_user.text, 60), (3,), 0)], None
    since = last_user.order if last_user is not None else -1
    agents = [e for e in events if e.kind == "assistant" and e.text and e.order > since]
    for k, ev in enumerate(reversed(agents[-3:])):
        plans = [_clean_sentence(s) for s in ev.sentences() if PLAN.found_in(s)]
        plans = [p for p in plans if count_words(p, stop_at=4) >= 3 and not p.startswith(("```", "$ "))
                 and _concrete(p)]
        if plans:
            plan = plans[-1]
            shown = plan[:-1] + "." if plan.endswith(":") else plan
            return [Item("Plan: " + squash(shown, 45), (2,), 0)], plan if k == 0 else None
    if last_user is not None:
        # the task itself is shown (or pointed to) under the task: not repeated here
        task = last_user is users[0] and "Task:" not in " ".join(prev.get("Task and constraints", []))
        line = OPEN_TASK if task else "Open request: " + squash(_task_text(last_user.text), 30)
        return [Item(line, (2,), 0)], None
    return [Item(t, (1,), k) for k, t in enumerate(prev.get("Next step", []))], None


# -- names -----------------------------------------------------------------------------------------

_ORIGIN_WEIGHT = {"user": 2, "assistant": 3, "call": 1}
#: The latest tool results whose code names and paths join the names, after the ones the
#: agent wrote: what the agent just read is what it most often uses next
RESULT_NAMES = 3


def _names(events: list[Event], prev: Previous, instruction_paths: set[str]) -> list[Item]:
    """Identifiers the user and the agent wrote, one item each, most used first; the
    budget packs them onto shared lines (see :func:`.budget.pack_names`). Paths only the
    instructions name are left out; names only the user wrote come after the agent's."""
    weight: dict[str, float] = {}
    first: dict[str, int] = {}
    shown: dict[str, str] = {}
    pending_quotes: dict[str, tuple[str, int]] = {}
    agent_used: set[str] = set()
    for ev in events:
        w = _ORIGIN_WEIGHT.get(ev.kind)
        if w is None or not ev.text:
            continue
        texts = argument_texts(ev.text[:200000]) if ev.kind == "call" else [ev.text[:200000]]
        found: set[str] = set()
        for text in texts:
            by_kind = text_identifiers(text, quoted=ev.kind == "user")
            for kind in _NAME_KINDS:
                found |= by_kind[kind]
        for ident in sorted(found):   # sorted: a set's order changes with the hash seed
            low = ident.lower()
            if PLACEHOLDER_PATH.search(ident) and ("/" in ident or "." in ident or " " in ident):
                continue   # "/path/to/dir", "git diff -- path/to/file1": examples, not names of this session
            if path_key(ident) in instruction_paths or SUBSTITUTION.match(ident):
                continue
            if ev.kind != "user":
                agent_used.add(low)
            if ev.kind == "user" and " " in ident and low not in weight:
                # A quoted phrase of the user's: kept when the agent uses it too (weighted below).
                pending_quotes.setdefault(low, (ident, ev.order))
                continue
            weight[low] = weight.get(low, 0) + w
            first.setdefault(low, ev.order)
            shown.setdefault(low, ident)
    # Quoted phrases only the user wrote: the request itself is re-inserted verbatim, and the
    # phrases of instructions ("cat README.md | head -50") are examples; they come last.
    for low in weight:
        if low not in agent_used:
            weight[low] = min(weight[low], 0.9)
    for low, (ident, order) in pending_quotes.items():
        if low not in weight and ident[:1].isalnum() and not _SHELL_EXAMPLE.search(ident):
            weight[low], first[low], shown[low] = 0.75, order, ident
    for ev in [e for e in events if e.kind == "result" and e.text][-RESULT_NAMES:]:
        by_kind = text_identifiers(ev.text[:20000])
        for ident in sorted(by_kind["code"] | by_kind["path"]):   # sorted: stable whatever the hash seed
            low = ident.lower()
            if low in weight or PLACEHOLDER_PATH.search(ident) or path_key(ident) in instruction_paths:
                continue
            # the latest result's names first (the rank reads -first)
            weight[low], first[low], shown[low] = 0.6, -ev.order, ident
    for k, line in enumerate(prev.get(NAMES, [])):
        for ident in line.split(", "):
            low = ident.strip().lower()
            if low and low not in weight:
                weight[low] = 0.5
                first[low] = -1000 + k
                shown[low] = ident.strip()
    items = [Item(shown[low], (w, -first[low]), first[low], key=low) for low, w in weight.items()]
    items.sort(key=lambda i: i.key)   # ties keep one order whatever the hash seed
    items.sort(key=lambda i: i.rank, reverse=True)
    for pos, it in enumerate(items):
        it.order = pos
    return items
