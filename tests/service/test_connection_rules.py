"""The rules of operator model connections (dashboard.services.connections) on their own, in
seconds: how a declaration is checked, which addresses are refused, which connection a
policy's models go through, what a client may not set, and what a stored policy becomes
before it runs. test_connections.py shows the same rules end to end, through the API, the
dashboard and a scripted upstream.

Host names other than ``localhost`` and ``*.invalid`` cannot be resolved here (no network):
the tests that need a public name to resolve replace ``socket.getaddrinfo``, and say so."""
from __future__ import annotations

import socket

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from compaction import Policy, PolicyError
from dashboard.models import ModelConnection
from dashboard.services import connections
from dashboard.services.connections import ConnectionInvalid, build, check_address, choose, resolve


def invalid(field: str, *args, **kwargs) -> str:
    """The message of the ConnectionInvalid ``build(*args)`` raises, checked to name ``field``."""
    with pytest.raises(ConnectionInvalid) as caught:
        build(*args, **kwargs)
    assert caught.value.field == field, str(caught.value)
    return str(caught.value)


def policy(model: str | None = "openai/gpt-4o-mini", failover: tuple[str, ...] = (), connection: str | None = None,
           **summarizer) -> Policy:
    return Policy.load({"summarizer": {"model": model, "failover_models": list(failover), "connection": connection,
                                       **summarizer}})


def refused(call, *args) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        call(*args)
    return caught.value


@pytest.fixture
def declared(settings):
    """No implicit default connection and no settings connections, unless a test declares them."""
    settings.COMPACTION_SUMMARIZER_MODEL = ""
    settings.COMPACTION_SUMMARIZER_API_BASE = ""
    settings.COMPACTION_SUMMARIZER_API_KEY_ENV = ""
    settings.COMPACTION_SUMMARIZER_ALLOW_PRIVATE_NETWORK = False
    settings.COMPACTION_CONNECTIONS = []
    return settings


@pytest.fixture
def resolving_to(monkeypatch):
    """Make a host name resolve to given addresses (mocked: this machine has no DNS)."""
    asked: list[tuple] = []

    def install(*addresses: str):
        def fake(host, port, *args, **kwargs):
            asked.append((host, port))
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                    for a in addresses]
        monkeypatch.setattr(connections.socket, "getaddrinfo", fake)
        return asked
    return install


# -- declaring ---------------------------------------------------------------------------------

def test_a_declaration_is_cleaned_into_a_connection():
    conn = build("local.llm_1-b", " openai/*\n\n  anthropic/claude-x \n", "  https://llm.example.com:8443/v1 ",
                 "  LLM_KEY ", True, source="admin")
    assert conn == connections.Connection("local.llm_1-b", ("openai/*", "anthropic/claude-x"),
                                          "https://llm.example.com:8443/v1", "LLM_KEY", True, "admin")
    plain = build("p", ["gpt-4o"])
    assert (plain.api_base, plain.api_key_env, plain.allow_private_network, plain.source) == (None, None, False,
                                                                                               "settings")
    assert build("p", ["gpt-4o"], "   ", "  ").api_base is None
    assert build("p", ["gpt-4o"], "   ", "  ").api_key_env is None
    assert build("a" * 100, ["m"]).name == "a" * 100
    assert build("9", ["m"], api_key_env="_" + "A" * 199).api_key_env == "_" + "A" * 199


@pytest.mark.parametrize("name", [None, 7, "", "-lead", ".lead", "has space", "a" * 101, "semi;colon", "ü"])
def test_a_bad_connection_name_is_refused_naming_it(name):
    message = invalid("name", name, ["m"])
    assert message.startswith(f"{name!r} is not a connection name") and "at most 100" in message


@pytest.mark.parametrize("models", [None, {"openai/*": 1}, ["ok", 3], ("tuple",)])
def test_models_must_be_a_list_of_strings(models):
    assert invalid("models", "c", models) == "give a list of litellm model strings"


@pytest.mark.parametrize("models", [[], ["", "  "], "\n  \n"])
def test_at_least_one_model_is_listed(models):
    assert invalid("models", "c", models).startswith("list at least one model")


