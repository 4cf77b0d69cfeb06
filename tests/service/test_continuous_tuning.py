"""Continuous tuning on the real worker path: the task Celery beat sends
(``dashboard.continuous_tuning``) published to the filesystem broker and run by a real
`celery -A dashboard worker`, which queues and runs one pass per project; and the beat
schedule as a process started with ``TUNING_SCHEDULE`` reads it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from celery.schedules import crontab

from dashboard.celery import app
from dashboard.models import ContinuousTuning, Session, SweepStatus
from dashboard.schedules import CONTINUOUS_TUNING_TASK, tuning_schedule
from tests.service.helpers import chat, wait_for

REPO = Path(__file__).resolve().parents[2]


def _passes(project_id: int, n: int) -> list[ContinuousTuning] | None:
    done = list(ContinuousTuning.objects.filter(project_id=project_id, status=SweepStatus.DONE).order_by("pk"))
    return done if len(done) >= n else None


@pytest.mark.slow
def test_the_beat_task_run_by_a_worker_stores_each_projects_pass_on_its_recent_sessions(start_worker, live_api):
    start_worker("filesystem")
    ids = []
    for tag in ("a", "b"):
        r = live_api.post("/api/sessions", {"messages": chat(12, tag=tag), "auto_compact": False})
        assert r.status_code == 201, r.content
        ids.append(r.json()["session"]["id"])
    project_id = Session.objects.get(pk=ids[0]).project_id
    app.send_task(CONTINUOUS_TUNING_TASK)
    (tuning,) = wait_for(lambda: _passes(project_id, 1), timeout=240, what="the worker to store the tuning pass")
    assert tuning.session_ids == ids[::-1], "the most recent session first"
    assert tuning.sweep.status == "done" and [p["value"] for p in tuning.sweep.points] == tuning.sweep.values
    assert tuning.recommended in tuning.sweep.values and tuning.sentence.startswith("Lowest")
    assert tuning.elapsed_seconds > 0 and tuning.finished_at is not None


def test_tuning_schedule_values():
    assert tuning_schedule("daily") == crontab(minute="30", hour="3")
    assert tuning_schedule("900") == timedelta(seconds=900)
    assert tuning_schedule("15 2 * * 1-5") == crontab("15", "2", day_of_week="1-5")
    assert tuning_schedule("off") is None and tuning_schedule("") is None
    for bad, words in (("3", "smallest interval"), ("every day", "five crontab fields"), ("99 * * * *", "valid crontab")):
        with pytest.raises(ValueError, match=words):
            tuning_schedule(bad)


def _beat_config(tmp_path: Path, schedule: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    env.update(TUNING_SCHEDULE=schedule, DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="dashboard.settings",
               PYTHONPATH=str(REPO))
    code = ("import json, django; django.setup(); from dashboard.celery import app; "
            "print(json.dumps({k: [v['task'], str(v['schedule'])] for k, v in app.conf.beat_schedule.items()})); "
            "print(app.conf.beat_schedule_filename)")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_the_beat_schedule_comes_from_tuning_schedule_and_its_file_from_the_data_dir(tmp_path):
    done = _beat_config(tmp_path, "*/20 4 * * 1")
    assert done.returncode == 0, done.stderr
    schedule, filename = done.stdout.strip().splitlines()[-2:]
    assert json.loads(schedule) == {"continuous-tuning": [CONTINUOUS_TUNING_TASK, str(crontab("*/20", "4", day_of_week="1"))]}
    assert filename == str(tmp_path.resolve() / "celerybeat-schedule")
    bad = _beat_config(tmp_path, "sometimes")
    assert bad.returncode != 0 and "TUNING_SCHEDULE: 'sometimes'" in bad.stderr
