from dashboard.models import CompactionRun
from dashboard.selectors.session_page import session_runs


def test_a_grown_session_has_runs_placed_in_its_history(grown):
    runs = session_runs(grown)
    assert [r.status for r in runs] and all(r.status == "succeeded" for r in runs)
    positions = [r.commit_position for r in runs]
    assert positions == sorted(positions) and 12 < positions[0] < grown.message_count
    assert CompactionRun.objects.filter(session=grown).count() == grown.compaction_count
