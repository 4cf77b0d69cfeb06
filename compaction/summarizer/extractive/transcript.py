"""The span as the summarizer read it: who said what, which tool was called, what came back.

The transcript is read in the format of :mod:`compaction.summarizer.render`
(``[user]: ...``, ``[Called tool: name with args: ...]``, ``[name returned: ...]``).
Each result is paired with the call it answers, each call carries what it did to files
(:mod:`.file_ops`), and the detectors of :mod:`.signals` run at most once per event.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from ... import locales
from .file_ops import CHANGING, FileTracker, Touch
from .signals import exception_lines, outcome_of, sentences

EventKind = Literal["user", "assistant", "system", "call", "result"]

# Every header opens with "[": the pattern starts with that literal so the regex engine jumps
# from one "[" to the next instead of trying each alternative at every character; the
# look-behinds then check that the "[" starts a line.
_HEADER = re.compile(
    r"\[(?:"
    r"(?<=^\[)(?P<role>user|assistant|system|developer)\]: "
    # a call starts a line, or directly follows "[assistant]: " when the message has no text
    r"|(?:(?<=^\[)|(?<=^\[assistant\]: \[))Called tool: (?P<call>[^\s\[\]]+) with args: "
    r"|(?<=^\[)(?P<tool>[^\[\]\n]{1,100}?) returned: )",
    re.MULTILINE)
_ROLES: dict[str, EventKind] = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
# Cheap tests that tell whether a result can hold an exception line at all.
_ERROR_HINTS = ("Error", "Exception", "Traceback", "Configured", "E ")
SENTENCE_CHARS = 20000   # the sentences of a message are read from its start only


@dataclass
class Event:
    kind: EventKind
    text: str
    order: int
    name: str | None = None
    call: Event | None = None      # for results: the call they answer
    result: Event | None = None    # for calls: their result
    touches: list[Touch] = field(default_factory=list)   # for calls: what they did to files (see .file_ops)
    preserved: bool = False        # for users: a copy the engine re-inserted after an earlier summary
    _outcome: tuple[bool, str] | None = field(default=None, repr=False, compare=False)
    _exceptions: list[str] | None = field(default=None, repr=False, compare=False)
    _sentences: list[str] | None = field(default=None, repr=False, compare=False)

    def scan_text(self) -> str:
        """The text to scan; very large results are scanned at both ends only."""
        t = self.text
        return t if len(t) <= 400_000 else t[:200_000] + "\n" + t[-200_000:]

    def changes_files(self) -> bool:
        """Did this call create, edit, delete or move a file?"""
        return any(t.action in CHANGING for t in self.touches)

    def sentences(self) -> list[str]:
        """The sentences of the text's first :data:`SENTENCE_CHARS` characters, split once for
        every section that reads them (shared: do not change the list)."""
        if self._sentences is None:
            self._sentences = sentences(self.text[:SENTENCE_CHARS])
        return self._sentences

    def outcome(self) -> tuple[bool, str]:
        """(failed?, short outcome text) of this result."""
        if self._outcome is None:
            self._outcome = outcome_of(self.scan_text(), self.exceptions())
        return self._outcome

    def exceptions(self) -> list[str]:
        """The exception lines of this event's text."""
        if self._exceptions is None:
            t = self.scan_text()
            self._exceptions = exception_lines(t) if any(h in t for h in _ERROR_HINTS) else []
        return self._exceptions


def _strip_bracket(body: str) -> str:
    body = body.rstrip()
    return body[:-1] if body.endswith("]") else body


@cache
def _preserved_markers() -> tuple[str, ...]:
    return tuple(locales.texts(code)["preserved_marker"] for code in locales.available())


def _without_marker(body: str) -> tuple[str, bool]:
    """A re-inserted user message minus the engine's own "kept from before the summary" line
    (the summary reads the user's words, not the engine's label on them), and whether it had it."""
    for marker in _preserved_markers():
        if body.startswith(marker):
            return body[len(marker):].lstrip(), True
    return body, False


def parse_transcript(text: str) -> list[Event]:
    """The events of a rendered transcript, in order, each result linked to its call."""
    events: list[Event] = []
    matches = list(_HEADER.finditer(text))
    pending: list[Event] = []
    for j, m in enumerate(matches):
        end = matches[j + 1].start() if j + 1 < len(matches) else len(text)
        body = text[m.end():end]
        order = len(events)
        if m.group("role"):
            role = _ROLES[m.group("role")]
            said, preserved = _without_marker(body.strip()) if role == "user" else (body.strip(), False)
            events.append(Event(role, said, order, preserved=preserved))
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
    # What each call did to files, in call order: SWE-agent's editor acts on the file opened
    # last, and a patch or script the span wrote is read when it is applied or run.
    tracker = FileTracker()
    for ev in events:
        if ev.kind == "call":
            failed = ev.result is not None and ev.result.outcome()[0]
            ev.touches = tracker.touches(ev.name or "", ev.text, failed)
            if ev.result is not None and not failed:
                tracker.saw(ev.touches, ev.result.text)
    return events
