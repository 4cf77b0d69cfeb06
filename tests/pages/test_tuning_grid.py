"""The tuning page's two-dimensional grid: trigger × kept tail (or clearing threshold) over
the project's sessions, split into chunks (run inline here: eager Celery, as every page
test runs its tasks), drawn as a heatmap of cost with recall contours; cancel; bad sizes."""
from __future__ import annotations

import re
from html import unescape

from django.urls import reverse

from compaction import Policy
from compaction.figures import ReplayFigures
from compaction.preview import preview_policy
from dashboard.models import StoredMessage, TuningGrid, TuningGridChunk
from dashboard.services.policies import apply_service_defaults
from dashboard.services.tuning_grids import cell_policy, request_grid, run_chunk
from tests.pages import factories
from tests.pages.tuning_form import posted_form


def start(web, session, capture, **fields) -> tuple[int, str]:
    data = {**posted_form(session), "grid_x": "tokens", "grid_y": "keep_messages", "grid_columns": "3",
            "grid_rows": "2", "grid_scope": "project", **fields}
    with capture(execute=True):
        r = web.post(reverse("pages:tuning-grid", args=[session.pk]), data, HTTP_HX_REQUEST="true")
    return r.status_code, r.content.decode()


def test_a_grid_over_the_project_is_drawn_as_a_heatmap_with_the_sums_of_its_sessions(
        web, grown, small, settings, django_capture_on_commit_callbacks):
    settings.TUNING_GRID_CHUNKS = 3  # several chunks, each its own task, summed at the end
    status, html = start(web, grown, django_capture_on_commit_callbacks)
    assert status == 200, html
    grid = TuningGrid.objects.get(session=grown)
    assert grid.status == "done" and grid.done == grid.total == 6 * 2 and grid.chunks_done == grid.chunks_total == 3
    assert len(grid.x_values) == 3 and len(grid.y_values) == 2 and grid.current_x == 6000.0
    assert TuningGridChunk.objects.filter(grid=grid, status="done").count() == 3
    # every cell is the sum of the preview of its pair over the two sessions: the same numbers
    base = Policy.load(grid.policy)
    for cell in (0, 2, 5):  # 2 and 5: the highest trigger, where a quiet replay stands for the rest
        total = ReplayFigures()
        for s in (grown, small):
            raws = list(StoredMessage.objects.filter(session=s).order_by("position").values_list("raw", flat=True))
            total = total + preview_policy(raws, cell_policy(apply_service_defaults(base, s), grid, cell), tools=s.tools,
                                           fallback_model=s.model).figures
        assert {k: v for k, v in grid.cells[cell].items() if k != "errors"} == total.to_dict()
    # a lower trigger compacts more, in every row
    for row in (0, 1):
        counts = [c["compactions"] for c in grid.cells[row * 3:row * 3 + 3]]
        assert counts[0] > counts[-1], counts
    page = web.get(reverse("pages:tuning-grid-latest", args=[grown.pk])).content.decode()
    assert 'data-testid="grid-heatmap"' in page and 'hx-trigger="every 1s"' not in page
    assert len(re.findall(r'<g class="cell', page)) == 6
    assert 'class="mark-current"' in page or 'class="mark-choice"' in page
    assert "Lowest input cost with needed-context recall ≥ 98%" in page


def test_the_same_grid_twice_gives_the_same_cells(web, grown, django_capture_on_commit_callbacks, settings):
    settings.TUNING_GRID_CHUNKS = 2
    start(web, grown, django_capture_on_commit_callbacks, grid_y="clearing_fraction", grid_x="window_fraction")
    settings.TUNING_GRID_CHUNKS = 5
    start(web, grown, django_capture_on_commit_callbacks, grid_y="clearing_fraction", grid_x="window_fraction")
    one, two = TuningGrid.objects.filter(session=grown).order_by("pk")
    assert one.status == two.status == "done" and one.chunks_total != two.chunks_total
    assert one.cells == two.cells and one.y_values == two.y_values


def test_a_grid_of_a_bad_size_or_setting_is_refused_with_the_reason(web, grown, django_capture_on_commit_callbacks):
    for fields, reason in (({"grid_columns": "40"}, "columns must be between 2 and 12, got 40"),
                           ({"grid_rows": "six"}, "rows must be a whole number"),
                           ({"grid_y": "summary_size"}, "unknown second setting 'summary_size'"),
                           ({"grid_x": "turns"}, "unknown trigger kind 'turns'")):
        status, page = start(web, grown, django_capture_on_commit_callbacks, **fields)
        html = unescape(page)
        assert status == 400 and reason in html and 'data-testid="grid-error"' in html, (fields, html)
    assert not TuningGrid.objects.exists()


def test_a_grid_over_the_replay_limit_is_refused(web, grown, small, settings, django_capture_on_commit_callbacks):
    settings.TUNING_GRID_MAX_REPLAYS = 100
    status, html = start(web, grown, django_capture_on_commit_callbacks, grid_columns="8", grid_rows="8")
    assert status == 400 and "64 cells × 2 sessions = 128 replays, over TUNING_GRID_MAX_REPLAYS=100" in html
    assert not TuningGrid.objects.exists()


