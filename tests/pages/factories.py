"""Sessions, runs and policies for the page tests and the browser tests, made through the
service functions (the same path as the API), never by writing rows by hand."""
from __future__ import annotations

import json
from contextlib import nullcontext

from compaction import Policy
from compaction.formats import ImportedSession
from dashboard.models import CompactionRun, Session, TriggerKind
from dashboard.services.keys import get_or_create_project
from dashboard.services.policies import create_policy
from dashboard.services.projects import set_member
from dashboard.services.runs import request_run
from dashboard.services.sessions import append_messages, import_session

#: A policy that compacts small test sessions: fires above 6,000 tokens, keeps 8 messages.
#: Tool-output reduction is off so the figures depend on summaries only.
TEST_POLICY = {
    "name": "page-tests",
    "trigger": {"kind": "tokens", "threshold": 6000},
    "cut": {"keep_messages": 8, "keep_fraction": 0.25},
    "reduction": {"enabled": False},
}

XSS_TEXTS = (
    "<script>window.__xss = 1; alert('xss-script')</script>",
    "<img src=x onerror=\"window.__xss = 2; alert('xss-img')\">",
    "\"><svg onload=alert('xss-svg')>",
)

#: Payloads that go through the Markdown renderer: link targets, autolinks, raw HTML, fences.
MARKDOWN_XSS_TEXTS = (
    "[click me](javascript:window.__xss=3)",
    "[also me](JaVaScRiPt:window.__xss=4 \"t\")",
    "[entity](&#106;avascript:window.__xss=5)",
    "<javascript:window.__xss=6>",
    "<data:text/html,<script>window.__xss=7</script>>",
    "[data link](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX194c3M9ODwvc2NyaXB0Pg==)",
    "![pic](javascript:window.__xss=9)",
    "before <img src=x onerror=\"window.__xss=10\"> after",
    "```html\n<script>window.__xss=11</script>\n```",
    "<a href=\"javascript:window.__xss=12\">raw link</a>",
)


def agent_messages(turns: int, words: int = 60, tag: str = "t", extra_user: list[str] | None = None) -> list[dict]:
    """System prompt, then per turn: user ask, assistant tool call, tool result, assistant answer."""
    filler = " ".join(f"word{i}" for i in range(words))
    msgs: list[dict] = [{"role": "system", "content": "You are a careful coding agent."}]
    for i in range(turns):
        cid = f"call_{tag}_{i}"
        msgs.append({"role": "user", "content": f"Step {i}: inspect src/module_{i}.py and report. {filler}"})
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/module_{i}.py"})}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"def f_{i}():\n    return {i}\n# {filler}"})
        msgs.append({"role": "assistant", "content": f"Module {i} defines f_{i} returning {i}. {filler}"})
    for text in extra_user or []:
        msgs.append({"role": "user", "content": text})
        msgs.append({"role": "assistant", "content": f"You wrote: {text}"})
    return msgs


def make_project(name: str = "acme", policy: dict | None = TEST_POLICY):
    project, _ = get_or_create_project(name)
    if policy is not None and not project.active_policy_id:
        create_policy(project, policy.get("name", "tests"), Policy.load(policy), activate=True)
        project.refresh_from_db()
    return project


def add_member(project, user, role: str = "owner"):
    """``user`` gets ``role`` in ``project`` (pages show a user only their projects)."""
    set_member(project, user, role)
    return project


def import_messages(project, messages: list[dict], title: str = "test session", model: str = "gpt-4o",
                    external_id: str | None = None):
    imported = ImportedSession(messages=messages, title=title, model=model, external_id=external_id)
    return import_session(project, imported, auto_compact=False).session


def grow(project, messages: list[dict], title: str = "grown session", start: int = 12, chunk: int = 4,
         capture=None):
    """Import the first ``start`` messages, then append the rest ``chunk`` at a time with the
    auto trigger on, as an agent loop would: runs fire where the policy says and (eager
    Celery) execute when each append commits. ``capture`` is django_capture_on_commit_callbacks
    for tests inside a transaction."""

    session = import_messages(project, messages[:start], title=title)
    for k in range(start, len(messages), chunk):
        ctx = capture(execute=True) if capture is not None else nullcontext()
        with ctx:
            append_messages(Session.objects.get(pk=session.pk), messages[k:k + chunk])
    return Session.objects.get(pk=session.pk)


def force(session, capture=None, **kwargs):
    """A forced run, executed now (eager Celery) and returned fresh from the database."""

    ctx = capture(execute=True) if capture is not None else nullcontext()
    with ctx:
        run = request_run(session, trigger=kwargs.pop("trigger", TriggerKind.MANUAL), force=True, **kwargs)
    return CompactionRun.objects.get(pk=run.pk)
