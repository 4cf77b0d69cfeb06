"""``claude_code_jsonl``: Claude Code session files (``~/.claude/projects/*/*.jsonl``).

Kept: ``user`` and ``assistant`` records of the main chain. Skipped: records with
``isSidechain: true`` (sub-agent transcripts), ``isMeta: true`` (harness caveats injected as
user turns), and every record whose ``type`` is not ``user``/``assistant`` (``summary``,
``system``, ``file-history-snapshot``, ``progress``, ...). Abandoned branches (after a
rewind) are skipped when the ``parentUuid`` chain from the last record can be followed to its
root; otherwise file order is used. Consecutive assistant records with the same
``message.id`` (Claude Code writes one content block per line) are merged into one assistant
message, also when the tool results of the earlier blocks came in between. Blocks are
converted as for ``anthropic``. ``sessionId`` becomes ``external_id``.
"""
from __future__ import annotations

from typing import Any

from ..messages import JSONObject
from ._base import NO, SURE, Format, ImportedSession, Options, Sample, Where, err, finish
from ._blocks import BlockConverter
from ._text import iter_jsonl

_CC_MESSAGE_TYPES = frozenset({"user", "assistant"})
_CC_RECORD_HINTS = ("sessionId", "uuid", "parentUuid", "isSidechain")


def is_cc_record(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("type"), str) and "role" not in obj and (
        "message" in obj or any(k in obj for k in _CC_RECORD_HINTS))


def _detect(sample: Sample) -> int:
    data = sample.value
    if isinstance(data, dict):
        return SURE if is_cc_record(data) else NO
    if isinstance(data, list):
        return SURE if any(is_cc_record(x) for x in data[:20]) else NO
    return NO


def _main_chain(records: list[tuple[int, JSONObject]]) -> set[str] | None:
    """uuids on the path from the last main-chain record to the root, or None when the
    parentUuid links cannot be followed (then file order is used)."""
    by_uuid = {r["uuid"]: r for _, r in records if isinstance(r.get("uuid"), str)}
    leaf = None
    for _, r in reversed(records):
        if r.get("type") in _CC_MESSAGE_TYPES and not r.get("isSidechain") and isinstance(r.get("uuid"), str):
            leaf = r
            break
    if leaf is None:
        return None
    chain: set[str] = set()
    node: JSONObject | None = leaf
    while node is not None:
        uid = node["uuid"]
        if uid in chain:
            return None  # a cycle: do not trust the links
        chain.add(uid)
        parent = node.get("parentUuid") or node.get("logicalParentUuid")
        if parent is None:
            return chain
        node = by_uuid.get(parent)
    return None  # a dangling link


def _claude_code(text_or_records: Any, source: str | None) -> ImportedSession:
    if isinstance(text_or_records, str):
        records = list(iter_jsonl(text_or_records, source))
    else:  # an already parsed list of records (line numbers are positions + 1)
        records = list(enumerate(text_or_records, start=1))
    for n, rec in records:
        if not isinstance(rec, dict):
            raise err(f"expected a JSON object, got {type(rec).__name__}", "not_an_object", source, line=n)
    chain = _main_chain(records)
    # Off-chain records are skipped only when some message record is off the chain (a rewind).
    main_chain = chain if chain is not None and any(
        r.get("type") in _CC_MESSAGE_TYPES and not r.get("isSidechain") and r.get("uuid") not in chain
        for _, r in records) else None
    conv = BlockConverter(source)
    session_id = model = None
    for n, rec in records:
        kind = rec.get("type")
        if session_id is None and isinstance(rec.get("sessionId"), str):
            session_id = rec["sessionId"]
        if kind not in _CC_MESSAGE_TYPES or rec.get("isSidechain") or rec.get("isMeta"):
            continue
        if main_chain is not None and rec.get("uuid") not in main_chain:
            continue
        where = Where(source, line=n)
        msg = rec.get("message")
        if not isinstance(msg, dict):
            raise where.fail(f"{kind} record without a message object", "bad_record")
        role = msg.get("role", kind)
        if role != kind:
            raise where.fail(f"unknown role {role!r} in a {kind!r} record", "unknown_role")
        merge_key = None
        if kind == "assistant":
            merge_key = msg.get("id") or None
            if model is None and isinstance(msg.get("model"), str) and msg["model"] != "<synthetic>":
                model = msg["model"]
        conv.message(role, msg.get("content"), where, merge_key=merge_key)
    if not conv.messages:
        raise err("no user or assistant records in this Claude Code file", "empty", source)
    return finish(conv.messages, conv.origins, [], title=None, external_id=session_id, model=model,
                   fmt="claude_code_jsonl", source=source)



def _convert(data: Any, source: str | None, options: Options) -> list[ImportedSession]:
    return [_claude_code([data] if isinstance(data, dict) else data, source)]


FORMAT = Format(name="claude_code_jsonl", order=40, detect=_detect, convert=_convert, reads_text=True,
                label="Claude Code session JSONL")
