"""The project-wide search page: hits from several sessions, each opening the message in its
session's timeline; only the projects a user may see are searched."""
from __future__ import annotations

import re

from django.test import Client
from django.urls import reverse

from tests.pages import factories


def _hits(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<li data-session="(\d+)" data-kind="(\w+)">', html)


def test_search_lists_hits_across_sessions_linking_to_the_message(web, project):
    a = factories.import_messages(project, [{"role": "user", "content": "the kubelet restarted twice"}], title="ops")
    b = factories.import_messages(project, [{"role": "user", "content": "hello"},
                                            {"role": "assistant", "content": "kubelet kubelet logs attached"}], title="infra")
    html = web.get(reverse("pages:search"), {"q": "kubelet"}).content.decode()
    assert _hits(html) == [(str(b.pk), "message"), (str(a.pk), "message")]
    assert f'href="/sessions/{b.pk}/?around=1#msg-1"' in html and f'href="/sessions/{a.pk}/?around=0#msg-0"' in html
    # the link lands on the session page showing that message with its anchor
    page = web.get(f"/sessions/{b.pk}/", {"around": 1}).content.decode()
    assert 'id="msg-1"' in page
    # scoped to the other sessions of a
    html = web.get(reverse("pages:search"), {"q": "kubelet", "session": a.pk, "scope": "other_sessions"}).content.decode()
    assert _hits(html) == [(str(b.pk), "message")]
    assert "Nothing matches" in web.get(reverse("pages:search"), {"q": "zebra"}).content.decode()


def test_an_outsider_never_sees_another_projects_messages(web, project, django_user_model):
    s = factories.import_messages(project, [{"role": "user", "content": "secret kubelet token"}], title="acme ops")
    olga = django_user_model.objects.create_user("olga", password="correct horse battery")
    factories.add_member(factories.make_project("globex"), olga)
    c = Client()
    c.force_login(olga)
    html = c.get(reverse("pages:search"), {"q": "kubelet"}).content.decode()
    assert _hits(html) == [] and "secret" not in html
    assert c.get(reverse("pages:search"), {"q": "kubelet", "session": s.pk, "scope": "current_session"}).status_code == 404
