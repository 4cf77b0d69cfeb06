"""Shortening one tool result: head + tail previews, binary detection, oversized attachments.

Pure text work: nothing here counts tokens or touches the archive. The caller supplies the
archive handle the notices should name and decides whether the result is worth applying.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..images import image_tokens
from ..messages import canonical_json
from . import notices as N

BINARY_SHARE = 0.10      # more than this share of odd characters means "binary"
_SAMPLE = 32_768


def odd_share(text: str) -> float:
    """Share of characters that do not belong in readable text: C0/C1 controls other than
    tab/newline/carriage return, U+FFFD (what a failed decode leaves behind) and lone
    surrogates. Long texts are sampled at both ends."""
    if not text:
        return 0.0
    sample = text if len(text) <= 2 * _SAMPLE else text[:_SAMPLE] + text[-_SAMPLE:]
    odd = 0
    for ch in sample:
        o = ord(ch)
        if (o < 32 and ch not in "\t\n\r") or 0x7F <= o <= 0x9F or o == 0xFFFD or 0xD800 <= o <= 0xDFFF:
            odd += 1
    return odd / len(sample)


def looks_binary(text: str) -> bool:
    return "\x00" in text[:_SAMPLE] or odd_share(text) > BINARY_SHARE


def escaped_preview(text: str, chars: int = 48) -> str:
    """A short, printable, JSON-safe rendering of the start of a text."""
    return ascii(text[:chars])


def split_budget(lengths: list[int], budget: int) -> list[int]:
    """Share ``budget`` characters among parts: short parts keep all they have, the rest is
    divided evenly among the longer ones (so one huge part cannot starve the others)."""
    alloc = [0] * len(lengths)
    remaining = budget
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    for k, i in enumerate(order):
        share = remaining // (len(order) - k)
        alloc[i] = min(lengths[i], share)
        remaining -= alloc[i]
    return alloc


def head_tail(text: str, budget: int) -> tuple[str, str]:
    """The first and last characters of ``text`` totalling at most ``budget``; each cut is
    moved to a line break when one is close (within a tenth of the piece, at most 500
    characters), which keeps log lines and code lines whole."""
    if budget >= len(text):
        return text, ""
    tail_len = budget // 2
    head_len = budget - tail_len
    reach = min(500, head_len // 10)
    if reach:
        nl = text.rfind("\n", head_len - reach, head_len)
        if nl >= 0:
            head_len = nl + 1
    tail = ""
    if tail_len:
        start = len(text) - tail_len
        reach = min(500, tail_len // 10)
        nl = text.find("\n", start, start + reach) if reach else -1
        if nl >= 0:
            start = nl + 1
        tail = text[start:]
    return text[:head_len], tail


@dataclass
class Shortened:
    content: Any                   # the new content value (notices included)
    changed: bool = False
    text_cut: bool = False         # some text part lost its middle
    original_chars: int = 0        # characters of the text parts before
    kept_chars: int = 0            # characters of original text kept in the preview
    images: int = 0
    image_tokens: int = 0
    images_offloaded: int = 0
    parts_offloaded: int = 0
    binary_share: float | None = None
    notes: list[str] = field(default_factory=list)


def _url(part: dict[str, Any]) -> str:
    spec = part.get("image_url")
    url = spec.get("url") if isinstance(spec, dict) else spec
    return url if isinstance(url, str) else ""


def _media(url: str) -> str:
    if url.startswith("data:"):
        return url[5:].split(";", 1)[0].split(",", 1)[0] or "image"
    return "image URL"


def shorten(content: Any, *, budget_chars: int | None, limit_label: str, handle: str, tool_name: str | None,
            tool_call_id: str | None, tokens: int, language: str, load_limit: int,
            image_max_chars: int | None = None, image_max_tokens: int | None = None,
            binary_max_chars: int | None = None, attachment_max_chars: int | None = None) -> Shortened:
    """Shorten a tool result's content.

    ``budget_chars``: text parts together keep at most this many characters (None: no text
    limit). Images over ``image_max_chars``/``image_max_tokens`` and other attachments over
    ``attachment_max_chars`` are replaced by notices; binary-looking text over
    ``binary_max_chars`` is replaced whole. The notices name ``handle``; ``tokens`` is the
    original message's token count, quoted in the notice.
    """
    name = N.tool_label(tool_name, language)
    call_id = tool_call_id or "-"
    load = N.load_call(handle, language, 0, load_limit)
    if isinstance(content, str):
        parts: list[dict[str, Any]] = [{"type": "text", "text": content}]
        as_string = True
    elif isinstance(content, list):
        parts = content
        as_string = False
    else:
        return Shortened(content)

    out: list[Any] = list(parts)
    res = Shortened(content)
    text_slots: list[int] = []
    for k, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            text = part["text"]
            res.original_chars += len(text)
            if binary_max_chars is not None and len(text) > binary_max_chars and looks_binary(text):
                share = odd_share(text)
                res.binary_share = max(res.binary_share or 0.0, share)
                out[k] = {"type": "text", "text": N.render(
                    "binary_notice", language, tool_name=name, tool_call_id=call_id, chars=N.num(len(text)),
                    share=f"{share * 100:.0f}", preview=escaped_preview(text), handle=handle, load_call=load)}
                res.changed = True
                continue
            text_slots.append(k)
        elif kind == "image_url":
            url = _url(part)
            cost = image_tokens(part)
            res.images += 1
            res.image_tokens += cost
            over = (image_max_chars is not None and len(url) > image_max_chars) or \
                   (image_max_tokens is not None and cost > image_max_tokens)
            if over:
                res.images_offloaded += 1
                out[k] = {"type": "text", "text": N.render(
                    "image_offloaded", language, index=res.images, chars=N.num(len(url)), media=_media(url),
                    tokens=N.num(cost), part=k, handle=handle)}
                res.changed = True
        elif kind in ("input_audio", "file") and attachment_max_chars is not None:
            size = len(canonical_json(part))
            if size > attachment_max_chars:
                res.parts_offloaded += 1
                out[k] = {"type": "text", "text": N.render(
                    "part_offloaded", language, kind=kind, chars=N.num(size), part=k, handle=handle)}
                res.changed = True

    lengths = [len(parts[k]["text"]) for k in text_slots]
    total_text = sum(lengths)
    res.kept_chars = total_text
    if budget_chars is not None and total_text > budget_chars:
        alloc = split_budget(lengths, budget_chars)
        kept = 0
        for k, share in zip(text_slots, alloc):
            text = parts[k]["text"]
            if share >= len(text):
                kept += len(text)
                continue
            head, tail = head_tail(text, share)
            kept += len(head) + len(tail)
            omitted = len(text) - len(head) - len(tail)
            out[k] = dict(parts[k], text=head + N.render("omitted_marker", language, omitted=N.num(omitted)) + tail)
        res.kept_chars = kept
        res.text_cut = True
        res.changed = True

    if not res.changed:
        return res
    if res.text_cut:
        if res.images_offloaded:
            images = N.render("images_offloaded", language, n=res.images_offloaded, total=res.images)
        elif res.images:
            images = N.render("images_kept", language, n=res.images)
        else:
            images = ""
        notice = N.render("truncated_notice", language, tool_name=name, tool_call_id=call_id,
                          chars=N.num(res.original_chars), tokens=N.num(tokens), limit=limit_label,
                          kept=N.num(res.kept_chars), images=images, handle=handle, load_call=load)
        out.append({"type": "text", "text": notice})
    if as_string:
        # A string result stays a string: the preview and the notice joined by a blank line.
        res.content = "\n\n".join(p["text"] for p in out)
    else:
        res.content = out
    return res
