"""gunicorn's access log without credentials: ``gunicorn.conf.py`` at the repository root
(which gunicorn reads from the directory it starts in) names this logger class. Every
request line, query string and referrer goes through dashboard.log_filters, and the
headers that carry an API key never appear, whatever ``access_log_format`` asks for."""
from __future__ import annotations

from gunicorn.glogging import Logger  # type: ignore[import-untyped]  # gunicorn ships no type hints

from .log_filters import SCRUBBED, scrub_credentials, scrub_query_string

SECRET_HEADERS = ("{authorization}i", "{x-api-key}i", "{cookie}i", "{proxy-authorization}i")


class ScrubbingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for name in ("r", "f"):
            if isinstance(atoms.get(name), str):
                atoms[name] = scrub_credentials(atoms[name])
        if isinstance(atoms.get("q"), str):
            atoms["q"] = scrub_query_string(atoms["q"])
        for name in SECRET_HEADERS:
            if name in atoms:
                atoms[name] = SCRUBBED
        return atoms
