"""Model connections: the summarizer endpoints a policy may use, declared by the operator.

A policy sent by a client (API key, dashboard form) never says where a summary request
goes nor which of the server's environment variables is its key: it names an operator's
connection in ``summarizer.connection`` (or names none, and the one connection that
serves all its models is used). The operator declares connections in settings
(``COMPACTION_CONNECTIONS``, plus the implicit ``default`` made of
``COMPACTION_SUMMARIZER_MODEL`` / ``_API_BASE`` / ``_API_KEY_ENV``) and in the admin
(:class:`dashboard.models.ModelConnection`).

Two entry points:

- :func:`check_client_policy` when a client sends a policy or overrides: refuses
  ``summarizer.api_base``, ``summarizer.api_key_env``, an unknown connection, a model the
  connection does not allow and ``summarizer.params`` outside :data:`ALLOWED_PARAMS`,
  each as a :class:`PolicyError` naming the field (the API answers 422);
- :func:`resolve` right before the engine runs a policy: fills in the connection's
  address and key variable. A stored policy that still carries its own ``api_base`` or
  ``api_key_env`` (saved before connections existed) is refused here, naming the field,
  so the run fails with a message telling the operator to move it to a connection.

A connection's address may not be loopback, private, link-local or unspecified unless it
allows private networks (a local llama.cpp is a legitimate operator choice). Host names
are resolved when the connection is checked; a name that later resolves elsewhere (DNS
rebinding) is not caught, since the HTTP client resolves again when it connects.
"""
from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from compaction import Policy, PolicyError
from compaction.summarizer.llm import is_extractive

from ..models import ModelConnection

DEFAULT_NAME = "default"

# Extra litellm.completion arguments a client may set in summarizer.params: sampling and
# length controls only. Anything that can change where a request goes or what credentials
# it carries (api_base, base_url, api_key, extra_headers, custom_llm_provider, metadata...)
# is the operator's business and is refused.
ALLOWED_PARAMS = frozenset({
    "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "seed", "stop",
    "presence_penalty", "frequency_penalty", "logit_bias", "reasoning_effort", "user",
})

# Sent as the key when a connection has a server address but no key variable: litellm
# would otherwise send the provider's key from the environment (OPENAI_API_KEY...) to
# that server, and the OpenAI client refuses to send a request with no key at all.
NO_KEY = "no-key"

ConnectionSource = Literal["settings", "admin"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
_FIELDS = frozenset({"name", "models", "api_base", "api_key_env", "allow_private_network", "description"})

_CLIENT_FIELD = ("is set by the operator, not by a policy: name an operator's model connection in "
                 "summarizer.connection instead")
_STORED_FIELD = ("this stored policy names its own {what}, which policies may no longer do: the operator "
                 "declares the server as a model connection (COMPACTION_CONNECTIONS or the admin) and the "
                 "policy names it in summarizer.connection; remove summarizer.{field} from the policy")


class ConnectionInvalid(ValueError):
    """An operator's connection is unusable; ``field`` names the connection field at fault."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Connection:
    name: str
    models: tuple[str, ...]
    api_base: str | None = None
    api_key_env: str | None = None
    allow_private_network: bool = False
    source: ConnectionSource = "settings"

    def allows(self, model: str) -> bool:
        """``model`` is one of the listed names, or starts with a listed ``prefix*``."""
        return any(model.startswith(p[:-1]) if p.endswith("*") else model == p for p in self.models)


# -- declaring ------------------------------------------------------------------------------

def build(name: Any, models: Any, api_base: Any = None, api_key_env: Any = None,
          allow_private_network: Any = False, source: ConnectionSource = "settings") -> Connection:
    """A connection from its declared fields, checked for shape (not for its address:
    :func:`check_address` does that). Raises :class:`ConnectionInvalid`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConnectionInvalid(f"{name!r} is not a connection name (letters, digits, '.', '_', '-'; "
                                f"at most 100)", "name")
    if isinstance(models, str):
        models = models.splitlines()
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise ConnectionInvalid("give a list of litellm model strings", "models")
    cleaned = tuple(m.strip() for m in models if m.strip())
    if not cleaned:
        raise ConnectionInvalid("list at least one model (or a prefix ending in *, such as openai/*)", "models")
    if api_base is not None and not isinstance(api_base, str):
        raise ConnectionInvalid("give the server address as a URL string", "api_base")
    base = (api_base or "").strip() or None
    if base is not None:
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectionInvalid(f"{base!r} is not an http(s) URL with a host", "api_base")
        try:
            parts.port  # noqa: B018 - urlsplit checks the port only when it is read
        except ValueError as exc:
            raise ConnectionInvalid(f"{base!r}: {exc}", "api_base") from None
    if api_key_env is not None and not isinstance(api_key_env, str):
        raise ConnectionInvalid("give the name of an environment variable", "api_key_env")
    key_env = (api_key_env or "").strip() or None
    if key_env is not None and not _ENV_NAME.match(key_env):
        raise ConnectionInvalid(f"{key_env!r} is not an environment variable name", "api_key_env")
    if not isinstance(allow_private_network, bool):
        raise ConnectionInvalid("give true or false", "allow_private_network")
    return Connection(name, cleaned, base, key_env, allow_private_network, source)


def _blocked(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    return (address.is_private or address.is_loopback or address.is_link_local or address.is_unspecified
            or address.is_reserved or address.is_multicast)


def check_address(api_base: str | None, allow_private_network: bool) -> None:
    """Refuse a server address that is (or resolves to) a loopback, private, link-local or
    unspecified address, unless private networks are allowed. Raises ConnectionInvalid."""
    if api_base is None or allow_private_network:
        return
    parts = urlsplit(api_base)
    host = parts.hostname or ""
    try:
        addresses = {ipaddress.ip_address(host.split("%", 1)[0])}
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80),
                                       type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConnectionInvalid(f"the host of {api_base!r} cannot be resolved ({exc})", "api_base") from None
        addresses = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos}
    blocked = sorted(str(a) for a in addresses if _blocked(a))
    if blocked:
        raise ConnectionInvalid(f"{api_base!r} is a loopback, private or link-local address ({', '.join(blocked)}); "
                                f"allow private networks on this connection if that server is meant", "api_base")