@pytest.mark.parametrize(("api_base", "says"), [
    (5, "give the server address as a URL string"),
    ("ftp://files.example.com", "'ftp://files.example.com' is not an http(s) URL with a host"),
    ("llm.example.com/v1", "'llm.example.com/v1' is not an http(s) URL with a host"),
    ("http:///v1", "'http:///v1' is not an http(s) URL with a host"),
    ("https://llm.example.com:99999/v1", "'https://llm.example.com:99999/v1': Port out of range 0-65535"),
    ("https://llm.example.com:port/v1", "'https://llm.example.com:port/v1': Port could not be cast"),
])
def test_a_bad_server_address_is_refused_naming_it(api_base, says):
    assert invalid("api_base", "c", ["m"], api_base).startswith(says)


@pytest.mark.parametrize(("key_env", "says"), [
    (["K"], "give the name of an environment variable"),
    ("1KEY", "'1KEY' is not an environment variable name"),
    ("MY-KEY", "'MY-KEY' is not an environment variable name"),
    ("K" * 201, f"{'K' * 201!r} is not an environment variable name"),
])
def test_a_bad_key_variable_is_refused_naming_it(key_env, says):
    assert invalid("api_key_env", "c", ["m"], None, key_env) == says


@pytest.mark.parametrize("flag", ["true", 1, None])
def test_allow_private_network_must_be_a_boolean(flag):
    assert invalid("allow_private_network", "c", ["m"], None, None, flag) == "give true or false"


def test_a_connection_allows_its_listed_names_and_prefixes():
    conn = build("c", ["gpt-4o", "anthropic/*"])
    assert conn.allows("gpt-4o") and conn.allows("anthropic/claude-x") and conn.allows("anthropic/")
    assert not conn.allows("gpt-4o-mini") and not conn.allows("openai/gpt-4o") and not conn.allows("anthropic")
    assert not conn.allows("xanthropic/claude") and not conn.allows("gpt-4")
    assert build("star", ["*"]).allows("anything/at-all")
    # a literal star only means a prefix at the end of a line
    assert not build("c", ["open*ai"]).allows("openXai")
    assert build("c", ["open*ai"]).allows("open*ai")


# -- addresses ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "blocked"), [
    ("http://240.0.0.1/v1", "240.0.0.1"),                         # reserved
    ("http://[4000::1]/v1", "4000::1"),                           # reserved IPv6, not counted as private
    ("http://224.0.0.251/v1", "224.0.0.251"),                     # multicast
    ("http://[ff02::1]/v1", "ff02::1"),                           # multicast, IPv6
    ("http://[::ffff:10.0.0.1]/v1", "::ffff:a00:1"),              # mapped private IPv4
    ("http://[::ffff:127.0.0.1]:8080/v1", "::ffff:7f00:1"),       # mapped loopback
    ("http://[fe80::1%25eth0]/v1", "fe80::1"),                     # scoped link-local
    ("https://127.0.0.1/v1", "127.0.0.1"),
])
def test_a_private_or_special_address_is_refused_naming_the_address(url, blocked):
    with pytest.raises(ConnectionInvalid) as caught:
        check_address(url, allow_private_network=False)
    assert caught.value.field == "api_base"
    assert str(caught.value) == (f"{url!r} is a loopback, private or link-local address ({blocked}); allow private "
                                 f"networks on this connection if that server is meant")
    check_address(url, allow_private_network=True)


@pytest.mark.parametrize("url", ["https://8.8.8.8/v1", "http://[2001:4860:4860::8888]/v1",
                                 "http://[::ffff:8.8.8.8]/v1"])
def test_a_public_address_is_allowed(url):
    check_address(url, allow_private_network=False)


def test_a_host_that_cannot_be_resolved_is_refused_unless_private_networks_are_allowed():
    with pytest.raises(ConnectionInvalid) as caught:
        check_address("https://llm.invalid/v1", allow_private_network=False)
    assert caught.value.field == "api_base"
    assert str(caught.value).startswith("the host of 'https://llm.invalid/v1' cannot be resolved (")
    check_address("https://llm.invalid/v1", allow_private_network=True)   # nothing to check then


def test_a_name_is_refused_when_any_of_its_addresses_is_private(resolving_to):
    asked = resolving_to("8.8.4.4", "10.9.8.7", "fd00::7", "192.168.0.1", "fe80::9%eth0")
    with pytest.raises(ConnectionInvalid) as caught:
        check_address("https://llm.example.com/v1", allow_private_network=False)
    assert "(10.9.8.7, 192.168.0.1, fd00::7, fe80::9)" in str(caught.value)     # named without its scope
    assert asked[0][0] == "llm.example.com"
    resolving_to("8.8.4.4", "2001:4860:4860::8844")
    check_address("https://llm.example.com/v1", allow_private_network=False)


