"""Constructed sessions: plain chats, agent runs with (parallel) tool rounds, and corpus
sessions by file name."""
from __future__ import annotations

from tests.corpus import corpus_names, load

BASH_TOOL = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}


def call(cid: str, name: str = "bash", args: str = '{"cmd": "ls"}') -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def tool_round(cid: str, output: str = "ok", name: str = "bash", args: str = '{"cmd": "ls"}') -> list[dict]:
    return [{"role": "assistant", "content": None, "tool_calls": [call(cid, name, args)]},
            {"role": "tool", "tool_call_id": cid, "content": output}]


def chat(turns: int = 10, size: int = 400, system: str = "You help.") -> list[dict]:
    msgs = [{"role": "system", "content": system}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"question {i} " + "q" * size})
        msgs.append({"role": "assistant", "content": f"answer {i} " + "a" * size})
    return msgs


def runs_with_tools(runs: int = 6, rounds: int = 3, output: int = 800) -> list[dict]:
    """Several user runs, each with tool rounds (some with two parallel calls) and an answer."""
    msgs = [{"role": "system", "content": "You are an agent."}]
    for r in range(runs):
        msgs.append({"role": "user", "content": f"task {r}: look at module_{r}.py"})
        for k in range(rounds):
            if k % 2:
                a, b = f"r{r}k{k}a", f"r{r}k{k}b"
                msgs.append({"role": "assistant", "content": None,
                             "tool_calls": [call(a, args=f'{{"cmd": "cat a{r}{k}"}}'),
                                            call(b, args=f'{{"cmd": "cat b{r}{k}"}}')]})
                msgs.append({"role": "tool", "tool_call_id": a, "content": f"out {a} " + "x" * output})
                msgs.append({"role": "tool", "tool_call_id": b, "content": f"out {b} " + "y" * output})
            else:
                msgs += tool_round(f"r{r}k{k}", f"out r{r}k{k} " + "z" * output,
                                   args=f'{{"cmd": "grep -n def module_{r}.py"}}')
        msgs.append({"role": "assistant", "content": f"done with task {r}"})
    return msgs


def corpus_sessions() -> list[str]:
    return corpus_names()


def corpus_messages(name: str) -> list[dict]:
    return load(name)["messages"]

