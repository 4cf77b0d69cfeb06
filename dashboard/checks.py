"""Startup checks (Django's system check framework, run by ``manage.py check``, ``migrate``
and ``runserver``): settings that would otherwise fail only on the first request that reads
them are reported when the service starts."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

from .services.rate_limits import ALL_SETTINGS, parse_limit


@register()
def rate_limit_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """FORCE_RATE_LIMIT, IMPORT_RATE_LIMIT and FORCE_SESSION_RATE_LIMIT must parse (``"60/min"``)
    or be empty."""
    errors = []
    for name in ALL_SETTINGS:
        try:
            parse_limit(str(getattr(settings, name, "") or ""), name)
        except ImproperlyConfigured as exc:
            errors.append(Error(str(exc), hint=f"Set {name} to e.g. 60/min, or leave it empty for no limit.",
                                id="dashboard.E001"))
    return errors