def test_localhost_is_refused_by_what_it_resolves_to():
    with pytest.raises(ConnectionInvalid, match=r"'http://localhost:8080/v1' is a loopback.*\(127\.0\.0\.1"):
        check_address("http://localhost:8080/v1", allow_private_network=False)


# -- connections declared in settings ----------------------------------------------------------

def names_of(found: list[connections.Connection]) -> list[str]:
    return [c.name for c in found]


def test_the_summarizer_settings_make_the_implicit_default_connection_first(declared):
    declared.COMPACTION_CONNECTIONS = [{"name": "b", "models": ["anthropic/*"]}, {"name": "a", "models": ["x"]}]
    assert names_of(connections._settings_connections()) == ["b", "a"]
    declared.COMPACTION_SUMMARIZER_MODEL = "openai/gpt-4o-mini"
    declared.COMPACTION_SUMMARIZER_API_BASE = "http://127.0.0.1:9/v1"
    declared.COMPACTION_SUMMARIZER_API_KEY_ENV = "SUMMARY_KEY"
    declared.COMPACTION_SUMMARIZER_ALLOW_PRIVATE_NETWORK = True
    found = connections._settings_connections()
    assert names_of(found) == ["default", "b", "a"]
    assert found[0] == connections.Connection("default", ("openai/gpt-4o-mini",), "http://127.0.0.1:9/v1",
                                              "SUMMARY_KEY", True)
    assert found[1] == connections.Connection("b", ("anthropic/*",))
    assert connections.settings_connection_names() == {"default", "a", "b"}


@pytest.mark.parametrize(("setting", "value", "says"), [
    ("COMPACTION_SUMMARIZER_API_BASE", "ftp://x", "COMPACTION_SUMMARIZER_API_BASE: 'ftp://x' is not an http(s) URL"),
    ("COMPACTION_SUMMARIZER_API_KEY_ENV", "NOT A NAME",
     "COMPACTION_SUMMARIZER_API_KEY_ENV: 'NOT A NAME' is not an environment variable name"),
    ("COMPACTION_SUMMARIZER_MODEL", "   ", "COMPACTION_SUMMARIZER_MODEL: list at least one model"),
    ("COMPACTION_SUMMARIZER_ALLOW_PRIVATE_NETWORK", "yes", "COMPACTION_SUMMARIZER_MODEL: give true or false"),
])
def test_a_bad_summarizer_setting_is_named(declared, setting, value, says):
    declared.COMPACTION_SUMMARIZER_MODEL = "openai/x"
    setattr(declared, setting, value)
    with pytest.raises(ImproperlyConfigured) as caught:
        connections._settings_connections()
    assert str(caught.value).startswith(says)


def test_a_declared_connection_with_an_unknown_or_bad_field_is_named_by_its_position(declared):
    ok = {"name": "ok", "models": ["x"]}
    declared.COMPACTION_CONNECTIONS = [ok, {"name": "k", "models": ["x"], "zkey": 1, "api_key": "sk-x"}]
    with pytest.raises(ImproperlyConfigured) as caught:
        connections._settings_connections()
    assert str(caught.value) == ("COMPACTION_CONNECTIONS[1]: unknown field 'api_key'; fields are "
                                 "allow_private_network, api_base, api_key_env, description, models, name")
    declared.COMPACTION_CONNECTIONS = [ok, ok | {"name": "m", "models": "x", "description": "fine"},
                                       {"name": "bad", "models": [], "description": "d"}]
    with pytest.raises(ImproperlyConfigured, match=r"^COMPACTION_CONNECTIONS\[2\]\.models: list at least one"):
        connections._settings_connections()
    declared.COMPACTION_CONNECTIONS = [{"name": "p", "models": ["x"], "allow_private_network": "no"}]
    with pytest.raises(ImproperlyConfigured, match=r"^COMPACTION_CONNECTIONS\[0\]\.allow_private_network: "):
        connections._settings_connections()


