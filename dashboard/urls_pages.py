"""Routes of the dashboard pages. Included from dashboard/urls.py with
``path("", include("dashboard.urls_pages"))``; names live in the ``pages`` namespace."""
from django.urls import path

from .views import (
    api_keys,
    archive_browser,
    before_after,
    continuous_tuning,
    docs,
    force_summarize,
    gateway_call,
    gateway_calls,
    layout,
    overview,
    run_page,
    runs_list,
    search,
    session_page,
    sessions_list,
    tuning,
    tuning_grid,
)

app_name = "pages"

urlpatterns = [
    path("", overview.overview, name="home"),
    path("login/", layout.login, name="login"),
    path("logout/", layout.logout, name="logout"),
    path("project/", layout.switch_project, name="switch-project"),

    path("docs/", docs.docs_index, name="docs"),
    path("docs/<slug:slug>/", docs.doc, name="doc"),

    path("sessions/", sessions_list.sessions_list, name="sessions"),
    path("sessions/upload/", sessions_list.upload, name="upload"),
    path("sessions/delete/", sessions_list.delete, name="sessions-delete"),
    path("runs/", runs_list.runs_list, name="runs"),
    path("search/", search.search, name="search"),
    path("projects/new/", sessions_list.create_project, name="create-project"),
    path("projects/<int:pk>/samples/", sessions_list.load_samples, name="load-samples"),
    path("projects/<int:pk>/keys/", api_keys.api_keys, name="api-keys"),
    path("projects/<int:pk>/keys/new/", api_keys.create_key, name="api-key-create"),
    path("projects/<int:pk>/keys/<int:key_id>/revoke/", api_keys.revoke_key, name="api-key-revoke"),

    path("sessions/<int:pk>/", session_page.session_detail, name="session"),
    path("sessions/<int:pk>/overview/", session_page.session_overview, name="session-overview"),
    path("sessions/<int:pk>/transcript/", session_page.transcript, name="transcript"),
    path("sessions/<int:pk>/messages/<int:position>/", session_page.message_full, name="message"),
    path("sessions/<int:pk>/force/", force_summarize.force_summarize, name="force"),
    path("sessions/<int:pk>/calls/", gateway_calls.calls, name="gateway-calls"),
    path("calls/<int:pk>/", gateway_call.call_detail, name="gateway-call"),
    path("calls/<int:pk>/upstream.json", gateway_call.upstream_json, name="gateway-call-upstream"),
    path("runs/<int:pk>/progress/", force_summarize.run_progress, name="run-progress"),

    path("runs/<int:pk>/", run_page.run_detail, name="run"),
    path("runs/<int:pk>/before-after/", before_after.before_after, name="before-after"),

    path("sessions/<int:pk>/archive/", archive_browser.archive, name="archive"),
    path("sessions/<int:pk>/archive/replay/", archive_browser.replay_check, name="archive-replay"),
    path("sessions/<int:pk>/archive/<str:entry_id>/", archive_browser.entry, name="archive-entry"),

    path("sessions/<int:pk>/tuning/", tuning.tuning, name="tuning"),
    path("sessions/<int:pk>/tuning/preview/", tuning.preview, name="tuning-preview"),
    path("sessions/<int:pk>/tuning/save/", tuning.save, name="tuning-save"),
    path("sessions/<int:pk>/tuning/sweep/", tuning.start_sweep, name="tuning-sweep"),
    path("sessions/<int:pk>/tuning/apply/", tuning.apply_setting, name="tuning-apply"),
    path("sessions/<int:pk>/tuning/undo/", tuning.undo_setting, name="tuning-undo"),
    path("sweeps/<int:pk>/", tuning.sweep_status, name="sweep"),
    path("sessions/<int:pk>/tuning/grid/", tuning_grid.start, name="tuning-grid"),
    path("sessions/<int:pk>/tuning/grid/latest/", tuning_grid.latest, name="tuning-grid-latest"),
    path("grids/<int:pk>/", tuning_grid.status, name="grid"),
    path("grids/<int:pk>/cancel/", tuning_grid.cancel, name="grid-cancel"),
    path("grids/<int:pk>/apply/", tuning_grid.apply, name="grid-apply"),
    path("tuning/continuous/<int:pk>/", continuous_tuning.evidence, name="tuning-evidence"),
]
