"""Rate limits on requests that queue work (forced runs, imports).

Per project (``check``): a limit is a setting like ``"60/min"``: at most 60 such API
requests per project in each calendar minute (fixed windows). The count lives in the
database (one ``RateWindow`` row per project, kind and window, incremented under the
project's row lock), so every web process shares it.

Per session (``check_session_force``, on by default): at most N forced runs of one session
in any window of the limit's length, from the API or the dashboard, counted from the run
rows themselves. A force answered with the session's pending forced run makes no run and
is not counted. A request over either limit is refused with 429 and ``Retry-After``, the
seconds until a request would pass."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import F

from ..models import CompactionRun, Project, RateWindow, Session
from . import ServiceError
from .common import now

Action = Literal["force", "import"]

SETTING: dict[Action, str] = {"force": "FORCE_RATE_LIMIT", "import": "IMPORT_RATE_LIMIT"}
SESSION_FORCE_SETTING = "FORCE_SESSION_RATE_LIMIT"
#: Every rate-limit setting (the startup check parses each).
ALL_SETTINGS = (*SETTING.values(), SESSION_FORCE_SETTING)
PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}
_LIMIT = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+)\s*$")


@dataclass(frozen=True)
class Limit:
    requests: int
    seconds: int


class RateLimited(ServiceError):
    status = 429

    def __init__(self, detail: str, retry_after: int):
        super().__init__(detail)
        self.retry_after = retry_after


def parse_limit(text: str, name: str = "rate limit") -> Limit | None:
    """``"60/min"`` -> Limit(60, 60); empty -> None (no limit)."""
    if not text.strip():
        return None
    m = _LIMIT.match(text.lower())
    if m is None or m.group(2) not in PERIODS or int(m.group(1)) < 1:
        raise ImproperlyConfigured(f"{name}: expected N/s, N/min or N/hour with N >= 1 (e.g. \"60/min\"), "
                                   f"got {text!r}")
    return Limit(int(m.group(1)), PERIODS[m.group(2)])


def check(project: Project, action: Action) -> None:
    """Count this request against the project's limit for ``action``, or refuse it."""
    name = SETTING[action]
    limit = parse_limit(getattr(settings, name, ""), name)
    if limit is None:
        return
    moment = now()
    epoch = int(moment.timestamp())
    start = datetime.fromtimestamp(epoch - epoch % limit.seconds, UTC)
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        RateWindow.objects.filter(project_id=project.pk, action=action, window_start__lt=start).delete()
        window, _ = RateWindow.objects.get_or_create(project_id=project.pk, action=action, window_start=start)
        if window.count >= limit.requests:
            retry = max(1, math.ceil((start + timedelta(seconds=limit.seconds) - moment).total_seconds()))
            raise RateLimited(f"rate limit: at most {limit.requests} {action} requests per {limit.seconds} s "
                              f"per project ({name}); retry in {retry} s", retry)
        RateWindow.objects.filter(pk=window.pk).update(count=F("count") + 1)


def check_session_force(session: Session) -> None:
    """Refuse a force that would make more forced runs of ``session`` within the window than
    FORCE_SESSION_RATE_LIMIT allows. Called under the session's row lock (``force_run``), so
    concurrent forces are counted one after the other."""
    limit = parse_limit(getattr(settings, SESSION_FORCE_SETTING, ""), SESSION_FORCE_SETTING)
    if limit is None:
        return
    moment = now()
    window = timedelta(seconds=limit.seconds)
    recent = list(CompactionRun.objects.filter(session_id=session.pk, force=True, created_at__gt=moment - window)
                  .order_by("-created_at").values_list("created_at", flat=True)[:limit.requests])
    if len(recent) < limit.requests:
        return
    retry = max(1, math.ceil((recent[-1] + window - moment).total_seconds()))
    raise RateLimited(f"too many forced compactions of session {session.pk}: at most {limit.requests} per "
                      f"{limit.seconds} s ({SESSION_FORCE_SETTING}); retry in {retry} s", retry)