def test_a_name_declared_twice_is_refused(declared):
    declared.COMPACTION_CONNECTIONS = [{"name": "a", "models": ["x"]}, {"name": "a", "models": ["y"]}]
    with pytest.raises(ImproperlyConfigured) as caught:
        connections._settings_connections()
    assert str(caught.value) == "COMPACTION_CONNECTIONS[1]: a connection named 'a' is declared twice"
    declared.COMPACTION_SUMMARIZER_MODEL = "openai/x"
    declared.COMPACTION_CONNECTIONS = [{"name": "default", "models": ["y"]}]
    with pytest.raises(ImproperlyConfigured) as caught:
        connections._settings_connections()
    assert str(caught.value) == ("COMPACTION_CONNECTIONS[0]: a connection named 'default' is declared twice "
                                 "(COMPACTION_SUMMARIZER_MODEL makes the 'default' one)")


def test_the_startup_check_reports_bad_declarations_and_addresses(declared):
    assert connections.check_settings() == []
    declared.COMPACTION_CONNECTIONS = [{"name": "x", "models": []}]
    (error,) = connections.check_settings()
    assert (error.level, error.id) == (checks.ERROR, "dashboard.E101")
    assert error.msg.startswith("COMPACTION_CONNECTIONS[0].models")
    declared.COMPACTION_CONNECTIONS = [
        {"name": "imds", "models": ["x"], "api_base": "http://169.254.169.254/v1"},
        {"name": "offline", "models": ["x"], "api_base": "https://llm.invalid/v1"},
        {"name": "fine", "models": ["x"], "api_base": "https://8.8.8.8/v1"},
        {"name": "local", "models": ["x"], "api_base": "http://127.0.0.1/v1", "allow_private_network": True},
    ]
    private, unresolved = connections.check_settings()
    assert (private.level, private.id) == (checks.ERROR, "dashboard.E102")
    assert private.msg.startswith("model connection 'imds': 'http://169.254.169.254/v1' is a loopback")
    assert (unresolved.level, unresolved.id) == (checks.WARNING, "dashboard.E102")
    assert unresolved.msg.startswith("model connection 'offline': the host of 'https://llm.invalid/v1' cannot be")


# -- secrets for redaction ---------------------------------------------------------------------

def test_every_secret_the_settings_and_environment_name_is_collected(declared, monkeypatch):
    declared.GATEWAY_API_KEY = "gw-secret-1"
    declared.SECRET_KEY = "django-secret-2"
    for name, value in {"CS_T_API_KEY": "env-key-3", "cs_t_lower_token": "env-token-4", "CS_T_SECRET": "env-s-5",
                        "CS_T_DB_PASSWORD": "env-pw-6", "CS_T_PASSWD": "env-pw-7", "KEY": "bare-8",
                        "CS_T_CONN_CRED": "conn-cred-9", "CS_T_MONKEY": "not-1", "CS_T_KEY_ID": "not-2",
                        "CS_T_KEYRING": "not-3", "CS_T_EMPTY_KEY": ""}.items():
        monkeypatch.setenv(name, value)
    declared.COMPACTION_CONNECTIONS = [{"name": "c", "models": ["x"], "api_key_env": "CS_T_CONN_CRED"}]
    found = connections.configured_secrets()
    assert found[:2] == ["gw-secret-1", "django-secret-2"]
    for value in ("env-key-3", "env-token-4", "env-s-5", "env-pw-6", "env-pw-7", "bare-8", "conn-cred-9"):
        assert value in found
    assert not {"not-1", "not-2", "not-3", ""} & set(found) and None not in found
    # the environment's part in the order of the variable names, so the list is the same every start
    ours = [v for v in found if v in {"env-key-3", "conn-cred-9", "env-pw-6", "env-pw-7", "env-s-5"}]
    assert ours == ["env-key-3", "conn-cred-9", "env-pw-6", "env-pw-7", "env-s-5"]

    # a malformed declaration is reported at startup; redaction still covers the rest
    declared.COMPACTION_CONNECTIONS = [{"name": "c", "models": []}]
    declared.GATEWAY_API_KEY = ""
    found = connections.configured_secrets()
    assert found[0] == "django-secret-2" and "env-key-3" in found and "conn-cred-9" not in found


# -- the registry: settings and admin ----------------------------------------------------------

