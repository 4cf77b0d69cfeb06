"""The tuning page's policy form: grouped in collapsed sections (trigger, reduction, summary,
injection, advanced), presets as starting points that save nothing, and the settings that
differ from the session's active policy marked by the server."""
from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

from django.urls import reverse

from dashboard.models import Project, Session, StoredPolicy
from tests.pages.tuning_form import posted_form


@dataclass
class Group:
    key: str
    open: bool
    changed_note: str = ""
    note_hidden: bool = False
    #: input name -> its classes
    inputs: dict[str, set[str]] = field(default_factory=dict)
    changed_labels: int = 0


class Groups(HTMLParser):
    """The ``<details class="policy-group">`` sections of one side's fieldset, as a browser
    builds them: which are open, which inputs they hold and which are marked changed."""

    def __init__(self, side: str) -> None:
        super().__init__()
        self.side = side
        self.groups: dict[str, Group] = {}
        self._current: Group | None = None
        self._in_note = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details" and a.get("data-testid", "").startswith(f"{self.side}-group-"):
            self._current = self.groups[a["data-group"]] = Group(a["data-group"], "open" in a)
        elif self._current is None:
            return
        elif tag in ("input", "select", "textarea") and a.get("name", "").startswith(f"{self.side}-"):
            self._current.inputs[a["name"][2:]] = set((a.get("class") or "").split())
        elif tag == "label" and "changed" in (a.get("class") or "").split():
            self._current.changed_labels += 1
        elif tag == "small" and "changed-count" in (a.get("class") or ""):
            self._in_note = True
            self._current.note_hidden = "hidden" in a

    def handle_data(self, data):
        if self._in_note and self._current is not None:
            self._current.changed_note += data

    def handle_endtag(self, tag):
        if tag == "small":
            self._in_note = False
        elif tag == "details":
            self._current = None


def groups_of(html: str, side: str = "a") -> dict[str, Group]:
    parser = Groups(side)
    parser.feed(html)
    return parser.groups


def changed(groups: dict[str, Group]) -> set[str]:
    return {name for g in groups.values() for name, classes in g.inputs.items() if "changed" in classes}


def page(web, session) -> str:
    return web.get(reverse("pages:tuning", args=[session.pk])).content.decode()


def preview(web, session, data) -> str:
    r = web.post(reverse("pages:tuning-preview", args=[session.pk]), data, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    return r.content.decode()


def test_the_form_comes_in_five_groups_with_only_the_trigger_open(web, grown):
    groups = groups_of(page(web, grown))
    assert list(groups) == ["trigger", "reduction", "summary", "injection", "advanced"]
    assert {k for k, g in groups.items() if g.open} == {"trigger"}
    assert {"trigger_kind", "trigger_value"} <= set(groups["trigger"].inputs)
    assert "reduction" in groups["reduction"].inputs
    assert {"summarize", "keep_messages", "max_summary_words"} <= set(groups["summary"].inputs)
    assert {"injection", "preserve_user_messages"} <= set(groups["injection"].inputs)
    assert {"pre_summary", "advanced"} <= set(groups["advanced"].inputs)
    # every input of the policy is in exactly one group
    names = [n for g in groups.values() for n in g.inputs]
    assert len(names) == len(set(names))


def test_the_sessions_own_policy_marks_nothing_changed(web, grown):
    groups = groups_of(page(web, grown))
    assert changed(groups) == set()
    assert all(g.note_hidden and g.changed_labels == 0 for g in groups.values())


def test_an_edited_setting_is_marked_and_opens_its_group(web, grown):
    html = preview(web, grown, {**posted_form(grown, keep_messages="3"), "a-preset": "sagents"})
    # choosing a preset fills side A from it: every setting where the preset departs from the
    # session's policy is marked, and the groups holding them open
    oob = html.split('<fieldset id="fields-a" hx-swap-oob="true">', 1)[1].split("</fieldset>", 1)[0]
    groups = groups_of(oob)
    marked = changed(groups)
    assert "keep_messages" in marked and "trigger_value" in marked
    summary = groups["summary"]
    assert summary.open and not summary.note_hidden
    assert summary.changed_note.strip() == f"{sum('changed' in c for c in summary.inputs.values())} changed"
    assert summary.changed_labels == len([n for n in summary.inputs if n in marked])
    assert all(not g.open for g in groups.values() if g.key != "trigger" and not (set(g.inputs) & marked))


def test_a_typed_value_on_the_full_page_is_marked_against_the_active_policy(web, grown):
    """Without htmx the form posts to a full page, which marks what was typed."""
    html = web.post(reverse("pages:tuning-preview", args=[grown.pk]),
                    posted_form(grown, keep_messages="5", advanced="cut.search=backward")).content.decode()
    groups = groups_of(html)
    assert changed(groups) == {"keep_messages", "advanced"}
    assert groups["summary"].open and groups["advanced"].open and not groups["injection"].open
    # the same value written another way ("8.0" for 8) is not a change
    html = web.post(reverse("pages:tuning-preview", args=[grown.pk]),
                    posted_form(grown, keep_messages="8.0")).content.decode()
    assert changed(groups_of(html)) == set()


def test_every_grouped_input_carries_the_active_value_the_script_compares_with(web, grown):
    html = page(web, grown)
    assert 'name="a-keep_messages"' in html
    tag = html.split('name="a-keep_messages"', 1)[1].split(">", 1)[0]
    assert 'data-active="8"' in tag
    tag = html.split('name="a-trigger_value"', 1)[1].split(">", 1)[0]
    assert 'data-active="6000"' in tag


def test_an_invalid_value_opens_its_group(web, grown):
    html = web.post(reverse("pages:tuning-preview", args=[grown.pk]),
                    posted_form(grown, max_summary_words="lots")).content.decode()
    assert groups_of(html)["summary"].open


def test_choosing_a_preset_fills_the_form_and_saves_nothing(web, grown):
    policies = StoredPolicy.objects.count()
    project_policy = Project.objects.get(pk=grown.project_id).active_policy_id
    session_policy = Session.objects.get(pk=grown.pk).policy_id
    html = preview(web, grown, {**posted_form(grown), "a-preset": "sagents"})
    assert 'name="a-loaded" value="sagents"' in html and 'data-testid="preview-result"' in html
    assert StoredPolicy.objects.count() == policies
    assert Project.objects.get(pk=grown.project_id).active_policy_id == project_policy
    assert Session.objects.get(pk=grown.pk).policy_id == session_policy
    assert "nothing is saved until you" in page(web, grown)


def test_policy_b_from_a_preset_is_marked_against_the_active_policy_too(web, grown):
    groups = groups_of(page(web, grown), side="b")
    assert list(groups) == ["trigger", "reduction", "summary", "injection", "advanced"]
    assert changed(groups), "the deepagents preset departs from the test policy somewhere"
