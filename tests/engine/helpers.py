"""Small builders for constructed sessions."""
from compaction.messages import wrap_originals
from compaction.tokens import CharCounter, MessageCounter


def call(cid, name="bash", args='{"cmd": "ls"}'):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def tool_round(cid, output="ok", name="bash", text=None, args='{"cmd": "ls"}'):
    return [{"role": "assistant", "content": text, "tool_calls": [call(cid, name, args)]},
            {"role": "tool", "tool_call_id": cid, "content": output}]


def coding_run(rounds=30, output_chars=400, task="Fix the bug in src/app.py"):
    """One user task followed by many tool rounds: the normal shape of a coding-agent run."""
    msgs = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": task}]
    for i in range(rounds):
        msgs += tool_round(f"c{i}", f"output {i} " + "y" * output_chars, args=f'{{"cmd": "cat file_{i}.py"}}')
    return msgs


def chat(turns=10, size=200):
    msgs = [{"role": "system", "content": "You help."}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"question {i} " + "q" * size})
        msgs.append({"role": "assistant", "content": f"answer {i} " + "a" * size})
    return msgs


def counted(raws):
    counter = MessageCounter(CharCounter(4.0))
    msgs = wrap_originals(raws)
    return msgs, counter.count_many(msgs)
