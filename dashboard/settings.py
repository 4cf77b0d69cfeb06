"""Settings for compaction studio. Everything that differs between machines comes from the
environment (or a ``.env`` file at the repository root, which never overrides a variable
that is already exported). docs/SERVICE.md has the table of every variable.

Zero-setup defaults: SQLite in ``<repo>/.data/db.sqlite3`` and Celery's filesystem broker
in ``<repo>/.data/broker``. Production: ``DATABASE_URL=postgres://...`` and
``CELERY_BROKER_URL=redis://...``.
"""
from __future__ import annotations

import json
import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from dashboard.brokers import filesystem_transport_options
from dashboard.schedules import beat_schedule

BASE_DIR = Path(__file__).resolve().parent.parent


def _load_dotenv(path: Path) -> None:
    """KEY=VALUE lines; '#' comments; optional quotes. Exported variables win."""
    if not path.is_file():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip().removeprefix("export ").strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        os.environ.setdefault(key, value)


_load_dotenv(BASE_DIR / ".env")


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name, "").strip()
    return [v.strip() for v in value.split(",") if v.strip()] if value else default


DATA_DIR = Path(os.environ.get("DATA_DIR") or BASE_DIR / ".data").resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY", "").strip()
    if key:
        return key
    if not DEBUG and not env_bool("ALLOW_GENERATED_SECRET_KEY", True):
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    # Zero-setup: one random key per data dir, kept so sessions survive restarts.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50), encoding="utf-8")
        path.chmod(0o600)
    return path.read_text(encoding="utf-8").strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    # ninja in INSTALLED_APPS makes /api/docs use the swagger-ui files ninja ships
    # (static/ninja/...), never a CDN.
    "ninja",
    "axes",
    "dashboard.apps.DashboardConfig",
]

MIDDLEWARE = [
    "dashboard.middleware.RequestSizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "dashboard.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
WSGI_APPLICATION = "dashboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# -- database -------------------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip() or f"sqlite:///{DATA_DIR / 'db.sqlite3'}"
# Health checks: a kept connection the server dropped while it sat idle (PostgreSQL
# restarted, pg_terminate_backend, a proxy's idle timeout) is noticed when a request or a
# task first uses it, and replaced, instead of failing that request (500) or task.
_db = dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60), conn_health_checks=True)
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE: a transaction takes the write lock when it starts, so two concurrent
    # read-modify-write transactions queue instead of failing with "database is locked".
    # WAL lets readers (the API, the dashboard) run while a worker writes.
    _db["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env_int("SQLITE_TIMEOUT", 60),
        # journal_mode=WAL is stored in the database file; dashboard.apps sets it once.
        "init_command": "PRAGMA synchronous=NORMAL;",
    }
    # Tests share their database with real worker processes, so it must be a file.
    # One file per test process, so two test runs on one machine never share it.
    _db["TEST"] = {"NAME": os.environ.get("TEST_SQLITE_PATH") or str(DATA_DIR / f"test_db_{os.getpid()}.sqlite3")}
else:
    _db.setdefault("TEST", {})
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# -- auth, i18n, static ------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
# Sign-in throttling (django-axes): after LOGIN_FAILURE_LIMIT failed attempts for one user
# name from one address, that pair is locked out for LOGIN_LOCKOUT_MINUTES. API keys are
# checked elsewhere (dashboard.api.auth) and are not counted here.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("LOGIN_LOCKOUT_MINUTES", 15.0))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "pages/locked_out.html"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
# Serve /static/ from Django itself (fine for one small service; put a reverse proxy or a
# CDN in front in production and set SERVE_STATIC=0 there).
SERVE_STATIC = env_bool("SERVE_STATIC", True)

# -- HTTPS and browser protections ---------------------------------------------------------
# COMPACTION_HTTPS (default: on unless DEBUG) says the dashboard is reached over HTTPS:
# cookies are then sent over HTTPS only and HTTPS responses carry HSTS. `make run` sets
# DEBUG=1, so the local server keeps working over plain http.
COMPACTION_HTTPS = env_bool("COMPACTION_HTTPS", not DEBUG)
SESSION_COOKIE_SECURE = COMPACTION_HTTPS
CSRF_COOKIE_SECURE = COMPACTION_HTTPS
SESSION_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600) if COMPACTION_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Behind a TLS-terminating proxy Django sees plain http; the proxy's X-Forwarded-Proto
# header is believed only when the operator says the proxy sets it.
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy of every response (dashboard.middleware): scripts, styles and
# images from this server only, no inline script or style.
CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "font-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}

# The full-message view shows at most this many characters per page; the rest is paged,
# and the whole text is offered as a download.
MESSAGE_PAGE_CHARS = env_int("MESSAGE_PAGE_CHARS", 100_000)

