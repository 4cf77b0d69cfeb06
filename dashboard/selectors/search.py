"""Search across the sessions of a project: stored messages and archived originals, ranked.

Scopes follow the engine's archive search (``compaction.archive_tools.SCOPES``): the current
session, the project's other sessions, or all of them. On PostgreSQL the ranking is full-text
search (``simple`` configuration, so identifiers and words of any language are matched as
written) over the stored documents of migration 0025 (a generated ``search_doc`` column with a
GIN index); elsewhere (SQLite) every query word must occur in the text and hits are ranked by
how often the words occur. Both read the first :data:`INDEXED_CHARS` characters of each
message, and both answer with the same hits.

Ranking is bounded: of the rows matching every word, the :data:`CANDIDATES` most recently
written (highest id) of each kind are ranked, on both databases. A query whose words are in
most of a million messages then costs the reading of a few thousand rows, not of all of them
(ranking every match took seconds); a query matching fewer rows than that ranks them all.

Messages are stored as JSON with ASCII escapes, so the query is escaped the same way before it
is matched: "café" then finds ``caf\\u00e9`` on both databases.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.db import connection

from compaction.archive_tools import SCOPES
from compaction.messages import original_id
from compaction.reduction.measure import document_text

from ..models import ArchiveItem, Session, StoredArchiveEntry, StoredMessage
from ..services import ServiceError

#: Characters of each message the search reads (the indexes cover the same prefix, which
#: also keeps every document well under PostgreSQL's 1 MB tsvector limit).
INDEXED_CHARS = 100_000
MAX_LIMIT = 50
#: How many matching rows of each kind (messages, archived originals) are ranked: the most
#: recently written ones.
CANDIDATES = 2_000
SNIPPET_CHARS = 200

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Hit:
    kind: str            # "message" (stored history) or "archive" (an archived original)
    session_id: int
    session_title: str
    position: int | None  # where the message sits in the session's timeline
    message_id: str
    role: str
    score: float
    snippet: str
    entry_id: str | None = None

    @property
    def url(self) -> str:
        """The session page, scrolled to the message (its timeline anchor)."""
        if self.position is None:
            return f"/sessions/{self.session_id}/archive/{self.entry_id}/"
        return f"/sessions/{self.session_id}/?around={self.position}#msg-{self.position}"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "session_id": self.session_id, "session_title": self.session_title,
                "position": self.position, "message_id": self.message_id, "role": self.role,
                "score": self.score, "snippet": self.snippet, "entry_id": self.entry_id, "url": self.url}


def _escaped(q: str) -> str:
    return json.dumps(q)[1:-1]


def _words(q: str) -> list[str]:
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(_escaped(q))))


def session_ids_in_scope(project_id: int, scope: str, session_id: int | None) -> list[int] | None:
    """The sessions a scope covers (None: every session of the project). The current session
    must belong to the project; asking for one of another project reads as not found."""
    if scope not in SCOPES:
        raise ServiceError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    if session_id is None:
        if scope != "all_sessions":
            raise ServiceError(f"scope {scope!r} needs session_id (the current session)")
        return None
    if not Session.objects.filter(pk=session_id, project_id=project_id).exists():
        raise ServiceError(f"session {session_id} not found", status=404)
    if scope == "current_session":
        return [session_id]
    others = list(Session.objects.filter(project_id=project_id).exclude(pk=session_id)
                  .order_by("pk").values_list("pk", flat=True))
    return others if scope == "other_sessions" else [session_id, *others]


def search(project_id: int, q: str, *, scope: str = "all_sessions", session_id: int | None = None,
           limit: int = 20) -> list[Hit]:
    """Messages and archived originals of a project matching every word of ``q``, best first
    (ties: session, then timeline order)."""
    if not isinstance(q, str) or not q.strip():
        raise ServiceError("q must be a non-empty text")
    if not 1 <= limit <= MAX_LIMIT:
        raise ServiceError(f"limit must be between 1 and {MAX_LIMIT}")
    sessions = session_ids_in_scope(project_id, scope, session_id)
    if sessions == [] or not _words(q):
        return []
    rows = _postgres(project_id, q, sessions, limit) if connection.vendor == "postgresql" \
        else _fallback(project_id, q, sessions, limit)
    rows.sort(key=lambda r: (-r[0], r[2], r[3] if r[3] is not None else -1, r[1]))
    return _hits(rows[:limit], q)


# rows: (score, kind, session_id, position, pk)

#: The query side of the stored documents (migration 0025): punctuation becomes spaces, as it
#: did in each document (PostgreSQL's parser would otherwise keep ``src/module_1.py`` or
#: ``a.b@c.org`` as single tokens that a query for ``module_1.py`` never matches).
_TSQUERY = "plainto_tsquery('simple', regexp_replace(%s, '\\W+', ' ', 'g'))"


def _postgres(project_id: int, q: str, sessions: list[int] | None, limit: int) -> list[tuple]:
    msg, item = StoredMessage._meta.db_table, ArchiveItem._meta.db_table
    entry, sess = StoredArchiveEntry._meta.db_table, Session._meta.db_table
    scope_args: list[Any] = [] if sessions is None else [sessions]
    scope_sql = "" if sessions is None else " AND s.id = ANY(%s)"
    # Each half picks its candidates newest first (a walk down the primary key that stops
    # after CANDIDATES matches when the words are common, the GIN index when they are rare),
    # then ranks only those, reading the stored documents.
    sql = f"""
        (SELECT ts_rank(c.search_doc, c.q) AS score, 'message' AS kind, c.session_id, c.position, c.id
           FROM (SELECT m.id, m.session_id, m.position, m.search_doc, q
                   FROM {msg} m JOIN {sess} s ON s.id = m.session_id, {_TSQUERY} q
                  WHERE s.project_id = %s{scope_sql} AND m.search_doc @@ q
                  ORDER BY m.id DESC LIMIT %s) c
          ORDER BY 1 DESC, c.session_id, c.position LIMIT %s)
        UNION ALL
        (SELECT ts_rank(c.search_doc, c.q), 'archive', c.session_id, c.ordinal, c.id
           FROM (SELECT i.id, e.session_id, i.ordinal, i.search_doc, q
                   FROM {item} i JOIN {entry} e ON e.id = i.entry_id JOIN {sess} s ON s.id = e.session_id,
                        {_TSQUERY} q
                  WHERE s.project_id = %s{scope_sql} AND i.search_doc @@ q
                  ORDER BY i.id DESC LIMIT %s) c
          ORDER BY 1 DESC, c.session_id, c.ordinal LIMIT %s)"""
    args: list[Any] = [_escaped(q), project_id, *scope_args, CANDIDATES, limit,
                       q, project_id, *scope_args, CANDIDATES, limit]
    with connection.cursor() as cur:
        cur.execute(sql, args)  # type: ignore[arg-type]  # a list of ids is a valid parameter
        return [(round(float(r[0]), 6), r[1], r[2], r[3], r[4]) for r in cur.fetchall()]


def _fallback(project_id: int, q: str, sessions: list[int] | None, limit: int) -> list[tuple]:
    words = _words(q)
    plain = list(dict.fromkeys(w.lower() for w in _WORD.findall(q)))
    rows: list[tuple] = []
    mq = StoredMessage.objects.filter(session__project_id=project_id)
    aq = ArchiveItem.objects.filter(entry__session__project_id=project_id)
    if sessions is not None:
        mq, aq = mq.filter(session_id__in=sessions), aq.filter(entry__session_id__in=sessions)
    for w in words:
        mq = mq.extra(where=["instr(lower(raw), %s) > 0"], params=[w])
    for w in plain:
        aq = aq.filter(text__icontains=w)
    # raw is read as text (not decoded) so ranking counts what the index would have seen
    for pk, sid, pos, raw in mq.order_by("-pk").extra(
            select={"raw_text": "raw"}).values_list("pk", "session_id", "position", "raw_text")[:CANDIDATES]:
        rows.append((_score(raw[:INDEXED_CHARS], words), "message", sid, pos, pk))
    for pk, sid, pos, text in aq.order_by("-pk").values_list(
            "pk", "entry__session_id", "ordinal", "text")[:CANDIDATES]:
        rows.append((_score(text[:INDEXED_CHARS], plain), "archive", sid, pos, pk))
    return [r for r in rows if r[0] > 0]


def _score(text: str, words: list[str]) -> float:
    """Occurrences of the query words per word of text, damped: a short message naming the
    words ranks above a long one that mentions them once (the same idea as ts_rank)."""
    found = _WORD.findall(text.lower())
    if not found:
        return 0.0
    counts = {w: 0 for w in words}
    for w in found:
        if w in counts:
            counts[w] += 1
    if not all(counts.values()):
        return 0.0
    return round(sum(c / (c + 1) for c in counts.values()) / (1 + len(found) / 1000), 6)


def _hits(rows: list[tuple], q: str) -> list[Hit]:
    """The hits of ranked rows, in their order: three queries whatever their number."""
    titles = dict(Session.objects.filter(pk__in={r[2] for r in rows}).values_list("pk", "title"))
    messages = StoredMessage.objects.in_bulk([r[4] for r in rows if r[1] == "message"])
    items = ArchiveItem.objects.select_related("entry").in_bulk([r[4] for r in rows if r[1] == "archive"])
    out = []
    for score, kind, sid, pos, pk in rows:
        title = titles.get(sid) or f"Session {sid}"
        if kind == "message":
            m = messages[pk]
            text = document_text(m.raw.get("content")) if isinstance(m.raw, dict) else ""
            calls = [(c.get("function") or {}).get("arguments") for c in (m.raw.get("tool_calls") or [])
                     if isinstance(c, dict)] if isinstance(m.raw, dict) else []
            text = "\n".join([text, *[a for a in calls if isinstance(a, str)]]).strip()
            out.append(Hit("message", sid, title, pos, original_id(pos), m.role, score, snippet(text, q), None))
            continue
        i = items[pk]
        role = str(i.raw.get("role", "")) if isinstance(i.raw, dict) else ""
        out.append(Hit("archive", sid, title, pos, i.message_id, role, score, snippet(i.text, q), i.entry.entry_id))
    return out


def snippet(text: str, q: str, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters around the query (else its first word found), whitespace folded."""
    low = text.lower()
    at = low.find(q.strip().lower()) if q.strip() else -1  # the whole query first, then its words
    if at < 0:
        spots = [p for p in (low.find(w) for w in _WORD.findall(q.lower())) if p >= 0]
        at = min(spots) if spots else 0
    start = max(0, at - width // 3)
    end = min(len(text), start + width)
    return ("…" if start else "") + " ".join(text[start:end].split()) + ("…" if end < len(text) else "")
