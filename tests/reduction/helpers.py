"""Builders and checks shared by the reduction tests."""
from __future__ import annotations

import json

from compaction import archive_tools
from compaction.archive import MemoryArchive, replay
from compaction.messages import Message, tool_name_index, wrap_originals
from compaction.reduction.config import ReductionPolicy
from compaction.reduction.measure import document_text
from compaction.reduction.pipeline import before_call, on_append
from compaction.tokens import MessageCounter, make_counter

SESSION = "s1"
_COUNTER = MessageCounter(make_counter("tiktoken", encoding="o200k_base"))


def counter() -> MessageCounter:
    return _COUNTER


def call(cid, name="bash", args='{"cmd": "ls"}'):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def tool_round(cid, output="ok", name="bash", args='{"cmd": "ls"}', text=None):
    return [{"role": "assistant", "content": text, "tool_calls": [call(cid, name, args)]},
            {"role": "tool", "tool_call_id": cid, "content": output}]


def run(rounds=12, output="x", name="bash", task="Fix the bug in src/app.py"):
    """System + one user task + ``rounds`` tool rounds whose outputs are ``output(i)`` or text."""
    msgs = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": task}]
    for i in range(rounds):
        out = output(i) if callable(output) else f"output {i}: " + output
        nm = name(i) if callable(name) else name
        msgs += tool_round(f"c{i}", out, nm, f'{{"cmd": "cat file_{i}.py"}}')
    return msgs


def policy(**data) -> ReductionPolicy:
    return ReductionPolicy.model_validate({"enabled": True, **data})


def total(messages: list[Message]) -> int:
    return sum(t.total for t in _COUNTER.count_many(messages))


def reduce(raws_or_msgs, pol: ReductionPolicy, *, window=100_000, total_tokens=None, hooks=None):
    msgs = raws_or_msgs if raws_or_msgs and isinstance(raws_or_msgs[0], Message) else wrap_originals(raws_or_msgs)
    t = total(msgs) if total_tokens is None else total_tokens
    return msgs, before_call(msgs, policy=pol, counter=_COUNTER, window=window, session_id=SESSION,
                             total_tokens=t, hooks=hooks)


def arrive(raws: list[dict], pol: ReductionPolicy, archive: MemoryArchive | None = None, hooks=None) -> tuple[list[Message], MemoryArchive]:
    """Append messages one by one as a session would: truncation on arrival for tool results,
    entries written after each step."""
    archive = archive if archive is not None else MemoryArchive()
    live: list[Message] = []
    names: dict[str, str] = {}
    for m in wrap_originals(raws):
        for c in m.tool_calls:
            names[c["id"]] = c["function"]["name"]
        if m.role == "tool":
            r = on_append(m, policy=pol, counter=_COUNTER, session_id=SESSION, tool_name=names.get(m.tool_call_id),
                          hooks=hooks)
            commit(r, archive)
            live.extend(r.messages)
        else:
            live.append(m)
    return live, archive


def commit(result, archive: MemoryArchive) -> None:
    for e in result.entries:
        archive.write(e)


def assert_replay_exact(archive: MemoryArchive, live: list[Message], originals: list[dict]) -> None:
    got = replay(archive.entries(SESSION), live)
    assert json.dumps(got, sort_keys=True) == json.dumps(originals, sort_keys=True)
    assert got == originals


def assert_every_reduction_loads_exactly(archive: MemoryArchive, live: list[Message], originals: list[dict],
                                         chunk: int = 7_919) -> int:
    """Every reduced message's handle gives back its original text, slice by slice."""
    checked = 0
    for m in live:
        red = m.reduction
        if not red or m.ordinal is None:
            continue
        original = originals[m.ordinal]
        if red.get("field") == "arguments":
            for cid in red["cleared_calls"]:
                want = next(c for c in original["tool_calls"] if c["id"] == cid)["function"]["arguments"]
                assert _read_all(archive, red["archive_ref"], chunk, field="arguments", tool_call_id=cid) == want
                assert _read_all(archive, cid, chunk, field="arguments") == want
                checked += 1
            continue
        want = document_text(original.get("content"))
        assert _read_all(archive, red["archive_ref"], chunk) == want
        if m.tool_call_id:
            assert _read_all(archive, m.tool_call_id, chunk) == want
        assert _read_all(archive, m.id, chunk) == want
        raw = archive_tools.load(archive, SESSION, red["archive_ref"], field="raw")["content"]
        assert json.loads(raw) == original
        checked += 1
    return checked


def _read_all(archive, handle, chunk, **kw) -> str:
    pieces, offset = [], 0
    while True:
        got = archive_tools.load(archive, SESSION, handle, offset, chunk, **kw)
        pieces.append(got["content"])
        if got["next_offset"] is None:
            assert offset + got["returned_chars"] == got["total_chars"]
            return "".join(pieces)
        assert got["next_offset"] == offset + chunk
        offset = got["next_offset"]


def names_of(msgs: list[Message]) -> dict[str, str]:
    return tool_name_index(msgs)
