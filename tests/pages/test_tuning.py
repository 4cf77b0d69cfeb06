"""Tuning: every change re-simulates the stored session; compare two policies; save, apply."""
import json
import re

from django.urls import reverse

from compaction import PRESETS
from dashboard.models import Project, Session, StoredPolicy, TuningSweep
from tests.pages.tuning_form import posted_form


def form(session, side="a", preset="current", **changes) -> dict:
    """The tuning form as the page first renders it, with ``changes`` typed in."""
    return posted_form(session, side, preset, **changes)


def preview(web, session, data) -> str:
    r = web.post(reverse("pages:tuning-preview", args=[session.pk]), data, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    return r.content.decode()


def compactions(html: str) -> list[int]:
    return [int(x) for x in re.search(r'data-compactions="([\d,]+)"', html).group(1).split(",")]


def chart(html: str) -> dict:
    return json.loads(re.search(r'<script id="simulation-data" type="application/json">(.*?)</script>', html, re.S).group(1))


def test_the_page_has_the_form_and_a_preview_that_loads_itself(web, grown):
    html = web.get(reverse("pages:tuning", args=[grown.pk])).content.decode()
    assert 'data-testid="tuning-form"' in html and 'data-testid="tuning-preview"' in html
    assert 'hx-trigger="load"' in html and 'hx-trigger="input delay:250ms, submit"' in html
    assert 'name="a-trigger_value"' in html and 'value="6000"' in html


def test_the_preview_replays_the_session_with_its_policy(web, grown):
    html = preview(web, grown, form(grown))
    assert 'data-testid="preview-result"' in html
    (n,) = compactions(html)
    assert n >= 2
    data = chart(html)
    assert len(data["markers"]) == n
    assert data["series"][0]["label"] == "no compaction" and len(data["series"]) == 2
    assert any(line["value"] == 6000 and line["kind"] == "trigger" for line in data["lines"])
    for key in ("compactions", "summaries", "peak", "final", "saved", "cost", "retention"):
        assert f'data-row="{key}"' in html


def test_changing_the_threshold_changes_where_compactions_fire(web, grown):
    low = compactions(preview(web, grown, form(grown, trigger_value="4000")))[0]
    mid = compactions(preview(web, grown, form(grown, trigger_value="8000")))[0]
    none = compactions(preview(web, grown, form(grown, trigger_value="500000")))[0]
    assert low > mid > none == 0


def test_a_preset_switch_resets_that_sides_fields(web, grown):
    data = form(grown)
    data["a-preset"] = "sagents"  # chosen in the select; the fields still hold the old policy
    html = preview(web, grown, data)
    oob = html.split('<fieldset id="fields-a" hx-swap-oob="true">', 1)[1].split("</fieldset>", 1)[0]
    assert 'name="a-loaded" value="sagents"' in oob and 'value="170000"' in oob


def test_two_policies_side_by_side(web, grown):
    data = form(grown)
    data.update(form(grown, side="b", preset="deepagents"))
    data["compare"] = "1"
    html = preview(web, grown, data)
    assert len(compactions(html)) == 2
    head = html.split('data-testid="preview-table"', 1)[1].split("</thead>", 1)[0]
    assert "A: page-tests" in head and "B: deepagents" in head and "No compaction" in head
    labels = [s["label"] for s in chart(html)["series"]]
    assert labels == ["no compaction", "A: page-tests", "B: deepagents"]


def test_an_invalid_value_is_reported_with_its_field(web, grown):
    html = preview(web, grown, form(grown, keep_fraction="3"))
    assert 'data-testid="tuning-errors"' in html and "cut.keep_fraction" in html
    html = preview(web, grown, form(grown, keep_messages="many"))
    assert "cut.keep_messages" in html and "not a number" in html
    html = preview(web, grown, form(grown, trigger_kind="window_fraction", trigger_value="120000"))
    assert "trigger.fraction" in html


def test_the_cost_uses_the_model_price_table(web, grown):
    html = preview(web, grown, form(grown, model="gpt-4o"))
    row = html.split('data-row="cost"', 1)[1].split("</tr>", 1)[0]
    assert "$" in row and "at gpt-4o" in row
    html = preview(web, grown, form(grown, model="no-such-model-anywhere"))
    assert "no price for no-such-model-anywhere" in html


def test_saving_makes_the_policy_the_projects_and_applying_sets_the_sessions(web, grown):
    data = form(grown, trigger_value="9000")
    r = web.post(reverse("pages:tuning-save", args=[grown.pk]), {**data, "name": "tight", "target": "project"},
                 HTTP_HX_REQUEST="true")
    assert 'data-testid="save-ok"' in r.content.decode()
    project = Project.objects.get(pk=grown.project_id)
    assert project.active_policy.name == "tight" and project.active_policy.data["trigger"]["threshold"] == 9000
    # saving again under the same name makes a new version
    web.post(reverse("pages:tuning-save", args=[grown.pk]), {**form(grown, trigger_value="9500"), "name": "tight",
                                                             "target": "project"}, HTTP_HX_REQUEST="true")
    assert StoredPolicy.objects.get(name="tight").version == 2
    r = web.post(reverse("pages:tuning-save", args=[grown.pk]), {**data, "name": "just-this-one", "target": "session"},
                 HTTP_HX_REQUEST="true")
    assert "applied it to this session" in r.content.decode()
    assert Session.objects.get(pk=grown.pk).policy.name == "just-this-one"


def test_saving_needs_a_name_and_a_valid_policy(web, grown):
    r = web.post(reverse("pages:tuning-save", args=[grown.pk]), {**form(grown), "name": ""}, HTTP_HX_REQUEST="true")
    assert "Give the policy a name" in r.content.decode()
    r = web.post(reverse("pages:tuning-save", args=[grown.pk]), {**form(grown, keep_fraction="9"), "name": "x"},
                 HTTP_HX_REQUEST="true")
    assert "cut.keep_fraction" in r.content.decode()
    assert not StoredPolicy.objects.filter(name="x").exists()


def test_without_htmx_the_form_posts_to_a_full_page(web, grown):
    r = web.post(reverse("pages:tuning-preview", args=[grown.pk]), form(grown))
    html = r.content.decode()
    assert "<html" in html and 'data-testid="preview-result"' in html


def test_every_preset_simulates_without_error(web, grown):
    for name in PRESETS:
        html = preview(web, grown, form(grown, preset=name))
        assert 'data-testid="tuning-errors"' not in html, (name, html.split('data-testid="tuning-errors"', 1)[1][:500])
        assert 'data-testid="preview-result"' in html, name


def test_a_trigger_above_the_usable_window_shows_a_warning_and_no_overflow(web, grown):
    """The guard protects a policy whose trigger cannot fire at its window, and the page says so."""
    html = preview(web, grown, form(grown, preset="sagents", context_window="2000"))
    block = html.split('data-testid="policy-warnings"', 1)[1].split("</div>", 1)[0]
    assert "170,000" in block and "overflow guard" in block
    row = html.split('data-row="overflow"', 1)[1].split("</tr>", 1)[0]
    assert re.search(r"<td>0\s*</td>", row), row
    assert 'data-row="thrash"' in html


def test_a_policy_within_its_window_shows_no_warning(web, grown):
    html = preview(web, grown, form(grown))
    assert 'data-testid="policy-warnings"' not in html


def test_the_preview_scores_each_policy_against_the_next_message_and_the_baselines(web, grown):
    html = preview(web, grown, form(grown) | form(grown, side="b", preset="deepagents") | {"compare": "1"})
    for key in ("recall", "mean", "cache", "cost", "baseline-sliding_window", "baseline-observation_masking"):
        assert f'data-row="{key}"' in html
    recall_row = html.split('data-row="recall"', 1)[1].split("</tr>", 1)[0]
    assert len(re.findall(r'<td data-testid="preview-recall">\d+(\.\d)?%', recall_row)) == 2  # one per policy
    assert " at gpt-4o" in html.split('data-row="cost"', 1)[1].split("</tr>", 1)[0]


# -- the threshold sweep ------------------------------------------------------------------


def start_sweep(web, session, capture, kind="tokens", scope="session", **changes) -> str:
    data = {**form(session, **changes), "sweep_kind": kind, "sweep_scope": scope}
    with capture(execute=True):
        r = web.post(reverse("pages:tuning-sweep", args=[session.pk]), data, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    return r.content.decode()


def sweep_status(web, sweep) -> str:
    return web.get(reverse("pages:sweep", args=[sweep.pk])).content.decode()


def test_a_sweep_tries_ten_settings_low_to_high_and_marks_the_current_one(web, grown,
                                                                          django_capture_on_commit_callbacks):
    started = start_sweep(web, grown, django_capture_on_commit_callbacks)
    assert 'id="sweep-status"' in started
    sweep = TuningSweep.objects.get(session=grown)
    html = sweep_status(web, sweep)
    assert sweep.status == "done" and sweep.done == sweep.total == len(sweep.values)
    values = [p["value"] for p in sweep.points]
    assert values == sorted(values) and 10 <= len(values) <= 11 and 6000.0 in values
    assert sweep.current == 6000.0
    # a lower trigger compacts more often and sends fewer tokens
    first, last = sweep.points[0], sweep.points[-1]
    assert first["compactions"] > last["compactions"] and first["tokens_sent"] < last["tokens_sent"]
    assert all(0 <= p["kept"] <= p["needed"] for p in sweep.points)
    # a finished sweep draws its curve and stops polling
    assert 'data-testid="sweep-chart"' in html and 'hx-trigger="every 1s"' not in html
    assert html.count('aria-current="true"') == 1 and "(current)" in html
    # the point at the current setting is what the preview of the same policy shows
    (n,) = compactions(preview(web, grown, form(grown)))
    assert next(p for p in sweep.points if p["value"] == 6000.0)["compactions"] == n


def cells(row_html: str) -> list[str]:
    """The text of a table row's cells, tags and spacing flattened."""
    return [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row_html, re.S)]


def test_the_preview_and_the_sweep_show_the_same_cost_and_recall_for_the_same_setting(
        web, grown, django_capture_on_commit_callbacks):
    """One cost model (cache-priced beside uncached) and one recall for both: the sweep's row
    at the current setting reads, to the digit, what the preview shows for that setting."""
    html = preview(web, grown, form(grown))
    cost = cells(html.split('<tr data-row="cost">', 1)[1].split("</tr>", 1)[0])[1]
    recall = cells(html.split('<tr data-row="recall">', 1)[1].split("</tr>", 1)[0])[1]
    cached, uncached = re.match(r"(\$[\d.,]+) · (\$[\d.,]+) at gpt-4o", cost).groups()
    assert cached != uncached  # the session's model has cache prices: both figures are shown
    start_sweep(web, grown, django_capture_on_commit_callbacks)
    sweep = TuningSweep.objects.get(session=grown)
    row = sweep_status(web, sweep).split('aria-current="true">', 1)[1].split("</tr>", 1)[0]
    setting, _tokens, sweep_cost, sweep_recall, *_ = cells(row)
    assert setting == "6,000 (current)"
    assert sweep_cost == f"{cached} · {uncached}"
    assert sweep_recall == recall.split(" (")[0] and re.fullmatch(r"\d+\.\d%", sweep_recall)


def test_the_same_sweep_twice_gives_identical_points(web, grown, django_capture_on_commit_callbacks):
    start_sweep(web, grown, django_capture_on_commit_callbacks, kind="window_fraction")
    start_sweep(web, grown, django_capture_on_commit_callbacks, kind="window_fraction")
    one, two = TuningSweep.objects.filter(session=grown).order_by("pk")
    assert one.values == two.values and one.points == two.points and one.points


def test_a_sweep_over_the_project_replays_every_session(web, grown, small, django_capture_on_commit_callbacks):
    start_sweep(web, grown, django_capture_on_commit_callbacks, scope="project")
    sweep = TuningSweep.objects.get(session=grown)
    alone = start_sweep(web, grown, django_capture_on_commit_callbacks) and TuningSweep.objects.filter(
        session=grown).order_by("-pk").first()
    assert sweep.total == 2 * len(sweep.values)
    assert all(p["tokens_sent"] > q["tokens_sent"] for p, q in zip(sweep.points, alone.points))


def test_a_queued_sweep_shows_a_progress_bar_that_polls(web, grown):
    sweep = TuningSweep.objects.create(project=grown.project, session=grown, parameter="tokens", values=[1.0, 2.0],
                                       total=4, done=1, status="running")
    html = sweep_status(web, sweep)
    assert 'hx-trigger="every 1s"' in html and '<progress id="sweep-progress" value="1" max="4"' in html


def test_a_bad_sweep_request_names_the_problem_and_stores_nothing(web, grown, django_capture_on_commit_callbacks):
    html = start_sweep(web, grown, django_capture_on_commit_callbacks, kind="messages")
    assert "unknown trigger kind &#x27;messages&#x27;" in html and not TuningSweep.objects.exists()
    html = start_sweep(web, grown, django_capture_on_commit_callbacks, keep_fraction="2")
    assert "keep_fraction" in html and not TuningSweep.objects.exists()


def test_the_tuning_page_shows_the_sessions_latest_sweep(web, grown, django_capture_on_commit_callbacks):
    start_sweep(web, grown, django_capture_on_commit_callbacks)
    html = web.get(reverse("pages:tuning", args=[grown.pk])).content.decode()
    assert 'data-testid="sweep-chart"' in html and 'id="sweep-data"' in html
    # the page starts with the answer: current setting, recommendation, chart, then the form
    order = [html.index(f'data-testid="{t}"') for t in ("current-setting", "recommendation", "sweep-chart",
                                                         "tuning-form")]
    assert order == sorted(order)
    assert "Current setting: <strong>context &gt; 6,000 tokens</strong>" in html


# -- honest labels and live help ------------------------------------------------------------


def test_the_now_text_follows_the_typed_trigger(web, grown):
    html = preview(web, grown, form(grown, trigger_value="9000"))
    help_a = re.search(r'<small id="a-trigger-help" hx-swap-oob="true"[^>]*>(.*?)</small>', html, re.S).group(1)
    assert "9,000" in help_a
    data = {**form(grown), **form(grown, side="b", trigger_kind="tokens", trigger_value="12345")}
    html = preview(web, grown, data)  # B is not compared, yet its text follows what was typed
    help_b = re.search(r'<small id="b-trigger-help" hx-swap-oob="true"[^>]*>(.*?)</small>', html, re.S).group(1)
    assert "12,345" in help_b


def test_summaries_are_labelled_offline(web, grown):
    html = preview(web, grown, form(grown))
    row = re.search(r'<tr data-row="summaries">(.*?)</tr>', html, re.S).group(1)
    assert re.search(r"<td>\d+ \(offline\)</td>", row), row


def test_peak_context_is_never_below_final_context(web, grown):
    html = preview(web, grown, form(grown, trigger_value="500000"))
    peak = re.search(r'<tr data-row="peak">.*?<td>([\d,]+)</td>.*?<td class="muted">([\d,]+)</td>', html, re.S)
    final = re.search(r'<tr data-row="final">.*?<td>([\d,]+)</td>.*?<td class="muted">([\d,]+)</td>', html, re.S)
    num = lambda s: int(s.replace(",", ""))  # noqa: E731
    assert num(peak.group(1)) >= num(final.group(1)) and num(peak.group(2)) >= num(final.group(2))


def test_a_finished_sweep_recommends_one_setting_and_says_the_rule(web, grown, django_capture_on_commit_callbacks):
    start_sweep(web, grown, django_capture_on_commit_callbacks)
    sweep = TuningSweep.objects.get(session=grown)
    html = sweep_status(web, sweep)
    text = re.search(r'data-testid="recommendation-text"[^>]*>\s*<strong>(.*?)</strong>', html, re.S).group(1)
    assert text.startswith("Lowest input cost with needed-context recall ≥ 98% and no over-window call: trigger ")
    assert 'value="98"' in html.split('data-testid="recall-target"', 1)[0].rsplit("<input", 1)[1] + html.split(
        'data-testid="recall-target"', 1)[1].split(">", 1)[0]
    # a looser target lets a cheaper (or the same) setting through, never a dearer one
    strict = float(re.search(r'data-testid="recommendation-text" data-value="([\d.]+)"', html).group(1))
    loose_html = web.get(reverse("pages:sweep", args=[sweep.pk]), {"recall_target": "0"}).content.decode()
    loose = float(re.search(r'data-testid="recommendation-text" data-value="([\d.]+)"', loose_html).group(1))
    by_value = {p["value"]: p for p in sweep.points}
    assert by_value[loose]["cost_usd"] <= by_value[strict]["cost_usd"]
    assert "recall ≥ 0%" in loose_html
    bad = web.get(reverse("pages:sweep", args=[sweep.pk]), {"recall_target": "lots"}).content.decode()
    assert "recall target: &#x27;lots&#x27; is not a number" in bad and "≥ 98%" in bad


def test_one_click_applies_the_recommended_setting_and_undo_puts_the_old_policy_back(
        web, grown, django_capture_on_commit_callbacks):
    start_sweep(web, grown, django_capture_on_commit_callbacks)
    sweep = TuningSweep.objects.get(session=grown)
    before = Session.objects.get(pk=grown.pk).policy_id
    value = sorted(sweep.values)[0]
    r = web.post(reverse("pages:tuning-apply", args=[grown.pk]), {"sweep": sweep.pk, "value": value,
                                                                   "target": "session"})
    html = r.content.decode()
    session = Session.objects.get(pk=grown.pk)
    assert session.policy is not None and session.policy.data["trigger"]["threshold"] == int(value)
    assert f"trigger {int(value):,} tokens" in session.policy.name and 'data-testid="undo"' in html
    previous = re.search(r'name="previous" value="(\d*)"', html).group(1)
    undone = web.post(reverse("pages:tuning-undo", args=[grown.pk]), {"target": "session", "previous": previous})
    assert 'data-testid="undone"' in undone.content.decode()
    assert Session.objects.get(pk=grown.pk).policy_id == before
    # as the project's policy, and undone
    project_before = Project.objects.get(pk=grown.project_id).active_policy_id
    html = web.post(reverse("pages:tuning-apply", args=[grown.pk]), {"sweep": sweep.pk, "value": value,
                                                                      "target": "project"}).content.decode()
    assert Project.objects.get(pk=grown.project_id).active_policy.data["trigger"]["threshold"] == int(value)
    previous = re.search(r'name="previous" value="(\d*)"', html).group(1)
    web.post(reverse("pages:tuning-undo", args=[grown.pk]), {"target": "project", "previous": previous})
    assert Project.objects.get(pk=grown.project_id).active_policy_id == project_before


def test_applying_a_setting_the_sweep_never_tried_is_refused_and_changes_nothing(
        web, grown, django_capture_on_commit_callbacks):
    start_sweep(web, grown, django_capture_on_commit_callbacks)
    sweep = TuningSweep.objects.get(session=grown)
    count = StoredPolicy.objects.count()
    html = web.post(reverse("pages:tuning-apply", args=[grown.pk]), {"sweep": sweep.pk, "value": "1234.5",
                                                                      "target": "session"}).content.decode()
    assert "1234.5 is not one of the settings the sweep tried" in html
    html = web.post(reverse("pages:tuning-apply", args=[grown.pk]), {"sweep": sweep.pk, "value": sweep.values[0],
                                                                      "target": "elsewhere"}).content.decode()
    assert "unknown target &#x27;elsewhere&#x27;" in html
    assert StoredPolicy.objects.count() == count and Session.objects.get(pk=grown.pk).policy_id == grown.policy_id