def test_the_registry_holds_settings_connections_then_admin_ones_and_settings_win(declared, db):
    declared.COMPACTION_CONNECTIONS = [{"name": "zeta", "models": ["x"]}, {"name": "delta", "models": ["s/*"]}]
    ModelConnection.objects.create(name="delta", allowed_models="admin/*")
    ModelConnection.objects.create(name="beta", allowed_models="b/*\n", api_base="http://10.0.0.2/v1",
                                   api_key_env="B_KEY", allow_private_network=True)
    ModelConnection.objects.create(name="alpha", allowed_models="a/*", api_base="", api_key_env="")
    ModelConnection.objects.create(name="broken", allowed_models="\n \n")   # saved past the admin's checks
    ModelConnection.objects.create(name="gamma", allowed_models="g/*")
    found = connections.registry()
    # the admin's after a skipped one (same name as a setting's, or broken) are still offered
    assert list(found) == ["zeta", "delta", "alpha", "beta", "gamma"]
    assert found["delta"] == connections.Connection("delta", ("s/*",))
    assert found["beta"] == connections.Connection("beta", ("b/*",), "http://10.0.0.2/v1", "B_KEY", True, "admin")
    assert found["alpha"] == connections.Connection("alpha", ("a/*",), None, None, False, "admin")


# -- which connection a policy uses ------------------------------------------------------------

KNOWN = {c.name: c for c in (build("anthro", ["anthropic/*"]), build("both", ["anthropic/*", "openai/*"]),
                             build("oa", ["openai/*"]))}


def test_a_named_connection_is_used_when_it_allows_every_model():
    assert choose(policy("openai/gpt-4o", ("anthropic/claude",), connection="both"), KNOWN).name == "both"
    assert choose(policy("openai/gpt-4o", connection="oa"), KNOWN).name == "oa"
    # a name with only offline models needs no connection at all
    assert choose(policy("extractive/default", connection="oa"), KNOWN) is None
    assert choose(policy(None, connection="oa"), KNOWN) is None


def test_an_unknown_connection_is_refused_listing_the_known_ones():
    error = refused(choose, policy(connection="nope"), KNOWN)
    assert error.field == "summarizer.connection"
    assert str(error) == "summarizer.connection: no model connection named 'nope'; connections: anthro, both, oa"
    error = refused(choose, policy(connection="nope"), {})
    assert str(error).endswith("connections: none is declared")


def test_a_named_connection_that_does_not_allow_a_model_is_refused_naming_the_model_field():
    error = refused(choose, policy("openai/gpt-4o", ("extractive/default", "anthropic/c"), connection="oa"), KNOWN)
    assert error.field == "summarizer.failover_models.1"
    assert str(error).endswith("connection 'oa' does not allow model 'anthropic/c'; it allows openai/*")
    error = refused(choose, policy("anthropic/c", connection="oa"), KNOWN)
    assert error.field == "summarizer.model"
    # every model the connection allows is listed, as the operator wrote them
    error = refused(choose, policy("mistral/large", connection="both"), KNOWN)
    assert str(error).endswith("does not allow model 'mistral/large'; it allows anthropic/*, openai/*")


def test_without_a_name_the_first_connection_allowing_every_model_is_used():
    assert choose(policy("anthropic/c"), KNOWN).name == "anthro"
    assert choose(policy("openai/gpt-4o"), KNOWN).name == "both"
    assert choose(policy("openai/gpt-4o", ("anthropic/c",)), KNOWN).name == "both"
    assert choose(policy("anthropic/c", ("", "extractive/x")), KNOWN).name == "anthro"
    assert choose(policy(None), KNOWN) is None and choose(policy("extractive/default"), {}) is None


def test_without_a_name_a_model_no_connection_allows_is_refused_naming_its_field():
    error = refused(choose, policy("openai/gpt-4o", ("mistral/large",)), KNOWN)
    assert error.field == "summarizer.failover_models.0"
    assert str(error).startswith("summarizer.failover_models.0: no model connection allows 'mistral/large'; "
                                 "connections: anthro, both, oa (the operator declares them")
    error = refused(choose, policy("mistral/large"), {})
    assert "connections: none is declared" in str(error) and error.field == "summarizer.model"


def test_without_a_name_models_split_over_two_connections_are_refused():
    split = {"anthro": KNOWN["anthro"], "oa": KNOWN["oa"]}
    error = refused(choose, policy("openai/gpt-4o", ("anthropic/c",)), split)
    assert error.field == "summarizer.connection"
    assert str(error) == ("summarizer.connection: no one connection allows every model of this policy; name one in "
                          "summarizer.connection whose models cover the primary and failover models")


# -- what a client may set ----------------------------------------------------------------------