def _settings_connections() -> list[Connection]:
    """The connections declared in settings, in order; the implicit ``default`` first.
    A malformed declaration raises ImproperlyConfigured naming the setting."""
    out: list[Connection] = []
    if settings.COMPACTION_SUMMARIZER_MODEL:
        try:
            out.append(build(DEFAULT_NAME, [settings.COMPACTION_SUMMARIZER_MODEL],
                             settings.COMPACTION_SUMMARIZER_API_BASE or None,
                             settings.COMPACTION_SUMMARIZER_API_KEY_ENV or None,
                             settings.COMPACTION_SUMMARIZER_ALLOW_PRIVATE_NETWORK))
        except ConnectionInvalid as exc:
            setting = {"api_base": "COMPACTION_SUMMARIZER_API_BASE",
                       "api_key_env": "COMPACTION_SUMMARIZER_API_KEY_ENV"}.get(exc.field or "",
                                                                               "COMPACTION_SUMMARIZER_MODEL")
            raise ImproperlyConfigured(f"{setting}: {exc}") from None
    for i, item in enumerate(settings.COMPACTION_CONNECTIONS):
        unknown = sorted(set(item) - _FIELDS)
        where = f"COMPACTION_CONNECTIONS[{i}]"
        if unknown:
            raise ImproperlyConfigured(f"{where}: unknown field {unknown[0]!r}; fields are "
                                       f"{', '.join(sorted(_FIELDS))}")
        try:
            conn = build(item.get("name"), item.get("models"), item.get("api_base"), item.get("api_key_env"),
                         item.get("allow_private_network", False))
        except ConnectionInvalid as exc:
            raise ImproperlyConfigured(f"{where}.{exc.field}: {exc}") from None
        if any(c.name == conn.name for c in out):
            raise ImproperlyConfigured(f"{where}: a connection named {conn.name!r} is declared twice"
                                       + (" (COMPACTION_SUMMARIZER_MODEL makes the 'default' one)"
                                          if conn.name == DEFAULT_NAME else ""))
        out.append(conn)
    return out


def settings_connection_names() -> set[str]:
    return {c.name for c in _settings_connections()}


# Environment variables whose names say they hold a credential (the provider keys litellm
# reads, OPENAI_API_KEY, ANTHROPIC_API_KEY ..., and any other *_KEY, *_TOKEN, *_SECRET).
_SECRET_ENV_NAME = re.compile(r"(?:^|_)(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)$")


def configured_secrets() -> list[str]:
    """Every secret value the settings name, for ``compaction.redaction`` (collected once, at
    startup): GATEWAY_API_KEY, SECRET_KEY, the key variable of each connection declared in
    settings (COMPACTION_SUMMARIZER_API_KEY_ENV, COMPACTION_CONNECTIONS) and every
    environment variable named like a credential. An admin's connection is added when the
    gateway or a run first reads its key."""
    values: list[str | None] = [settings.GATEWAY_API_KEY, settings.SECRET_KEY]
    env_names = {name for name in os.environ if _SECRET_ENV_NAME.search(name.upper())}
    try:
        env_names.update(c.api_key_env for c in _settings_connections() if c.api_key_env)
    except ImproperlyConfigured:
        pass  # reported by the startup check (connection_settings); redaction still covers the rest
    values += [os.environ.get(name) for name in sorted(env_names)]
    return [v for v in values if v]


