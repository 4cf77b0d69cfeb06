"""Assemble the compacted context from the cut plan and the summary text.

Default layout (user injection):
    head (system) · summary turn (user, marked) · acknowledgement (assistant)
    · preserved recent user messages · pinned messages · kept tail
With system injection the summary is merged into the system message when rendered and
no acknowledgement is added. A custom finalizer receives the same input plus the default
finalizer, so it can wrap it or replace it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .locales import texts
from .messages import Message, Provenance, iter_text, text_of, tool_name_index
from .policy import Policy
from .tokens import MessageCounter


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
    # Every archive entry holding originals this summary stands for, oldest first: the
    # entries of the summaries it folds in, then ``archive_ref``.
    covered_refs: tuple[str, ...] = ()


Finalizer = Callable[[FinalizeInput, Callable[[FinalizeInput], list[Message]]], list[Message]]


def summary_text(inp: FinalizeInput) -> str:
    t = texts(inp.policy.finalize.language)
    lines = [t["summary_open"].format(number=inp.number),
             t["summary_intro"].format(evicted=sum(1 for m in inp.evicted if m.is_original), model=inp.model)]
    if inp.extractive:
        lines.append(t["summary_extractive"])
    if inp.policy.finalize.archive_hint and inp.archive_ref:
        refs = inp.covered_refs or (inp.archive_ref,)
        if len(refs) > 1:
            lines.append(t["summary_archive_many"].format(archive_refs=", ".join(refs), count=len(refs),
                                                          archive_ref=refs[-1]))
        else:
            lines.append(t["summary_archive"].format(archive_ref=inp.archive_ref))
    lines.append("")
    lines.append(inp.summary.strip())
    skills = preserved_skills(inp)
    if skills:
        lines.append("")
        lines.append(t["summary_skills"])
        lines.extend(skills)
    lines.append(t["summary_close"])
    return "\n".join(lines)


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


def preserved_user_messages(inp: FinalizeInput) -> list[Message]:
    fin = inp.policy.finalize
    if not fin.preserve_user_messages:
        return []
    budget = fin.preserve_user_max_tokens
    if budget is None:
        budget = int(0.05 * inp.window)
    t = texts(fin.language)
    picked: list[Message] = []
    for m in reversed(inp.evicted):
        if len(picked) >= fin.preserve_user_max_messages:
            break
        if m.role != "user" or m.provenance not in (Provenance.ORIGINAL, Provenance.PRESERVED):
            continue
        cost = inp.counter.count(m).total
        source_id = m.meta.get("source_id", m.id)
        if cost <= budget:
            picked.append(Message(m.raw, f"{source_id}.p", Provenance.PRESERVED, None, {"source_id": source_id}))
            budget -= cost
            continue
        # Too big to keep whole: keep its beginning if a useful amount fits, then stop.
        text = "\n".join(iter_text(m.raw.get("content")))
        room = budget - 8
        if room >= 32:
            head = clip_to_tokens(text, room, inp.counter)
            note = t["preserved_truncated"].format(chars=len(text) - len(head))
            picked.append(Message({"role": "user", "content": head + "\n" + note}, f"{source_id}.p",
                                  Provenance.PRESERVED, None, {"source_id": source_id, "truncated": True}))
        break
    picked.reverse()
    return picked


def default_finalizer(inp: FinalizeInput) -> list[Message]:
    fin = inp.policy.finalize
    ref = inp.archive_ref or f"n{inp.number}"
    text = summary_text(inp)
    out = list(inp.head)
    if fin.injection == "system":
        out.append(Message({"role": "system", "content": text}, f"sum-{ref}", Provenance.SUMMARY, None,
                           {"injection": "system", "archive_ref": inp.archive_ref, "number": inp.number}))
    else:
        out.append(Message({"role": "user", "content": text}, f"sum-{ref}", Provenance.SUMMARY, None,
                           {"injection": "user", "archive_ref": inp.archive_ref, "number": inp.number}))
        if fin.acknowledgement:
            ack = texts(fin.language)["acknowledgement"]
            out.append(Message({"role": "assistant", "content": ack}, f"ack-{ref}", Provenance.ACKNOWLEDGEMENT))
    out.extend(preserved_user_messages(inp))
    for m in inp.pinned:
        out.append(Message(m.raw, m.id, Provenance.PINNED if m.is_original else m.provenance, m.ordinal, dict(m.meta)))
    out.extend(inp.tail)
    return out


def run_finalizer(inp: FinalizeInput, custom: Finalizer | None) -> list[Message]:
    if custom is None:
        return default_finalizer(inp)
    return custom(inp, default_finalizer)