@pytest.mark.parametrize("field", ["api_base", "api_key_env"])
def test_a_client_may_not_set_where_requests_go_or_the_key_variable(declared, db, field):
    declared.COMPACTION_CONNECTIONS = [{"name": "oa", "models": ["openai/*"]}]
    error = refused(connections.check_client_policy, policy(**{field: "http://x" if field == "api_base" else "K"}))
    assert error.field == f"summarizer.{field}" and "summarizer.connection" in str(error)


def test_a_client_may_set_sampling_params_only(declared, db):
    declared.COMPACTION_CONNECTIONS = [{"name": "oa", "models": ["openai/*"]}]
    fine = policy(params={p: 1 for p in connections.ALLOWED_PARAMS})
    assert connections.check_client_policy(fine) is fine
    for param in ("api_base", "api_key", "extra_headers", "base_url", "custom_llm_provider"):
        error = refused(connections.check_client_policy, policy(params={"temperature": 0, param: "x"}))
        assert error.field == f"summarizer.params.{param}"
        assert str(error).startswith(f"summarizer.params.{param}: {param!r} may not be set by a policy; allowed: "
                                     "frequency_penalty, logit_bias, max_completion_tokens, max_tokens")
    error = refused(connections.check_client_policy, policy("mistral/x"))
    assert error.field == "summarizer.model"


# -- resolving a policy before it runs ---------------------------------------------------------

def test_resolving_fills_in_the_connections_address_and_key_variable(declared, db):
    declared.COMPACTION_CONNECTIONS = [
        {"name": "keyed", "models": ["openai/*"], "api_base": "https://8.8.8.8/v1", "api_key_env": "K1"},
        {"name": "local", "models": ["local/*"], "api_base": "http://127.0.0.1:1/v1", "allow_private_network": True},
        {"name": "provider", "models": ["anthropic/*"], "api_key_env": "ANTHROPIC_KEY"},
        {"name": "bare", "models": ["bare/*"]},
    ]
    out = resolve(policy("openai/gpt-4o", params={"temperature": 0}))
    s = out.summarizer
    assert (s.api_base, s.api_key_env, s.params) == ("https://8.8.8.8/v1", "K1", {"temperature": 0})
    # an address without a key variable sends a placeholder key, never the provider's own key
    s = resolve(policy("local/llama", params={"temperature": 0})).summarizer
    assert (s.api_base, s.api_key_env, s.params) == ("http://127.0.0.1:1/v1", None,
                                                     {"temperature": 0, "api_key": connections.NO_KEY})
    s = resolve(policy("anthropic/c")).summarizer
    assert (s.api_base, s.api_key_env, s.params) == (None, "ANTHROPIC_KEY", {})
    s = resolve(policy("bare/m")).summarizer
    assert (s.api_base, s.api_key_env, s.params) == (None, None, {})
    offline = policy("extractive/default")
    assert resolve(offline) is offline


@pytest.mark.parametrize(("field", "what"), [("api_base", "server address"), ("api_key_env", "key variable")])
def test_a_stored_policy_with_its_own_address_or_key_variable_is_refused_at_run_time(declared, db, field, what):
    error = refused(resolve, policy(**{field: "http://8.8.8.8/v1" if field == "api_base" else "K"}))
    assert error.field == f"summarizer.{field}"
    assert str(error).startswith(f"summarizer.{field}: this stored policy names its own {what}, which policies")
    assert str(error).endswith(f"remove summarizer.{field} from the policy")


def test_resolving_refuses_forbidden_params_an_unknown_model_and_a_private_address(declared, db):
    declared.COMPACTION_CONNECTIONS = [{"name": "imds", "models": ["openai/*"], "api_base": "http://169.254.169.254/v1",
                                        "api_key_env": "K"}]
    error = refused(resolve, policy(params={"api_base": "http://x"}))
    assert error.field == "summarizer.params.api_base"
    error = refused(resolve, policy("mistral/x"))
    assert error.field == "summarizer.model"
    error = refused(resolve, policy())
    assert error.field == "summarizer.connection"
    assert str(error).startswith("summarizer.connection: the operator's connection 'imds' is unusable: "
                                 "'http://169.254.169.254/v1' is a loopback, private or link-local address")


def test_resolving_with_misdeclared_connections_fails_the_run_naming_the_setting(declared, db):
    declared.COMPACTION_CONNECTIONS = [{"name": "x", "models": []}]
    error = refused(resolve, policy())
    assert error.field == "summarizer.connection"
    assert str(error).startswith("summarizer.connection: the operator's connections are misconfigured: "
                                 "COMPACTION_CONNECTIONS[0].models")
