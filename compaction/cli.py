"""Command line: ``python -m compaction replay|count SESSION.json``, ``compare DIR``, ``policy``."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import jsontext
from .archive import FileArchive, MemoryArchive
from .compactor import counter_for
from .compare import CorpusSession, compare, session_files, table
from .errors import CompactionError, PolicyError, SessionValidationError
from .messages import JSONObject, RawMessage, load_session_file, wrap_originals
from .policy import Policy
from .policy_docs import markdown
from .presets import get_preset, preset_names
from .simulate import simulate
from .tokens import CategoryTotals


def _read_session(path: str) -> tuple[str, list[RawMessage], list[JSONObject]]:
    try:
        data = jsontext.loads(Path(path).read_text(encoding="utf-8"), max_depth=None)
    except OSError as exc:
        raise SystemExit(f"error: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise SystemExit(f"error: {path} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except jsontext.TooDeep:
        raise SystemExit(f"error: {path} is not JSON the parser accepts: arrays or objects are nested too deeply") from None
    except jsontext.NonFiniteNumber as exc:
        raise SystemExit(f"error: {path} is not JSON the parser accepts: {exc}") from None
    except ValueError as exc:  # not UTF-8, or an integer over the interpreter's digit limit
        why = (f"a number has more than {sys.get_int_max_str_digits()} digits" if "digits" in str(exc)
               else "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc))
        raise SystemExit(f"error: {path} is not JSON the parser accepts: {why}") from None
    try:
        sid, messages, tools = load_session_file(data, source=path)
    except SessionValidationError as exc:
        raise SystemExit(f"error: {exc}") from None
    return sid or Path(path).stem, messages, tools


def _parse_value(text: str) -> Any:
    try:
        return jsontext.loads(text)
    except ValueError:  # not JSON (or NaN, or nested too deep): the text itself
        return text


def build_policy(args: argparse.Namespace) -> Policy:
    policy = get_preset(args.preset)
    if args.policy:
        try:
            policy = Policy.load(Path(args.policy).read_text(encoding="utf-8"))
        except OSError as exc:
            raise SystemExit(f"error: cannot read policy {args.policy}: {exc.strerror}") from None
    overrides: dict[str, Any] = {}
    for item in args.set or []:
        if "=" not in item:
            raise SystemExit(f"error: --set expects dotted.path=value, got {item!r}")
        key, value = item.split("=", 1)
        overrides[key.strip()] = _parse_value(value)
    if args.context_window:
        overrides["context_window"] = args.context_window
    if args.trigger_tokens:
        policy = policy.model_copy(update={"trigger": {"kind": "tokens", "threshold": args.trigger_tokens}})
        policy = Policy.load(policy.model_dump(mode="json") | {"trigger": {"kind": "tokens", "threshold": args.trigger_tokens}})
    if args.model:
        overrides["summarizer.model"] = args.model
    if getattr(args, "agent_model", None):
        overrides["model"] = args.agent_model
    return policy.with_overrides(overrides) if overrides else policy


def cmd_replay(args: argparse.Namespace) -> int:
    sid, messages, tools = _read_session(args.session)
    policy = build_policy(args)
    archive = FileArchive(args.archive_dir) if args.archive_dir else MemoryArchive()
    report = simulate(messages, policy, tools=tools, archive=archive, session_id=sid, keep_contexts=bool(args.dump),
                      counterfactual=not args.no_counterfactual, price_model=args.price_model)
    if args.dump:
        out = Path(args.dump)
        out.mkdir(parents=True, exist_ok=True)
        (out / "context.json").write_text(json.dumps(report.pop("context"), ensure_ascii=False, indent=1), encoding="utf-8")
        (out / "replay.json").write_text(json.dumps(report.pop("replay"), ensure_ascii=False, indent=1), encoding="utf-8")
        report.pop("context_per_call", None)
    ok = report["integrity"]["tool_pairs_ok"] and report["integrity"]["replay_exact"]
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(format_report(report))
    return 0 if ok else 2


def format_report(r: JSONObject) -> str:
    lines = [f"session {r['session']}  policy {r['policy']}  window {r['window']:,} ({r['window_source']}), usable "
             f"{r.get('usable_window', r['window']):,}  counter {r['counter']}",
             f"messages {r['messages']}  model calls {r['model_calls']}  compactions {len(r['compactions'])}  "
             f"LLM calls {r['llm_calls']}  overflow calls {r['overflow_calls']}"
             + (f" ({r['oversized_calls']} with a single message larger than the usable window)"
                if r.get("oversized_calls") else "")
             + f"  thrash {r.get('thrash', 0)}",
             f"peak context {r['peak_context_tokens']:,} tokens  final context {r['final_context_tokens']:,} tokens",
             f"tool output: cleared {r['tokens_cleared']:,} tokens, truncated {r['tokens_truncated']:,} tokens, "
             f"{r['reduction_events']} reduction events, {r['summaries_avoided_by_reduction']} LLM summaries avoided"
             + (f" (without reduction: {r['summaries_without_reduction']} summaries)" if "summaries_without_reduction" in r else "")]
    if r["compactions"]:
        lines.append("")
        lines.append(f"{'at':>6} {'before':>9} {'after':>9} {'evicted':>8} {'summary':>8} {'retain':>7} {'ratio':>7} {'tries':>5}  trigger")
        for c in r["compactions"]:
            ret = "-" if c["retention"] is None else f"{c['retention']:.0%}"
            ratio = "-" if c["compression"] is None else f"{c['compression']:.1f}x"
            lines.append(f"{c['at']:>6} {c['tokens_before']:>9,} {c['tokens_after']:>9,} {c['evicted_messages']:>8} "
                         f"{c['summary_tokens']:>8,} {ret:>7} {ratio:>7} {c['attempts']:>5}  {c['trigger'] or ''}")
    for f in r.get("failed_compactions", []):
        lines.append(f"failed at {f['at']}: {f['error']}")
    for w in r.get("warnings", []):
        lines.append(f"warning: {w}")
    if r.get("lookahead"):
        lines.append("")
        lines.extend(format_lookahead(r["lookahead"]))
    integ = r["integrity"]
    lines.append("")
    lines.append(f"integrity: tool pairs {'ok' if integ['tool_pairs_ok'] else 'BROKEN'}, "
                 f"replay {'exact' if integ['replay_exact'] else 'NOT EXACT'}"
                 + (f" ({integ['error']})" if integ.get("error") else ""))
    return "\n".join(lines)


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def format_lookahead(la: JSONObject) -> list[str]:
    """The look-ahead figures: the policy against the two baselines, one row each."""
    recall = "-" if la["recall"] is None else f"{la['recall']:.1%}"
    priced = la["price_model"] + ("" if la["prices_known"] else " (price unknown)")
    lines = [f"needed-context recall {recall} ({la['kept']:,} of {la['needed']:,} identifiers the next assistant "
             f"message used from earlier history); lost to reduction {la['lost']['reduction']:,}, "
             f"to eviction {la['lost']['eviction']:,}; input cost at {priced} cache prices",
             f"{'strategy':<22} {'recall':>7} {'mean ctx':>9} {'peak ctx':>9} {'over':>5} {'breaks':>6} "
             f"{'sent':>11} {'cached':>11} {'cost $':>9}"]
    rows = [("policy", la)] + [(name.replace("_", " "), figures) for name, figures in la["baselines"].items()]
    for name, f in rows:
        rec = "-" if f["recall"] is None else f"{f['recall']:.1%}"
        lines.append(f"{name:<22} {rec:>7} {f['mean_context_tokens']:>9,} {f['peak_context_tokens']:>9,} "
                     f"{f['overflow_calls']:>5} {f['cache_breaks']:>6} {f['input_tokens']:>11,} {f['cached_tokens']:>11,} "
                     f"{_money(f['cost_usd']):>9}")
    return lines


def cmd_compare(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    if not directory.is_dir():
        raise SystemExit(f"error: {args.directory} is not a directory")
    files = session_files(directory)
    if not files:
        raise SystemExit(f"error: no *.json session files in {args.directory}")
    policies = _compare_policies(args)
    sessions = []
    for path in files:
        sid, messages, tools = _read_session(str(path))
        sessions.append(CorpusSession(sid, messages, tools))
    quiet = args.quiet

    def progress(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    result = compare(sessions, policies, price_model=args.price_model, progress=progress)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(f"{len(sessions)} sessions from {args.directory}"
              + (f", context window {args.context_window:,}" if args.context_window else ""))
        print(table(result))
    broken = any(r["integrity_broken"] for r in result["rows"])
    return 2 if broken else 0


def _compare_policies(args: argparse.Namespace) -> list[tuple[str, Policy]]:
    """The policies named on the command line, in order, with the shared overrides applied."""
    chosen: list[tuple[str, str]] = args.policies or [("preset", "default")]
    out: list[tuple[str, Policy]] = []
    labels: set[str] = set()
    for kind, value in chosen:
        one = argparse.Namespace(preset=value if kind == "preset" else "default",
                                 policy=value if kind == "policy" else None, set=args.set,
                                 context_window=args.context_window, trigger_tokens=None, model=args.model,
                                 agent_model=None)
        policy = build_policy(one)
        label = value if kind == "preset" else f"{Path(value).name} ({policy.name})"
        while label in labels:
            label += "'"
        labels.add(label)
        out.append((label, policy))
    return out


def _preset_choice(name: str) -> tuple[str, str]:
    if name not in preset_names():
        raise argparse.ArgumentTypeError(f"unknown preset {name!r}; choose one of {', '.join(preset_names())}")
    return "preset", name


def cmd_count(args: argparse.Namespace) -> int:
    _, messages, tools = _read_session(args.session)
    policy = build_policy(args)
    counter = counter_for(policy)
    totals = CategoryTotals()
    for t in counter.count_many(wrap_originals(messages)):
        totals.add(t)
    totals.set("tools", counter.count_tools(tools))
    data = totals.as_dict()
    if args.json:
        print(json.dumps({"counter": counter.name, "messages": len(messages), "tokens": data}))
    else:
        print(f"{len(messages)} messages, counter {counter.name}")
        for k, v in data.items():
            print(f"{k:>14} {v:>10,}")
    return 0


def cmd_policy(args: argparse.Namespace) -> int:
    if args.docs:
        print(markdown())
        return 0
    policy = build_policy(args)
    print(json.dumps(policy.to_json(), indent=2, ensure_ascii=False))
    for w in policy.warnings():
        print(f"warning: {w}", file=sys.stderr)
    return 0


PRICE_HELP = ("model whose litellm cache prices price the input (default: the policy's agent model, else "
              "gpt-4o-mini)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compaction", description="Compaction engine tools.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("session", help="session JSON: {'id', 'messages', 'tools'?} or a bare message list")
        p.add_argument("--preset", default="default", choices=preset_names(), help="starting policy (default: default)")
        p.add_argument("--policy", help="policy JSON file (replaces the preset)")
        p.add_argument("--set", action="append", metavar="PATH=VALUE", help="override one setting, e.g. cut.keep_messages=8 (repeatable)")
        p.add_argument("--context-window", type=int, help="context window in tokens")
        p.add_argument("--trigger-tokens", type=int, help="replace the trigger with 'context > N tokens'")
        p.add_argument("--model", help="summarizer model (any litellm model string); default: offline extractive")
        p.add_argument("--agent-model", help="the agent's model (tokenizer and window)")
        p.add_argument("--json", action="store_true", help="print one JSON object")

    rp = sub.add_parser("replay", help="feed a session one message at a time and compact as an agent loop would")
    common(rp)
    rp.add_argument("--archive-dir", help="write the archive here (JSONL per session) instead of memory")
    rp.add_argument("--dump", metavar="DIR", help="write DIR/context.json and DIR/replay.json")
    rp.add_argument("--no-counterfactual", action="store_true",
                    help="skip the second replay without reduction that counts the summaries reduction avoided")
    rp.add_argument("--price-model", help=PRICE_HELP)
    rp.set_defaults(func=cmd_replay)
    cm = sub.add_parser("compare", help="replay a directory of sessions through several policies; one table")
    cm.add_argument("directory", help="directory of session JSON files (*.json)")
    cm.add_argument("--preset", dest="policies", action="append", type=_preset_choice, metavar="NAME",
                    help="a preset to compare (repeatable; default: default)")
    cm.add_argument("--policy", dest="policies", action="append", type=lambda v: ("policy", v), metavar="FILE",
                    help="a policy JSON file to compare (repeatable)")
    cm.add_argument("--set", action="append", metavar="PATH=VALUE", help="override one setting in every policy")
    cm.add_argument("--context-window", type=int, help="context window in tokens for every policy")
    cm.add_argument("--model", help="summarizer model for every policy; default: offline extractive")
    cm.add_argument("--price-model", help=PRICE_HELP)
    cm.add_argument("--json", action="store_true", help="print one JSON object")
    cm.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    cm.set_defaults(func=cmd_compare)
    cp = sub.add_parser("count", help="print tokens per category")
    common(cp)
    cp.set_defaults(func=cmd_count)
    pp = sub.add_parser("policy", help="print a policy as JSON (preset + overrides), or the settings reference")
    pp.add_argument("--preset", default="default", choices=preset_names())
    pp.add_argument("--policy")
    pp.add_argument("--set", action="append", metavar="PATH=VALUE")
    pp.add_argument("--context-window", type=int)
    pp.add_argument("--trigger-tokens", type=int)
    pp.add_argument("--model")
    pp.add_argument("--agent-model")
    pp.add_argument("--docs", action="store_true", help="print the settings reference as Markdown")
    pp.set_defaults(func=cmd_policy)
    args = parser.parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.func
    try:
        return command(args)
    except (PolicyError, CompactionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
