"""Live what-if on the tuning page: how long an edited threshold takes to redraw the context
line and the compaction markers of a 1,000-message session.

Prints, per trigger threshold tried:
- ``replay``: the engine's preview replay alone (``compaction.preview.preview_policy``),
  wall and CPU seconds;
- ``server``: the whole preview request (``POST /sessions/<id>/tuning/preview/`` through
  Django's test client: form, stored history read, replay, chart, template), wall and CPU;
- ``browser`` (unless ``--no-browser``): in Chromium against ``manage.py runserver``, the
  time from typing the threshold to the redrawn chart (the new preview swapped in and its
  uPlot chart drawn), which includes the page's 250 ms debounce.
Then a burst: five thresholds typed 100 ms apart, and how many preview requests the server
replayed to the end (the superseded ones answer 204 or are aborted by the page).

    .venv/bin/python bench/whatif_redraw.py [--messages 1000] [--repeat 3] [--port 8830] [--no-browser]

SQLite in a throw-away data dir unless DATABASE_URL is set. Load average printed at the end.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _service as svc  # noqa: E402

THRESHOLDS = (30000, 36000, 42000, 48000)
POLICY = {"name": "whatif-bench", "trigger": {"kind": "tokens", "threshold": 40000},
          "cut": {"keep_messages": 10, "keep_fraction": 0.25}, "reduction": {"enabled": False}}
PASSWORD = "bench-password-1"


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--port", type=int, default=8830)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()

    data_dir = svc.setup_django()
    # Django is set up only now: these imports need it.
    from django.contrib.auth import get_user_model  # noqa: PLC0415  (needs Django set up first)
    from django.test import Client  # noqa: PLC0415  (needs Django set up first)

    from compaction import Policy  # noqa: PLC0415  (needs Django set up first: settings load the engine env)
    from compaction.preview import preview_policy  # noqa: PLC0415  (needs Django set up first)
    from dashboard.selectors.tuning import session_raws  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.keys import get_or_create_project  # noqa: PLC0415  (needs Django set up first)
    from dashboard.services.policies import apply_service_defaults, create_policy  # noqa: PLC0415  (needs Django)
    from dashboard.services.projects import set_member  # noqa: PLC0415  (needs Django set up first)
    from tests.pages.tuning_form import posted_form  # noqa: PLC0415  (needs Django set up first)

    project, _ = get_or_create_project("whatif-bench")
    create_policy(project, POLICY["name"], Policy.load(POLICY), activate=True)
    project.refresh_from_db()  # the session reads its policy through this object
    user = get_user_model().objects.create_user(f"bench{int(time.time())}", password=PASSWORD)
    set_member(project, user, "owner")
    session = svc.import_session(project, svc.messages_500(args.messages))
    print(f"session {session.pk}: {session.message_count} messages, {session.history_total:,} tokens")

    raws = session_raws(session)
    policy = apply_service_defaults(Policy.load(POLICY), session)
    preview_policy(raws, policy, fallback_model=session.model or None)  # imports, tokenizer, caches
    client = Client()
    client.force_login(user)
    url = f"/sessions/{session.pk}/tuning/preview/"
    first = client.post(url, posted_form(session), HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="tuning-errors"' not in first and 'data-compactions="0"' not in first, first[:2000]

    print(f"{'threshold':>10} {'compactions':>11} {'replay wall':>12} {'replay cpu':>11} {'server wall':>12} "
          f"{'server cpu':>11}")
    for threshold in THRESHOLDS:
        edited = policy.with_overrides({"trigger": {"kind": "tokens", "threshold": threshold}})
        rw, rc, sw, sc = [], [], [], []
        fired = 0
        for _ in range(args.repeat):
            pv, wall, cpu = timed(lambda p=edited: preview_policy(raws, p, fallback_model=session.model or None))
            fired = len(pv.report.compactions)
            rw.append(wall)
            rc.append(cpu)
            r, wall, cpu = timed(lambda t=threshold: client.post(url, posted_form(session, trigger_value=str(t)),
                                                                 HTTP_HX_REQUEST="true"))
            assert r.status_code == 200 and b'data-testid="tuning-errors"' not in r.content, r.content[:2000]
            sw.append(wall)
            sc.append(cpu)
        print(f"{threshold:>10,} {fired:>11} {med(rw):>12} {med(rc):>11} {med(sw):>12} {med(sc):>11}")

    if not args.no_browser:
        browser_figures(args, session, user.username, data_dir)
    print("load average:", Path("/proc/loadavg").read_text().strip())


def browser_figures(args, session, username: str, data_dir: Path) -> None:
    from playwright.sync_api import sync_playwright  # noqa: PLC0415  (only with the browser part)

    base = f"http://127.0.0.1:{args.port}"
    log = Path(tempfile.mkdtemp(prefix="cs_whatif_")) / "web.log"
    env = svc.child_env(DATA_DIR=str(data_dir), DEBUG="0", ALLOWED_HOSTS="127.0.0.1,localhost", LOG_LEVEL="INFO")
    web = svc.start([sys.executable, "manage.py", "runserver", f"127.0.0.1:{args.port}", "--noreload"], env, log)
    try:
        svc.wait_http(base + "/login/")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                         args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            aborted: list[str] = []  # every preview request the page aborted, over the whole run
            page.on("requestfailed", lambda req: aborted.append(req.url) if "/tuning/preview/" in req.url else None)
            page.goto(base + "/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(base + "/")
            page.goto(f"{base}/sessions/{session.pk}/tuning/")
            page.wait_for_selector('[data-chart="simulation"][data-chart-ready="true"]', timeout=120_000)
            times = []
            for threshold in THRESHOLDS * args.repeat:
                page.evaluate("document.querySelector('[data-testid=preview-result]').dataset.old = '1'")
                start_at = time.perf_counter()
                page.fill('[data-testid="a-threshold"]', str(threshold))
                page.wait_for_selector('[data-testid=preview-result]:not([data-old]) [data-chart="simulation"]'
                                       '[data-chart-ready="true"]', timeout=120_000)
                times.append(time.perf_counter() - start_at)
            print(f"browser, edit to redrawn chart (s): median {med(times)}, min {min(times):.3f}, "
                  f"max {max(times):.3f} over {len(times)} edits (250 ms of each is the debounce)")
            # a burst of edits: only the last one's replay should run to its end
            before = log.read_text(errors="replace")
            aborted_before = len(aborted)
            page.evaluate("document.querySelector('[data-testid=preview-result]').dataset.old = '1'")
            start_at = time.perf_counter()
            for threshold in (31000, 33000, 35000, 37000, 39000):
                page.fill('[data-testid="a-threshold"]', str(threshold))
                page.evaluate("document.getElementById('tuning-form').requestSubmit()")
                page.wait_for_timeout(100)
            page.wait_for_selector('[data-testid=preview-result]:not([data-old]) [data-chart="simulation"]'
                                   '[data-chart-ready="true"]', timeout=120_000)
            burst = time.perf_counter() - start_at
            page.wait_for_timeout(3000)  # the superseded requests' own log lines
            text = log.read_text(errors="replace")[len(before):]
            path = f"/sessions/{session.pk}/tuning/preview/"
            answered = {code: sum(1 for line in text.splitlines() if path in line and f'" {code} ' in line)
                        for code in (200, 204)}
            print(f"burst of 5 edits 100 ms apart: last chart after {burst:.3f} s; {len(aborted) - aborted_before} requests aborted "
                  f"by the page, {text.count('superseded')} replays stopped early by the server; answers: "
                  f"{answered[200]} × 200 (replayed to the end), {answered[204]} × 204 (superseded)")
            browser.close()
    finally:
        svc.stop(web)


if __name__ == "__main__":
    main()
