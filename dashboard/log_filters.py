"""Credentials never reach a log line.

API keys belong in a header, but a client may still put one in a URL
(``/api/sessions?api_key=cs_...``); the request is refused, yet the request line would be
written to the access log as sent. ``scrub_credentials`` rewrites such query values, and
``ScrubCredentials`` applies it to every record of the loggers settings.LOGGING attaches it
to (runserver's ``django.server``, ``django.request`` and ours), together with
``compaction.redaction.redact`` on the message and any traceback: an upstream's error text
logged with a failure carries no secret it echoed (the operator's keys, bearer tokens).
``dashboard.gunicorn_logging`` does the same for gunicorn's access log.

Logging is configured before Django loads the models, so this module imports nothing of the
dashboard.
"""
from __future__ import annotations

import logging
import re

from compaction.redaction import redact

# The prefix of every API key (dashboard.services.keys.KEY_PREFIX; a test keeps them equal).
API_KEY_PREFIX = "cs_"
SCRUBBED = "[scrubbed]"

# Query parameters that carry a secret whatever their value looks like.
CREDENTIAL_NAMES = frozenset({
    "key", "api_key", "apikey", "x_api_key", "token", "access_token", "refresh_token", "id_token", "auth",
    "authorization", "bearer", "password", "passwd", "pwd", "secret", "client_secret", "credential",
    "credentials", "signature", "sig", "sessionid", "csrfmiddlewaretoken",
})
CREDENTIAL_SUFFIXES = ("_token", "_secret", "_password", "api_key", "apikey")

# name=value inside a query string: after '?' or '&' (or ';'), up to the next separator or
# the end of the request line ("GET /path?x=1 HTTP/1.1").
_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&;#\s]+)=(?P<value>[^&;#\s\"]*)")


def _is_credential(name: str, value: str) -> bool:
    norm = name.lower().replace("-", "_")
    return (norm in CREDENTIAL_NAMES or norm.endswith(CREDENTIAL_SUFFIXES)
            or value.startswith(API_KEY_PREFIX) or value.lower().startswith(("bearer%20", "bearer+")))


def scrub_credentials(text: str) -> str:
    """``text`` with the value of every credential-looking query parameter replaced."""
    if "=" not in text:
        return text

    def replace(m: re.Match[str]) -> str:
        if not _is_credential(m["name"], m["value"]):
            return m[0]
        return f"{m['lead']}{m['name']}={SCRUBBED}"

    return _PARAM.sub(replace, text)


def scrub_query_string(query: str) -> str:
    """A bare query string (no leading '?'), as a WSGI QUERY_STRING holds it."""
    return scrub_credentials("?" + query)[1:] if query else query


class ScrubCredentials(logging.Filter):
    """Rewrites a record whose formatted message or traceback holds a credential: in a query
    string, a known secret value or anything shaped like a key or bearer token."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot format is left to the handler to report
            return True
        scrubbed = scrub_credentials(redact(message))
        if scrubbed != message:
            record.msg, record.args = scrubbed, ()
        if record.exc_info and not record.exc_text:
            # the handler's formatter uses a record's exc_text when it is set
            record.exc_text = redact(_TRACEBACKS.formatException(record.exc_info))
        return True


_TRACEBACKS = logging.Formatter()