# -- API ------------------------------------------------------------------------------------
# Bodies above this size get 413 before anything reads them.
API_MAX_REQUEST_BYTES = env_int("API_MAX_REQUEST_BYTES", 50 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_REQUEST_BYTES
API_PAGE_SIZE = env_int("API_PAGE_SIZE", 50)
API_MAX_PAGE_SIZE = 500
# Seconds an API key lookup is cached in each web process (revocation takes this long).
API_KEY_CACHE_SECONDS = env_float("API_KEY_CACHE_SECONDS", 5.0)

# Where "load sample sessions" (a project's empty state) reads session files: the operator's
# folder, never one a client names. The smallest SAMPLE_SESSIONS files are loaded; with no
# folder, the bundled sample in dashboard/fixtures/.
CORPUS_DIR = Path(os.environ.get("CORPUS_DIR") or BASE_DIR.parent / "shared" / "corpus")
SAMPLE_SESSIONS = env_int("SAMPLE_SESSIONS", 3)

# -- compaction defaults -------------------------------------------------------------------
# Used when a project has no active policy: a preset name, a JSON object, or a path to a
# JSON file. Empty = the engine's "default" preset.
COMPACTION_DEFAULT_POLICY = os.environ.get("COMPACTION_DEFAULT_POLICY", "").strip()
# litellm model string for summaries when the policy names none (empty = offline
# extractive summarizer, no LLM). With its server address and key variable it forms the
# model connection named "default" (dashboard.services.connections). Provider keys are
# read by litellm from the usual variables (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).
COMPACTION_SUMMARIZER_MODEL = os.environ.get("COMPACTION_SUMMARIZER_MODEL", "").strip()
COMPACTION_SUMMARIZER_API_BASE = os.environ.get("COMPACTION_SUMMARIZER_API_BASE", "").strip()
COMPACTION_SUMMARIZER_API_KEY_ENV = os.environ.get("COMPACTION_SUMMARIZER_API_KEY_ENV", "").strip()
COMPACTION_SUMMARIZER_ALLOW_PRIVATE_NETWORK = env_bool("COMPACTION_SUMMARIZER_ALLOW_PRIVATE_NETWORK", False)


def _connections_setting(value: str) -> list[dict]:
    """COMPACTION_CONNECTIONS: a JSON list of connection objects, inline or in a .json file.
    Only the JSON is read here; each connection is checked by dashboard.services.connections
    (at startup by ``manage.py check``/``runserver``, and before a run uses it)."""
    value = value.strip()
    if not value:
        return []
    if not value.startswith(("[", "{")):
        path = Path(value)
        if not path.is_file():
            raise ImproperlyConfigured(f"COMPACTION_CONNECTIONS is neither a JSON list nor an existing file: {value!r}")
        value = path.read_text(encoding="utf-8")
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"COMPACTION_CONNECTIONS is not valid JSON: {exc}") from exc
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ImproperlyConfigured("COMPACTION_CONNECTIONS must be a JSON list of objects "
                                   '([{"name": ..., "models": [...], ...}])')
    return data


# Model connections the operator offers to policies (summarizer.connection): name, models,
# api_base, api_key_env, allow_private_network. docs/SERVICE.md describes the fields.
COMPACTION_CONNECTIONS = _connections_setting(os.environ.get("COMPACTION_CONNECTIONS", ""))

# -- gateway (POST /v1/chat/completions) -------------------------------------------------------
# The default upstream: an OpenAI-compatible server that receives every model name without a
# provider prefix, with this key (the client's project key is never forwarded). Prefixed
# names go to a model connection (COMPACTION_CONNECTIONS / admin) whose models allow them.
GATEWAY_API_BASE = os.environ.get("GATEWAY_API_BASE", "").strip()
GATEWAY_API_KEY = os.environ.get("GATEWAY_API_KEY", "").strip()
# The upstreams that serve OpenAI's Responses API themselves, by name: GATEWAY_API_BASE and/or
# model connections' names, comma-separated. POST /v1/responses passes through to their
# /responses (after compaction) instead of translating to chat completions.
GATEWAY_RESPONSES_PASSTHROUGH = frozenset(
    n.strip() for n in os.environ.get("GATEWAY_RESPONSES_PASSTHROUGH", "").split(",") if n.strip())
# Seconds an upstream call may take; seconds a request waits for a compaction run another
# worker is executing before it answers with what it has.
GATEWAY_TIMEOUT = env_float("GATEWAY_TIMEOUT", 600.0)
GATEWAY_COMPACTION_WAIT = env_float("GATEWAY_COMPACTION_WAIT", 120.0)
# Days the call inspector keeps what each call sent and got back (GatewayCallBody; the call's
# figures stay); 0 keeps none. Checked at most every GATEWAY_CALL_BODY_SWEEP seconds per process.
GATEWAY_CALL_BODY_DAYS = env_float("GATEWAY_CALL_BODY_DAYS", 14.0)
GATEWAY_CALL_BODY_SWEEP = env_float("GATEWAY_CALL_BODY_SWEEP", 3600.0)

