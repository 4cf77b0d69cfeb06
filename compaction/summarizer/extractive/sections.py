"""The summary's sections, each a list of ranked items built from the transcript.

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

A previous extractive summary is merged section by section (old task statement
kept, old "latest" request demoted); a previous summary of any other kind becomes an
"Earlier summary" section. Every item carries a rank (larger is kept first when the
budget is short, see :mod:`.budget`) and an order (its place in the section).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ...identifiers import find_paths
from .signals import (
    BULLET,
    CONSTRAINT,
    DECISION,
    EXIT_STATUS,
    NOTE,
    STRONG_DECISION,
    describe_call,
    last_meaningful_line,
    path_key,
    sentences,
)
from .transcript import Event
from .words import ELLIPSIS, count_words, squash

Title = Literal["Earlier summary", "User requests", "Decisions", "Files and paths", "Commands and outcomes",
                "Errors", "Current state"]
SECTIONS: list[tuple[Title, int]] = [  # (title, weight in the budget)
    ("Earlier summary", 24),
    ("User requests", 26),
    ("Decisions", 14),
    ("Files and paths", 14),
    ("Commands and outcomes", 18),
    ("Errors", 12),
    ("Current state", 10),
]
TITLES: list[Title] = [t for t, _ in SECTIONS]
WEIGHTS: dict[Title, int] = dict(SECTIONS)

Sections = dict[Title, list["Item"]]
Previous = dict[str, list[str]]   # a previous extractive summary: {English title: [bullet texts]}


@dataclass
class Item:
    text: str
    rank: tuple[float, ...]   # larger is kept first
    order: float              # output order inside the section
    key: str = ""             # for de-duplication

    _words: int | None = field(default=None, repr=False, compare=False)

    def words(self) -> int:
        """Words of the item as rendered, its bullet included."""
        if self._words is None:
            self._words = count_words(self.text) + 1  # the bullet
        return self._words


def build_sections(events: list[Event], previous_summary: str | None, previous: Previous | None) -> Sections:
    """Every section's candidate items; ``previous`` holds the sections of a previous
    extractive summary, None when the previous summary (if any) is prose."""
    prev = previous or {}
    sections: Sections = {}
    if previous_summary and previous is None:
        sections["Earlier summary"] = [Item(s, (0, -k), k) for k, s in enumerate(sentences(previous_summary))]
    sections["User requests"] = _requests(events, prev)
    sections["Decisions"] = _decisions(events, prev)
    sections["Files and paths"] = _files(events, prev)
    sections["Commands and outcomes"], sections["Errors"] = _commands(events, prev)
    sections["Current state"] = _state(events, prev)
    return sections


def _requests(events: list[Event], prev: Previous) -> list[Item]:
    # Harness notes such as "[Request interrupted by user]" are not requests.
    users = [e for e in events if e.kind == "user" and e.text and not NOTE.match(e.text)]
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
        for sent in sentences(ev.text[:20000]):
            sent = BULLET.sub("", sent)
            if taken >= 4 or sent.endswith(":") or not CONSTRAINT.search(sent):
                continue  # a line ending in ":" introduces a list; it says nothing alone
            line = squash(sent, 35)
            norm = " ".join(line.split())
            if count_words(line) < 4 or norm in seen or norm.rstrip(" " + ELLIPSIS) in shown:
                continue
            seen.add(norm)
            taken += 1
            items.append(Item("Constraint: " + line, (1, -ev.order), ev.order + 0.5, key=norm))
    return items


def _decisions(events: list[Event], prev: Previous) -> list[Item]:
    items = [Item(t, (1, -1000 + k), -1000 + k, key=t) for k, t in enumerate(prev.get("Decisions", []))]
    seen = {it.key for it in items}
    for ev in events:
        if ev.kind != "assistant" or not ev.text:
            continue
        for s_idx, sent in enumerate(sentences(ev.text[:20000])):
            if not DECISION.search(sent) or count_words(sent, stop_at=4) < 4:
                continue
            if sent.lstrip().startswith(("```", "    ", "$ ", ">>>")):
                continue
            line = squash(sent, 40)
            if line in seen:
                continue
            seen.add(line)
            strong = 2 if STRONG_DECISION.search(sent) else 1
            items.append(Item(line, (strong, ev.order), ev.order + s_idx / 1000, key=line))
    return items


def _files(events: list[Event], prev: Previous) -> list[Item]:
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
                k = path_key(p)
                per_result[k] = per_result.get(k, 0) + 1
                shown_as.setdefault(k, p)
                first_seen.setdefault(k, ev.order)
            for k, n in per_result.items():
                score[k] = score.get(k, 0) + min(n, 3)
            continue
        paths = find_paths(ev.text)
        if ev.kind == "call":
            _, targets = ev.changes()
            changed.update(path_key(p) for p in targets)
            paths += [p for p in targets if p not in paths]
        for p in paths:
            k = path_key(p)
            score[k] = score.get(k, 0) + 3
            referenced.add(k)
            shown_as[k] = shown_as[k] if k in shown_as and len(shown_as[k]) >= len(p) else p
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
    for i, text in enumerate(prev_list):
        path = text.split(" (", 1)[0]
        prev_keys[path_key(path)] = i
    for i, text in enumerate(prev_list):
        path = text.split(" (", 1)[0]
        key = path_key(path)
        if key in score:
            continue  # listed again below with fresh evidence
        items.append(Item(text, (2, len(prev_list) - i, 0), -1000 + i, key=key))
    for key, s in score.items():
        note = "changed" if key in changed else ("mentioned" if key in referenced else "seen in tool output")
        tier = 4 if key in changed else (3 if key in referenced or key in prev_keys else 1)
        items.append(Item(f"{shown_as[key]} ({note})", (tier, s, first_seen[key]), 0, key=key))
    # Listed by importance: changed files first, then what was referenced, then the rest.
    for pos, it in enumerate(sorted(items, key=lambda i: i.rank, reverse=True)):
        it.order = pos
    return items


def _commands(events: list[Event], prev: Previous) -> tuple[list[Item], list[Item]]:
    """(command items, error items)."""
    cmd_items = [Item(t, (0, k), -1000 + k, key=t) for k, t in enumerate(prev.get("Commands and outcomes", []))]
    err_counts: dict[str, list[int]] = {}   # line -> [count, first order, rank]
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
            last = last_meaningful_line(ev.scan_text())
            if last and not EXIT_STATUS.search(last):
                lines = [last]
        for line in lines:
            line = squash(line, 40)
            entry = err_counts.get(line)
            if entry is None:
                err_counts[line] = [1, ev.order, 3 if failed else 1]
            else:
                entry[0] += 1
                entry[2] = max(entry[2], 3 if failed else 1)
    err_items: list[Item] = []
    for line, (n, order, rank) in err_counts.items():
        text = line if n <= 1 else f"{line} (×{n})"
        err_items.append(Item(text, (rank, order), order, key=line))
    return cmd_items, err_items


def _state(events: list[Event], prev: Previous) -> list[Item]:
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