def registry() -> dict[str, Connection]:
    """Every connection by name: settings first (in declared order), then the admin's
    (by name); a settings connection wins over an admin one of the same name."""
    out = {c.name: c for c in _settings_connections()}
    for row in ModelConnection.objects.order_by("name"):
        if row.name in out:
            continue
        try:
            out[row.name] = build(row.name, row.model_list(), row.api_base or None, row.api_key_env or None,
                                  row.allow_private_network, source="admin")
        except ConnectionInvalid:
            continue  # saved past the admin's checks (shell, fixture): never offered
    return out


# -- policies -----------------------------------------------------------------------------------

def _llm_models(policy: Policy) -> list[tuple[str, str]]:
    """(field, model) of every model that goes over the network (the offline extractive
    summarizer, model empty or ``extractive/...``, needs no connection)."""
    s = policy.summarizer
    out = [("summarizer.model", s.model)] if s.model and not is_extractive(s.model) else []
    out += [(f"summarizer.failover_models.{i}", m) for i, m in enumerate(s.failover_models)
            if m and not is_extractive(m)]
    return out


def check_params(params: dict[str, Any]) -> None:
    for key in params:
        if key not in ALLOWED_PARAMS:
            raise PolicyError(f"{key!r} may not be set by a policy; allowed: {', '.join(sorted(ALLOWED_PARAMS))}",
                              field=f"summarizer.params.{key}")


def _names(known: Iterable[str]) -> str:
    names = sorted(known)
    return ", ".join(names) if names else "none is declared"


def choose(policy: Policy, known: dict[str, Connection] | None = None) -> Connection | None:
    """The connection the policy's summary requests go through (None: no model needs one).
    Raises PolicyError naming the field when the connection is unknown or does not allow
    a model of the policy."""
    known = registry() if known is None else known
    models = _llm_models(policy)
    name = policy.summarizer.connection
    if name is not None:
        conn = known.get(name)
        if conn is None:
            raise PolicyError(f"no model connection named {name!r}; connections: {_names(known)}",
                              field="summarizer.connection")
        for field, model in models:
            if not conn.allows(model):
                raise PolicyError(f"connection {name!r} does not allow model {model!r}; it allows "
                                  f"{', '.join(conn.models)}", field=field)
        return conn if models else None
    if not models:
        return None
    for field, model in models:
        if not any(c.allows(model) for c in known.values()):
            raise PolicyError(f"no model connection allows {model!r}; connections: {_names(known)} (the operator "
                              f"declares them; leave the model empty for the offline summarizer)", field=field)
    for conn in known.values():
        if all(conn.allows(m) for _f, m in models):
            return conn
    raise PolicyError("no one connection allows every model of this policy; name one in summarizer.connection "
                      "whose models cover the primary and failover models", field="summarizer.connection")


def check_client_policy(policy: Policy) -> Policy:
    """Refuse what a client may not decide (PolicyError naming the field); returns the policy."""
    s = policy.summarizer
    for field in ("api_base", "api_key_env"):
        if getattr(s, field) is not None:
            raise PolicyError(_CLIENT_FIELD, field=f"summarizer.{field}")
    check_params(s.params)
    choose(policy)
    return policy


def resolve(policy: Policy) -> Policy:
    """The policy the engine runs: the connection's server address and key variable filled
    in. Raises PolicyError naming the field when the policy may not run as stored."""
    s = policy.summarizer
    for field, what in (("api_base", "server address"), ("api_key_env", "key variable")):
        if getattr(s, field) is not None:
            raise PolicyError(_STORED_FIELD.format(what=what, field=field), field=f"summarizer.{field}")
    check_params(s.params)
    try:
        conn = choose(policy)
    except ImproperlyConfigured as exc:
        raise PolicyError(f"the operator's connections are misconfigured: {exc}",
                          field="summarizer.connection") from None
    if conn is None:
        return policy
    try:
        check_address(conn.api_base, conn.allow_private_network)
    except ConnectionInvalid as exc:
        raise PolicyError(f"the operator's connection {conn.name!r} is unusable: {exc}",
                          field="summarizer.connection") from None
    overrides: dict[str, Any] = {"summarizer.api_base": conn.api_base, "summarizer.api_key_env": conn.api_key_env}
    if conn.api_base and not conn.api_key_env:
        overrides["summarizer.params"] = {**s.params, "api_key": NO_KEY}
    return policy.with_overrides(overrides)


# -- startup check ------------------------------------------------------------------------------

@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check`` / ``runserver`` / ``migrate``: the connections declared in settings
    are well formed and their addresses allowed (an unresolvable host only warns: the
    machine may be offline now)."""
    try:
        declared = _settings_connections()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="dashboard.E101")]
    out: list[checks.CheckMessage] = []
    for conn in declared:
        try:
            check_address(conn.api_base, conn.allow_private_network)
        except ConnectionInvalid as exc:
            level = checks.Warning if "cannot be resolved" in str(exc) else checks.Error
            out.append(level(f"model connection {conn.name!r}: {exc}", id="dashboard.E102"))
    return out