# -- runs ------------------------------------------------------------------------------------
RUN_SOFT_TIME_LIMIT = env_int("RUN_SOFT_TIME_LIMIT", 600)
RUN_TIME_LIMIT = env_int("RUN_TIME_LIMIT", 660)
# A running run writes a heartbeat this often; one silent for RUN_STALE_AFTER seconds
# belongs to a dead worker and is queued again (at most RUN_MAX_DELIVERIES executions).
# Every worker checks every RUN_RECOVERY_INTERVAL seconds, so a dead run is noticed within
# RUN_STALE_AFTER + RUN_RECOVERY_INTERVAL (13 s with the defaults).
RUN_HEARTBEAT_INTERVAL = env_float("RUN_HEARTBEAT_INTERVAL", 2.0)
# A run writes its progress and events as they come only once it has run this long; a
# shorter one (most runs with the offline summarizer) writes them once, with its outcome.
RUN_PROGRESS_AFTER = env_float("RUN_PROGRESS_AFTER", 0.5)
RUN_STALE_AFTER = env_float("RUN_STALE_AFTER", 10.0)
RUN_RECOVERY_INTERVAL = env_float("RUN_RECOVERY_INTERVAL", 3.0)
RUN_MAX_DELIVERIES = env_int("RUN_MAX_DELIVERIES", 3)
# A queued run whose session is idle and whose task was sent this long ago is sent again
# (its message may be lost: the filesystem broker drops what a killed worker had reserved).
RUN_RESEND_AFTER = env_float("RUN_RESEND_AFTER", 300.0)
# Sync fallback: a run whose task cannot be enqueued (broker down, or more
# than RUN_QUEUE_MAX runs waiting; 0 = no limit) executes inline in the request. Publishing
# is retried RUN_ENQUEUE_RETRIES times (0.2-0.5 s apart) before falling back.
RUN_QUEUE_MAX = env_int("RUN_QUEUE_MAX", 0)
RUN_ENQUEUE_RETRIES = env_int("RUN_ENQUEUE_RETRIES", 2)
# Worker liveness: each worker's main process beats every WORKER_HEARTBEAT_INTERVAL seconds
# (a WorkerBeat row); none beat within WORKER_LIVE_WITHIN seconds = no live worker. A run
# queued then shows "waiting for a worker", and after RUN_NO_WORKER_WAIT seconds executes in
# the process that queued it (RUN_NO_WORKER_FALLBACK=inline) or keeps waiting, saying so (off).
WORKER_HEARTBEAT_INTERVAL = env_float("WORKER_HEARTBEAT_INTERVAL", 2.0)
WORKER_LIVE_WITHIN = env_float("WORKER_LIVE_WITHIN", 10.0)
RUN_NO_WORKER_WAIT = env_float("RUN_NO_WORKER_WAIT", 20.0)
# Two-dimensional tuning grids (dashboard.services.tuning_grids): a grid's replays (cells x
# sessions) are split into at most TUNING_GRID_CHUNKS worker tasks run in parallel; a grid of
# more than TUNING_GRID_MAX_REPLAYS replays is refused with the count.
TUNING_GRID_CHUNKS = env_int("TUNING_GRID_CHUNKS", 16)
TUNING_GRID_MAX_REPLAYS = env_int("TUNING_GRID_MAX_REPLAYS", 5000)
RUN_NO_WORKER_FALLBACK = os.environ.get("RUN_NO_WORKER_FALLBACK", "inline").strip().lower() or "inline"
if RUN_NO_WORKER_FALLBACK not in ("inline", "off"):
    raise ImproperlyConfigured(f"RUN_NO_WORKER_FALLBACK must be 'inline' or 'off', not {RUN_NO_WORKER_FALLBACK!r}")
# Per-project limits on API requests that queue work: "60/min" (also /s, /sec, /h, /hour),
# empty = no limit. Counted in the database, so every web process shares them.
FORCE_RATE_LIMIT = os.environ.get("FORCE_RATE_LIMIT", "").strip()
IMPORT_RATE_LIMIT = os.environ.get("IMPORT_RATE_LIMIT", "").strip()
# Forced runs of one session (API and dashboard), in any window of the period; a force
# answered with the session's pending forced run does not count. Empty = no limit.
FORCE_SESSION_RATE_LIMIT = os.environ.get("FORCE_SESSION_RATE_LIMIT", "5/min").strip()
# The most messages one imported session may hold (API, upload page, import_sessions): more is
# refused with 413 before anything is written. An import is read, counted and written
# IMPORT_CHUNK_MESSAGES messages at a time, so its memory does not grow with its length.
IMPORT_MAX_MESSAGES = max(1, env_int("IMPORT_MAX_MESSAGES", 500_000))
IMPORT_CHUNK_MESSAGES = max(1, env_int("IMPORT_CHUNK_MESSAGES", 2_000))

