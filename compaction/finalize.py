"""Assemble the compacted context from the cut plan and the summary text.

Default layout (user injection):
    head (system) · summary turn (user, marked) · acknowledgement (assistant)
    · preserved recent user messages · pinned messages · kept tail
With system injection the summary is merged into the system message when rendered and
no acknowledgement is added. With first_user injection it is merged into the user message
that follows it (chosen here, recorded as ``meta["merge_into"]``, so a later append never
moves it), or stands alone when none follows. Whatever the mode, the summary message keeps
its ``Provenance.SUMMARY``: the next compaction evicts it and folds it into the new summary.

Preserved user messages: the most recent evicted user messages within a token and count
budget, newest first, skipping any the user message filters reject, any repeat of a message
already picked or still in the context (pinned or in the kept tail), and any the summary
already quotes whole. Each carries a marker line (from ``locales/``) saying it is an earlier
message, so the model does not take it for a fresh turn. In user injection they sit right
after the summary and are rendered into its user turn (``meta["join_summary"]``), so the
summary, the copies and the acknowledgement read user, assistant. With
``preserved_user_placement = "summary_section"`` (Eino's layout) they are quoted verbatim
inside the summary instead, in one ``<all_user_messages>`` section that takes the place of
any such section the summary text already has.

A custom finalizer receives the same input plus the default finalizer, so it can wrap it or
replace it.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from .locales import texts
from .messages import Message, Provenance, RawMessage, iter_text, text_of, tool_name_index
from .policy import Policy
from .tokens import MessageCounter
from .windows import usable_window


@dataclass
class FinalizeInput:
    head: list[Message]
    evicted: list[Message]
    pinned: list[Message]
    tail: list[Message]
    summary: str
    model: str
    extractive: bool
    archive_ref: str | None
    number: int
    policy: Policy
    counter: MessageCounter
    window: int
    # False keeps an evicted user message from being re-inserted (the policy's user message filters)
    user_filter: Callable[[Message], bool] | None = None
    # message ids of the preserved copies the default finalizer made (set by it, read by the run)
    preserved_sources: list[str] = field(default_factory=list)
    # Every archive entry holding originals this summary stands for, oldest first: the
    # entries of the summaries it folds in, then ``archive_ref``.
    covered_refs: tuple[str, ...] = ()


Finalizer = Callable[[FinalizeInput, Callable[[FinalizeInput], list[Message]]], list[Message]]


def summary_text(inp: FinalizeInput, user_messages: list[Message] | None = None) -> str:
    """The summary turn's text; ``user_messages`` (already picked) go into an
    ``<all_user_messages>`` section before the closing line."""
    t = texts(inp.policy.finalize.language)
    lines = [t["summary_open"].format(number=inp.number),
             t["summary_intro"].format(evicted=sum(1 for m in inp.evicted if m.is_original), model=inp.model)]
    if inp.extractive:
        lines.append(t["summary_extractive"])
    if inp.policy.finalize.archive_hint and inp.archive_ref:
        refs = inp.covered_refs or (inp.archive_ref,)
        cap = inp.policy.finalize.archive_refs_max
        if cap is not None and len(refs) > cap:
            latest = refs[len(refs) - (cap - 1):]
            lines.append(t["summary_archive_some"].format(count=len(refs), first=refs[0], latest=", ".join(latest),
                                                          hidden=len(refs) - cap))
        elif len(refs) > 1:
            lines.append(t["summary_archive_many"].format(archive_refs=", ".join(refs), count=len(refs),
                                                          archive_ref=refs[-1]))
        else:
            lines.append(t["summary_archive"].format(archive_ref=inp.archive_ref))
    lines.append("")
    body = inp.summary.strip()
    section = None
    if user_messages is not None:
        section = ["<all_user_messages>", t["user_messages_intro"]]
        section += ["- " + plain_text(m, inp.policy.finalize.language).replace("\n", "\n  ") for m in user_messages]
        section.append("</all_user_messages>")
        if not user_messages:
            section = []
        # The summary's own section (a model that follows Eino's prompt writes one, and a folded
        # earlier summary carries one) gives way to the originals: one section, in its place.
        found = USER_SECTION.search(body)
        if found is not None:
            body = (body[:found.start()].rstrip() + ("\n" + "\n".join(section) if section else "")
                    + "\n" + USER_SECTION.sub("", body[found.end():]).lstrip()).strip()
            section = None
    lines.append(body)
    skills = preserved_skills(inp)
    if skills:
        lines.append("")
        lines.append(t["summary_skills"])
        lines.extend(skills)
    if section:
        lines.append("")
        lines.extend(section)
    lines.append(t["summary_close"])
    return "\n".join(lines)


#: An ``<all_user_messages>`` section as a summary may hold it (Eino's layout).
USER_SECTION = re.compile(r"<all_user_messages>.*?(?:</all_user_messages>|\Z)", re.DOTALL)


def preserved_skills(inp: FinalizeInput) -> list[str]:
    cfg = inp.policy.finalize.skills
    if not cfg.enabled or cfg.max_skills == 0:
        return []
    names = tool_name_index(inp.evicted)
    found = [m for m in inp.evicted if m.role == "tool" and names.get(m.tool_call_id or "") == cfg.tool_name]
    out: list[str] = []
    budget = cfg.token_budget
    for m in reversed(found[-cfg.max_skills:]):
        body = clip_to_tokens(text_of(m.raw.get("content")), min(cfg.max_tokens_per_skill, budget), inp.counter)
        cost = inp.counter.count_text(body)
        if cost == 0 or cost > budget:
            continue
        budget -= cost
        out.append(body)
    return list(reversed(out))


def clip_to_tokens(text: str, limit: int, counter: MessageCounter) -> str:
    if limit <= 0:
        return ""
    if counter.count_text(text) <= limit:
        return text
    lo, hi = 0, len(text)
    while lo < hi:  # longest prefix within the limit
        mid = (lo + hi + 1) // 2
        if counter.count_text(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


_SPACE = re.compile(r"\s+")
# A shorter message ("yes", "go on") is found inside any summary by chance, not because it is quoted.
QUOTE_MIN_CHARS = 16


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def plain_text(m: Message, language: str) -> str:
    """The user's own words: a preserved copy's marker line is not part of them."""
    text = "\n".join(iter_text(m.raw.get("content")))
    marker = texts(language)["preserved_marker"]
    if m.provenance is Provenance.PRESERVED and text.startswith(marker):
        text = text[len(marker):].lstrip("\n")
    return text


def _marked(m: Message, body: str | None, marker: str) -> RawMessage:
    """A user message carrying the marker line, then ``body`` (else the message's own content)."""
    if body is not None:
        return {"role": "user", "content": marker + "\n" + body}
    content = m.raw.get("content")
    if isinstance(content, list):
        return {"role": "user", "content": [{"type": "text", "text": marker}, *content]}
    return {"role": "user", "content": marker + "\n" + (content or "")}


#: Re-inserted user messages never take more than this share of the usable window, whatever
#: the budget says: Eino's default (a third of a 160k trigger) would refill a small window by
#: itself, and a summary that quotes them cannot be shrunk by the overflow guard.
PRESERVE_MAX_SHARE = 0.25


def preserve_budget(policy: Policy, window: int) -> int:
    """Tokens the re-inserted user messages may use (``finalize.preserve_user_max_tokens``,
    default 5% of the window), at most a quarter of the usable window."""
    fin = policy.finalize
    budget = fin.preserve_user_max_tokens if fin.preserve_user_max_tokens is not None else int(0.05 * window)
    return min(budget, int(PRESERVE_MAX_SHARE * usable_window(window, policy.reserved_output_tokens)))


def preserved_user_messages(inp: FinalizeInput) -> list[Message]:
    fin = inp.policy.finalize
    if not fin.preserve_user_messages:
        return []
    budget = preserve_budget(inp.policy, inp.window)
    t = texts(fin.language)
    marker = t["preserved_marker"]
    quoted = _norm(inp.summary)
    # a message the context still holds verbatim (pinned, or repeated in the kept tail) is not copied again
    seen = {_norm(plain_text(m, fin.language)) for m in inp.pinned + inp.tail if m.role == "user"}
    picked: list[Message] = []
    for m in reversed(inp.evicted):
        if len(picked) >= fin.preserve_user_max_messages:
            break
        if m.role != "user" or m.provenance not in (Provenance.ORIGINAL, Provenance.PRESERVED):
            continue
        words = plain_text(m, fin.language)
        key = _norm(words)
        if not key or key in seen:
            continue   # empty, or an older copy of a message picked or kept already
        seen.add(key)
        if len(key) >= QUOTE_MIN_CHARS and key in quoted:
            continue   # the summary already carries it whole (a task statement, say)
        if inp.user_filter is not None and not inp.user_filter(m):
            continue
        source_id = m.meta.get("source_id", m.id)
        meta = {"source_id": source_id, "preserved": True}
        raw = m.raw if m.provenance is Provenance.PRESERVED else _marked(m, None, marker)
        # quoted in the summary's section, a message costs its own words (no marker, no turn)
        cost = (inp.counter.count_text(words) if fin.preserved_user_placement == "summary_section"
                else inp.counter.count(Message(raw, "probe", Provenance.PRESERVED)).total)
        if cost <= budget:
            picked.append(Message(raw, f"{source_id}.p", Provenance.PRESERVED, None, meta))
            budget -= cost
            continue
        # Too big to keep whole: keep its beginning if a useful amount fits, then stop.
        room = budget - 8 - inp.counter.count_text(marker)
        if room >= 32:
            head = clip_to_tokens(words, room, inp.counter)
            note = t["preserved_truncated"].format(chars=len(words) - len(head))
            picked.append(Message(_marked(m, head + "\n" + note, marker), f"{source_id}.p",
                                  Provenance.PRESERVED, None, meta | {"truncated": True}))
        break
    picked.reverse()
    return picked


def default_finalizer(inp: FinalizeInput) -> list[Message]:
    fin = inp.policy.finalize
    ref = inp.archive_ref or f"n{inp.number}"
    preserved = preserved_user_messages(inp)
    inp.preserved_sources[:] = [m.meta["source_id"] for m in preserved]
    in_summary = fin.preserved_user_placement == "summary_section"
    text = summary_text(inp, preserved if in_summary else None)
    meta = {"injection": fin.injection, "archive_ref": inp.archive_ref, "number": inp.number}
    summary_id = f"sum-{ref}"
    # In user injection the copies join the summary's user turn when rendered (they stay
    # messages of their own, so a later summary can preserve them again): one user turn,
    # then the acknowledgement, so roles alternate.
    joined = [] if in_summary or fin.injection != "user" else [
        Message(m.raw, m.id, m.provenance, m.ordinal, dict(m.meta) | {"join_summary": summary_id}) for m in preserved]
    rest = [] if in_summary or joined else list(preserved)
    for m in inp.pinned:
        rest.append(Message(m.raw, m.id, Provenance.PINNED if m.is_original else m.provenance, m.ordinal, dict(m.meta)))
    rest.extend(inp.tail)
    out = list(inp.head)
    if fin.injection == "system":
        out.append(Message({"role": "system", "content": text}, f"sum-{ref}", Provenance.SUMMARY, None, meta))
    elif fin.injection == "first_user":
        if rest and rest[0].role == "user":
            meta["merge_into"] = rest[0].id
        out.append(Message({"role": "user", "content": text}, f"sum-{ref}", Provenance.SUMMARY, None, meta))
    else:
        out.append(Message({"role": "user", "content": text}, summary_id, Provenance.SUMMARY, None, meta))
        out.extend(joined)
        if fin.acknowledgement:
            ack = texts(fin.language)["acknowledgement"]
            out.append(Message({"role": "assistant", "content": ack}, f"ack-{ref}", Provenance.ACKNOWLEDGEMENT))
    out.extend(rest)
    return out


def run_finalizer(inp: FinalizeInput, custom: Finalizer | None) -> list[Message]:
    if custom is None:
        return default_finalizer(inp)
    return custom(inp, default_finalizer)
