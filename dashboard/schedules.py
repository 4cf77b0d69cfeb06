"""When Celery beat runs the continuous tuning task: ``TUNING_SCHEDULE`` read into a Celery
schedule.

Imported by the settings (so it imports nothing of the project): the beat process reads
``CELERY_BEAT_SCHEDULE`` from them. Accepted, case-insensitive:

- ``daily`` (the default: 03:30 UTC), ``hourly`` (minute 30 of every hour), ``weekly``
  (Mondays 03:30 UTC);
- a number of seconds between two runs (``900``), at least 5 (short ones to try it out);
- five crontab fields, ``minute hour day-of-month month day-of-week`` (``15 2 * * 1-5``);
- ``off`` (or empty): no continuous tuning.
"""
from __future__ import annotations

from datetime import timedelta

from celery.schedules import crontab

#: The task beat sends; the worker's dashboard.tasks registers it under this name.
CONTINUOUS_TUNING_TASK = "dashboard.continuous_tuning"
_NAMED = {
    "daily": {"minute": "30", "hour": "3"},
    "hourly": {"minute": "30"},
    "weekly": {"minute": "30", "hour": "3", "day_of_week": "1"},
}
#: The shortest interval in seconds (a pass replays sessions: shorter would only pile them up).
MIN_INTERVAL = 5
_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")


def tuning_schedule(text: str | None) -> crontab | timedelta | None:
    """The schedule ``text`` names (None: off). Raises ValueError naming the problem."""
    raw = (text or "").strip().lower()
    if raw in ("", "off"):
        return None
    if raw in _NAMED:
        return crontab(**_NAMED[raw])
    try:
        seconds = float(raw)
    except ValueError:
        seconds = None
    if seconds is not None:
        if seconds < MIN_INTERVAL:
            raise ValueError(f"TUNING_SCHEDULE: {text!r} seconds is less than the smallest interval, {MIN_INTERVAL}")
        return timedelta(seconds=seconds)
    parts = raw.split()
    if len(parts) != len(_FIELDS):
        raise ValueError(f"TUNING_SCHEDULE: {text!r} is not daily, hourly, weekly, off, a number of seconds, "
                         "or five crontab fields (minute hour day-of-month month day-of-week)")
    try:
        return crontab(**dict(zip(_FIELDS, parts, strict=True)))
    except ValueError as exc:
        raise ValueError(f"TUNING_SCHEDULE: {text!r} is not a valid crontab: {exc}") from None


def beat_schedule(text: str | None) -> dict[str, dict[str, object]]:
    """``CELERY_BEAT_SCHEDULE`` for ``TUNING_SCHEDULE`` = ``text``: one entry, or none when off."""
    schedule = tuning_schedule(text)
    if schedule is None:
        return {}
    return {"continuous-tuning": {"task": CONTINUOUS_TUNING_TASK, "schedule": schedule}}