# -- Celery ------------------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "").strip() or "filesystem://"
BROKER_DIR = Path(os.environ.get("BROKER_DIR") or DATA_DIR / "broker").resolve()
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_transport_options(
        BROKER_DIR, env_float("BROKER_POLLING_INTERVAL", 0.1))
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Unacknowledged messages return to the queue after this long; recovery of runs
        # whose worker died does not wait for it (see RUN_STALE_AFTER).
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", RUN_TIME_LIMIT + 120),
        "polling_interval": env_float("BROKER_POLLING_INTERVAL", 0.1),
    }
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Redis: take one message at a time (fair across many workers). Filesystem broker (one
# machine): the prefork pool acknowledges a finished task only when the polling loop
# wakes (up to 2 s), and with a prefetch of 1 the next message waits for that ack.
CELERY_WORKER_PREFETCH_MULTIPLIER = env_int(
    "CELERY_WORKER_PREFETCH_MULTIPLIER", 4 if CELERY_BROKER_URL.startswith("filesystem://") else 1)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SOFT_TIME_LIMIT = RUN_SOFT_TIME_LIMIT
CELERY_TASK_TIME_LIMIT = RUN_TIME_LIMIT
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "compaction")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# -- Continuous tuning (dashboard/services/continuous_tuning.py, docs/SERVICE.md) ----------------
# Celery beat (started by `make run` beside the worker) sends the tuning task on this schedule;
# its schedule file lives in DATA_DIR, never in the working directory.
TUNING_SCHEDULE = os.environ.get("TUNING_SCHEDULE", "daily").strip()
try:
    CELERY_BEAT_SCHEDULE = beat_schedule(TUNING_SCHEDULE)
except ValueError as _exc:
    raise ImproperlyConfigured(str(_exc)) from None
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
TUNING_WINDOW_DAYS = env_float("TUNING_WINDOW_DAYS", 7.0)
TUNING_TIME_BUDGET = env_float("TUNING_TIME_BUDGET", 120.0)
TUNING_REPLAY_TOKENS_PER_SECOND = env_float("TUNING_REPLAY_TOKENS_PER_SECOND", 1_000_000.0)
TUNING_RECALL_TARGET = env_float("TUNING_RECALL_TARGET", 0.98)
TUNING_AUTO_APPLY = env_bool("TUNING_AUTO_APPLY", False)
TUNING_RECALL_FLOOR = env_float("TUNING_RECALL_FLOOR", 0.98)
TUNING_MAX_STEP = env_float("TUNING_MAX_STEP", 0.15)
for _name in ("TUNING_WINDOW_DAYS", "TUNING_TIME_BUDGET", "TUNING_REPLAY_TOKENS_PER_SECOND", "TUNING_MAX_STEP"):
    if not globals()[_name] > 0:
        raise ImproperlyConfigured(f"{_name} must be a positive number, not {globals()[_name]!r}")
for _name in ("TUNING_RECALL_TARGET", "TUNING_RECALL_FLOOR"):
    if not 0 <= globals()[_name] <= 1:
        raise ImproperlyConfigured(f"{_name} must be a share between 0 and 1 (0.98 for 98%), not {globals()[_name]!r}")

# Every handler drops credentials found in query strings (dashboard.log_filters).
# django.request goes to the console whatever DEBUG says: with Django's own defaults a 500
# leaves its traceback nowhere when DEBUG is off.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"scrub_credentials": {"()": "dashboard.log_filters.ScrubCredentials"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "server": {"()": "django.utils.log.ServerFormatter", "format": "[{server_time}] {message}", "style": "{"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["scrub_credentials"]},
        "server": {"class": "logging.StreamHandler", "formatter": "server", "filters": ["scrub_credentials"]},
    },
    "loggers": {
        "dashboard": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
        "django.request": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "django.server": {"handlers": ["server"], "level": "INFO", "propagate": False},
    },
}


def _check_default_policy() -> None:
    """Fail at startup, not at the first compaction, on a broken COMPACTION_DEFAULT_POLICY."""
    value = COMPACTION_DEFAULT_POLICY
    if value.startswith("{"):
        try:
            json.loads(value)
        except ValueError as exc:
            raise ImproperlyConfigured(f"COMPACTION_DEFAULT_POLICY is not valid JSON: {exc}") from exc


_check_default_policy()
