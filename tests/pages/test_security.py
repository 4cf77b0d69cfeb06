"""Browser-facing protections: sign-in throttling, the Content-Security-Policy, HTTPS-only
cookies and HSTS when the service is served over HTTPS."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from dashboard.services.keys import create_api_key
from tests.pages.test_layout import page_urls

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery"


def _sign_in(client, username="alice", password=PASSWORD):
    return client.post(reverse("pages:login"), {"username": username, "password": password})


# -- sign-in throttling ----------------------------------------------------------------------

def test_repeated_failed_sign_ins_lock_the_account_out_with_a_clear_message(client, user, settings):
    limit = settings.AXES_FAILURE_LIMIT
    assert limit == 5
    for _ in range(limit - 1):
        r = _sign_in(client, password="wrong")
        assert r.status_code == 200 and "didn't match" in r.content.decode()
    locked = _sign_in(client, password="wrong")
    assert locked.status_code == 429
    text = locked.content.decode()
    assert "Sign-in locked" in text and "Too many failed sign-in attempts" in text and "alice" in text
    assert "15 minutes" in text
    # the right password does not get in while the lock holds
    again = _sign_in(client)
    assert again.status_code == 429 and "_auth_user_id" not in client.session


def test_a_successful_sign_in_resets_the_count(client, user, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _sign_in(client, password="wrong")
    assert _sign_in(client).status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _sign_in(client, password="wrong").status_code == 200
    assert _sign_in(client).status_code == 302


def test_a_lockout_does_not_touch_other_users_or_api_keys(client, user, django_user_model, project, settings):
    django_user_model.objects.create_user("carol", password=PASSWORD)
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(client, password="wrong")
    assert _sign_in(client).status_code == 429
    assert _sign_in(client, "carol").status_code == 302
    key = create_api_key(project, "tests")[1]
    assert client.get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200


# -- Content-Security-Policy -------------------------------------------------------------------

def _directives(header: str) -> dict[str, str]:
    return {part.split()[0]: part.split(None, 1)[1] for part in (p.strip() for p in header.split(";")) if part}


INLINE_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.I)
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I)
STYLE_ATTR = re.compile(r"<[^>]*\sstyle\s*=", re.I)
TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def test_no_template_holds_an_inline_style_handler_or_script():
    """Every template, including blocks only some states render (warnings, errors): the CSP
    would block an inline style or handler in the browser, so none may be written."""
    for path in sorted(TEMPLATES.rglob("*.html")):
        text = path.read_text()
        for name, pattern in (("style attribute", STYLE_ATTR), ("event handler", INLINE_HANDLER),
                              ("inline script", INLINE_SCRIPT)):
            found = pattern.search(text)
            assert found is None, f"{path.relative_to(TEMPLATES)}: {name} {found.group(0)[:80]!r}"


def test_every_page_carries_a_strict_policy_and_nothing_inline(web, grown, last_run, client):
    urls = page_urls(grown, last_run, last_run.archive_refs[0]) + [reverse("pages:login") + "?x=1"]
    for url in urls:
        r = web.get(url, follow=True)
        assert r.status_code == 200, url
        policy = _directives(r["Content-Security-Policy"])
        assert policy["default-src"] == "'self'" and policy["script-src"] == "'self'", url
        assert "unsafe-inline" not in r["Content-Security-Policy"] and "unsafe-eval" not in r["Content-Security-Policy"]
        html = r.content.decode()
        assert not INLINE_SCRIPT.search(html), (url, INLINE_SCRIPT.search(html))
        assert not INLINE_HANDLER.search(html), (url, INLINE_HANDLER.search(html))
        assert not STYLE_ATTR.search(html), (url, STYLE_ATTR.search(html))
    anonymous = client.get(reverse("pages:login"))
    assert "Content-Security-Policy" in anonymous and not INLINE_SCRIPT.search(anonymous.content.decode())


def test_htmx_is_told_not_to_write_inline_styles(web):
    html = web.get(reverse("pages:sessions")).content.decode()
    config = json.loads(re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", html).group(1))
    assert config["includeIndicatorStyles"] is False
    assert "style" not in config["attributesToSettle"]


def test_the_api_and_its_docs_carry_the_policy_too(client):
    r = client.get("/api/docs")
    assert r.status_code == 200 and "Content-Security-Policy" in r
    assert not INLINE_SCRIPT.search(r.content.decode())


# -- cookies and HSTS --------------------------------------------------------------------------

def test_with_debug_off_cookies_are_https_only_and_https_answers_carry_hsts(client, user, settings):
    assert settings.DEBUG is False and settings.COMPACTION_HTTPS is True
    r = _sign_in(client)
    assert r.status_code == 302
    assert r.cookies["sessionid"]["secure"] and r.cookies["sessionid"]["httponly"]
    assert r.cookies["csrftoken"]["secure"]
    secure = client.get(reverse("pages:login"), secure=True)
    assert secure["Strict-Transport-Security"].startswith("max-age=31536000")
    assert secure["X-Content-Type-Options"] == "nosniff" and secure["Referrer-Policy"] == "same-origin"
    assert "Strict-Transport-Security" not in client.get(reverse("pages:login"))  # never over plain http


def _settings_in_a_fresh_process(**env) -> str:
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.COMPACTION_HTTPS, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS)")
    full = dict(os.environ, DJANGO_SETTINGS_MODULE="dashboard.settings", PYTHONPATH=str(REPO), **env)
    full.pop("COMPACTION_HTTPS", None) if "COMPACTION_HTTPS" not in env else None
    return subprocess.run([sys.executable, "-c", code], env=full, cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=True).stdout.strip()


@pytest.mark.parametrize("env, expected", [
    ({"DEBUG": "1"}, "False False False 0"),                      # make run: plain http keeps working
    ({"DEBUG": "0"}, "True True True 31536000"),
    ({"DEBUG": "1", "COMPACTION_HTTPS": "1"}, "True True True 31536000"),
    ({"DEBUG": "0", "COMPACTION_HTTPS": "0"}, "False False False 0"),
], ids=["make-run", "production", "debug-over-https", "plain-http-opt-out"])
def test_compaction_https_decides_the_cookie_and_hsts_settings(env, expected):
    assert _settings_in_a_fresh_process(**env) == expected