def test_a_cancelled_grid_runs_no_more_replays(web, grown):
    """Queued without running (its tasks are queued only once the request's transaction
    commits, which this test's never does), then cancelled: its chunks do nothing."""
    grid = request_grid(grown, Policy.load(factories.TEST_POLICY), x_param="tokens", y_param="keep_messages",
                        columns=2, rows=2, scope="session")
    queued = web.get(reverse("pages:grid", args=[grid.pk])).content.decode()
    assert 'data-testid="grid-progress"' in queued and 'data-testid="grid-cancel"' in queued
    r = web.post(reverse("pages:grid-cancel", args=[grid.pk]), HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and 'data-testid="grid-cancelled"' in r.content.decode()
    assert [run_chunk(c.pk) for c in grid.chunks.all()] == ["skipped"] * grid.chunks_total
    grid.refresh_from_db()
    assert grid.status == "cancelled" and grid.done == 0 and grid.cells == []
    # a second click (or a retried request) finds it cancelled and says so, not an error
    again = web.post(reverse("pages:grid-cancel", args=[grid.pk]), HTTP_HX_REQUEST="true")
    assert again.status_code == 200 and 'data-testid="grid-cancelled"' in again.content.decode()
    TuningGrid.objects.filter(pk=grid.pk).update(status="failed", error="the worker stopped")
    failed = web.post(reverse("pages:grid-cancel", args=[grid.pk]), HTTP_HX_REQUEST="true")
    assert failed.status_code == 400 and "already finished (failed)" in failed.content.decode()
    assert TuningGrid.objects.get(pk=grid.pk).status == "failed"


def test_a_chunk_stops_before_its_next_replay_once_the_grid_is_cancelled(grown):
    grid = request_grid(grown, Policy.load(factories.TEST_POLICY), x_param="tokens", y_param="keep_messages",
                        columns=2, rows=2, scope="session")
    chunk = grid.chunks.first()
    TuningGrid.objects.filter(pk=grid.pk).update(status="cancelled")  # cancelled after the chunk was queued
    assert run_chunk(chunk.pk) == "cancelled"
    grid.refresh_from_db()
    assert grid.done == 0 and grid.status == "cancelled"


def test_the_tuning_page_has_the_grid_form_and_loads_the_latest_grid(web, grown):
    html = web.get(reverse("pages:tuning", args=[grown.pk])).content.decode()
    assert 'data-testid="grid-start"' in html and reverse("pages:tuning-grid-latest", args=[grown.pk]) in html
    empty = web.get(reverse("pages:tuning-grid-latest", args=[grown.pk])).content.decode()
    assert 'id="grid-status"' in empty and 'data-testid="grid-heatmap"' not in empty


def test_the_recommended_pair_is_put_in_use_in_one_click_and_undone(web, grown, django_capture_on_commit_callbacks):
    """The recommendation's buttons post its cell; the session then runs on a stored policy
    with exactly that cell's pair of settings, named after it, and undo puts back what the
    session followed before (its project's policy)."""
    start(web, grown, django_capture_on_commit_callbacks)
    grid = TuningGrid.objects.get(session=grown)
    page = web.get(reverse("pages:tuning-grid-latest", args=[grown.pk]) + "?recall_target=0").content.decode()
    cell = int(re.search(r'name="cell" value="(\d+)"', page).group(1))
    assert 'data-testid="grid-apply-session"' in page and 'data-testid="grid-apply-project"' in page
    r = web.post(reverse("pages:grid-apply", args=[grid.pk]), {"cell": str(cell), "target": "session"},
                 HTTP_HX_REQUEST="true")
    html = unescape(r.content.decode())
    assert r.status_code == 200 and 'data-testid="applied"' in html, html
    grown.refresh_from_db()
    x, y = grid.x_values[cell % 3], grid.y_values[cell // 3]
    assert grown.policy is not None and f"trigger {int(x):,} tokens" in grown.policy.name
    assert f"kept tail {int(y)} message" in grown.policy.name and grown.policy.name in html
    stored = Policy.load(grown.policy.data)
    expected = cell_policy(Policy.load(grid.policy), grid, cell)
    assert stored.trigger == expected.trigger and stored.cut.keep_messages == int(y)
    assert 'hx-target="#grid-apply-result"' in html  # the undo answers in the grid's block
    undo = web.post(reverse("pages:tuning-undo", args=[grown.pk]), {"target": "session", "previous": ""},
                    HTTP_HX_REQUEST="true")
    assert 'data-testid="undone"' in undo.content.decode()
    grown.refresh_from_db()
    assert grown.policy is None


def test_applying_a_cell_that_does_not_exist_or_an_unfinished_grid_changes_nothing(web, grown,
                                                                                    django_capture_on_commit_callbacks):
    start(web, grown, django_capture_on_commit_callbacks)
    grid = TuningGrid.objects.get(session=grown)
    active = grown.project.active_policy_id
    for data, reason in (({"cell": "6", "target": "session"}, "the grid has cells 0 to 5, not 6"),
                         ({"cell": "-1", "target": "session"}, "the grid has cells 0 to 5, not -1"),
                         ({"cell": "two", "target": "session"}, "the cell must be a number"),
                         ({"cell": "1", "target": "everyone"}, "unknown target 'everyone'")):
        r = web.post(reverse("pages:grid-apply", args=[grid.pk]), data, HTTP_HX_REQUEST="true")
        assert reason in unescape(r.content.decode()), (data, r.content)
    queued = request_grid(grown, Policy.load(factories.TEST_POLICY), x_param="tokens", y_param="keep_messages",
                          columns=2, rows=2, scope="session")
    r = web.post(reverse("pages:grid-apply", args=[queued.pk]), {"cell": "0", "target": "project"},
                 HTTP_HX_REQUEST="true")
    assert "the grid has not finished" in r.content.decode()
    grown.refresh_from_db()
    assert grown.policy is None and grown.project.active_policy_id == active
