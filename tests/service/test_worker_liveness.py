"""Worker liveness as a client sees it: a run queued while no worker beats says "waiting for
a worker (none seen for N s)" (API and run page); after RUN_NO_WORKER_WAIT it executes in
the process that queued it, or, with RUN_NO_WORKER_FALLBACK=off, keeps waiting and says
that the service will not run it. And a run whose worker died is noticed within 15 s.

Tasks go to a filesystem broker no worker reads; "a live worker" is a fresh WorkerBeat row
(a real worker writes one: tests/service/test_embedded_broker.py checks it)."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from compaction import Policy, get_preset
from dashboard.brokers import filesystem_transport_options
from dashboard.celery import use_broker
from dashboard.models import CompactionRun, Session, TuningSweep, WorkerBeat
from dashboard.services import runs as run_service
from dashboard.services import workers
from dashboard.services.projects import set_member
from dashboard.services.runs import no_worker
from dashboard.services.tuning_sweeps import request_sweep
from tests.service.helpers import chat, wait_for


@pytest.fixture
def unread_broker(transactional_db, tmp_path, settings):
    use_broker("filesystem://", filesystem_transport_options(tmp_path / "broker"))
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.RUN_NO_WORKER_FALLBACK = "inline"
    settings.RUN_NO_WORKER_WAIT = 1.5
    workers.clear_cache()
    no_worker.note_gave_up(False)
    yield
    no_worker.note_gave_up(False)
    workers.clear_cache()


@pytest.fixture
def watched(monkeypatch) -> list[int]:
    """The ids the no-worker watch was given (the real watch still runs them)."""
    seen: list[int] = []
    real = no_worker.watch

    def watch(task_id, wait, on_timeout):
        seen.append(task_id)
        real(task_id, wait, on_timeout)

    monkeypatch.setattr(no_worker, "watch", watch)
    return seen


@pytest.fixture
def held_fallback(monkeypatch):
    """Set it to let a due no-worker fallback run. Until then the real watch's callback waits, so
    a test's look at the "waiting" note cannot come after the fallback on a loaded machine, where
    the 1.5 s wait can pass between two lines of the test."""
    release = threading.Event()
    real = no_worker.watch

    def watch(task_id, wait, on_timeout):
        def held(due_id):
            release.wait(timeout=120)
            on_timeout(due_id)
        real(task_id, wait, held)

    monkeypatch.setattr(no_worker, "watch", watch)
    yield release
    release.set()


def past_the_wait(settings) -> None:
    """Return once the no-worker watch has got RUN_NO_WORKER_WAIT past now. It calls back one
    task at a time in deadline order, so by then the fallback of anything queued before has
    run to its end: a negative check after this cannot pass by checking too early."""
    passed = threading.Event()
    no_worker.watch(-1, settings.RUN_NO_WORKER_WAIT, lambda _id: passed.set())
    wait_for(passed.is_set, timeout=60, what="the no-worker watch to pass RUN_NO_WORKER_WAIT")


def force(api) -> dict:
    r = api.post("/api/sessions", {"messages": chat(8), "auto_compact": False})
    assert r.status_code == 201, r.content
    sid = r.json()["session"]["id"]
    r = api.post(f"/api/sessions/{sid}/compactions", {"reason": "no worker"})
    assert r.status_code in (200, 202), r.content
    return r.json()


def run_json(api, run_id: int) -> dict:
    workers.clear_cache()
    return api.get(f"/api/runs/{run_id}").json()


def test_a_run_with_no_worker_says_it_waits_then_executes_here_after_the_wait(unread_broker, live_api,
                                                                              held_fallback):
    ref = force(live_api)
    assert ref["status"] == "queued" and ref["inline"] is False
    body = run_json(live_api, ref["run_id"])
    assert body["waiting"].startswith("waiting for a worker (none seen for ")
    assert "runs it itself once it has waited 1.5 s" in body["waiting"]
    held_fallback.set()

    wait_for(lambda: run_json(live_api, ref["run_id"])["status"] == "succeeded", timeout=60,
             what="the no-worker fallback to execute the run")
    body = run_json(live_api, ref["run_id"])
    assert body["inline"] is True and "no worker" in body["inline_reason"] and body["waiting"] is None
    # Having waited in vain once, the next run does not wait again.
    ref2 = force(live_api)
    assert ref2["inline"] is True and ref2["status"] == "succeeded"


def test_with_the_fallback_off_a_run_keeps_waiting_and_says_the_service_will_not_run_it(unread_broker, settings,
                                                                                          live_api, client,
                                                                                          django_user_model,
                                                                                          watched):
    settings.RUN_NO_WORKER_FALLBACK = "off"
    ref = force(live_api)
    assert ref["run_id"] not in watched, "with the fallback off nothing may schedule the run to execute here"
    past_the_wait(settings)
    body = run_json(live_api, ref["run_id"])
    assert body["status"] == "queued" and body["inline"] is False
    assert body["waiting"].startswith("waiting for a worker (none seen for ")
    assert "RUN_NO_WORKER_FALLBACK=off" in body["waiting"] and "celery -A dashboard worker" in body["waiting"]
    op = django_user_model.objects.create_user("op", password="pw-for-tests-only")
    set_member(CompactionRun.objects.get(pk=ref["run_id"]).project, op, "viewer")  # pages show members only
    client.force_login(op)
    page = client.get(f"/runs/{ref['run_id']}/").content.decode()
    assert 'data-testid="run-waiting"' in page and "waiting for a worker (none seen for" in page


def test_a_live_worker_means_no_waiting_note_and_no_fallback(unread_broker, live_api):
    WorkerBeat.objects.create(name="w1@test", pid=1)
    ref = force(live_api)
    assert ref["status"] == "queued"
    assert run_json(live_api, ref["run_id"])["waiting"] is None
    assert ref["run_id"] not in no_worker.pending()


def test_workers_gone_for_longer_than_the_wait_means_the_run_executes_at_once(unread_broker, live_api):
    WorkerBeat.objects.create(name="w1@test", pid=1, seen_at=timezone.now() - timedelta(seconds=90))
    ref = force(live_api)
    assert ref["inline"] is True and ref["status"] == "succeeded"
    body = run_json(live_api, ref["run_id"])
    assert "none seen for 90 s" in body["inline_reason"]


@pytest.mark.postgres
def test_a_run_silent_for_twelve_seconds_is_requeued_with_the_default_settings(api, small_session,
                                                                              django_capture_on_commit_callbacks):
    session = Session.objects.get(pk=small_session["id"])
    run = CompactionRun.objects.create(project_id=session.project_id, session=session, trigger="api", force=True,
                                       policy_snapshot={})
    assert run_service.claim(run.pk).state == "claimed"  # ...and its worker dies here
    CompactionRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=12))
    with django_capture_on_commit_callbacks(execute=False):
        counts = run_service.recover()
    assert counts["requeued"] == 1
    assert CompactionRun.objects.get(pk=run.pk).status == "queued"


# -- tuning sweeps wait for a worker the same way ------------------------------------------------

def _sweep(api) -> TuningSweep:
    r = api.post("/api/sessions", {"messages": chat(12), "auto_compact": False})
    assert r.status_code == 201, r.content
    session = Session.objects.get(pk=r.json()["session"]["id"])
    policy = Policy.load(dict(get_preset("default").to_json(), context_window=4000))
    return request_sweep(session, policy, kind="tokens", scope="session")


def test_a_sweep_with_no_worker_says_it_waits_then_runs_here_after_the_wait(unread_broker, live_api, client,
                                                                              django_user_model, held_fallback):
    op = django_user_model.objects.create_user("op", password="pw-for-tests-only")
    sweep = _sweep(live_api)
    assert TuningSweep.objects.get(pk=sweep.pk).status == "queued"
    set_member(sweep.session.project, op, "viewer")
    client.force_login(op)
    workers.clear_cache()
    page = client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'data-testid="sweep-waiting"' in page and "waiting for a worker (none seen for" in page
    assert "runs it itself once it has waited 1.5 s" in page
    held_fallback.set()

    wait_for(lambda: TuningSweep.objects.get(pk=sweep.pk).status == "done", timeout=90,
             what="the no-worker fallback to run the sweep")
    done = TuningSweep.objects.get(pk=sweep.pk)
    assert done.done == done.total and len(done.points) == len(done.values)
    assert 'data-testid="sweep-waiting"' not in client.get(f"/sweeps/{sweep.pk}/").content.decode()


def test_a_sweep_with_a_live_worker_is_left_to_it(unread_broker, live_api, settings, watched):
    WorkerBeat.objects.create(name="w1@test", pid=1)
    sweep = _sweep(live_api)
    assert sweep.pk not in watched
    past_the_wait(settings)
    assert TuningSweep.objects.get(pk=sweep.pk).status == "queued"
