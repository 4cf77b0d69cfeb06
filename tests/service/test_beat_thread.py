"""The heartbeat thread runs and tuning jobs share: it beats on its interval, survives a
failed beat, and stops for good once a beat reports the claim lost (an execution that was
only slow must not keep a row alive that another execution now holds)."""
import threading

import pytest

from dashboard.services.runs import beat_thread
from dashboard.services.runs.beat_thread import BeatThread


class Scripted(BeatThread):
    """Answers each beat from a script: True (held), False (lost) or an exception."""

    label = "scripted"

    def __init__(self, script):
        super().__init__()
        self.script, self.calls = list(script), 0
        self.done = threading.Event()

    def beat(self):
        self.calls += 1
        step = self.script.pop(0) if self.script else True
        if not self.script:
            self.done.set()
        if isinstance(step, Exception):
            raise step
        return step


@pytest.fixture
def fast_beats(settings, monkeypatch):
    settings.RUN_HEARTBEAT_INTERVAL = 0.01
    monkeypatch.setattr(beat_thread, "is_eager", lambda: False)  # as in a worker's pool process


def test_a_failed_beat_is_retried_and_a_lost_claim_ends_the_thread(fast_beats, caplog):
    hb = Scripted([True, RuntimeError("database went away"), True, False]).start()
    assert hb.done.wait(5)
    hb._thread.join(5)
    assert not hb._thread.is_alive(), "the thread kept beating after the claim was lost"
    assert hb.calls == 4
    assert "heartbeat of scripted failed" in caplog.text
    hb.stop()


def test_stop_ends_a_thread_that_still_holds_its_claim(fast_beats):
    with Scripted([True] * 3) as hb:
        assert hb.done.wait(5)
    assert not hb._thread.is_alive()


def test_inline_execution_starts_no_thread(settings):
    settings.RUN_HEARTBEAT_INTERVAL = 0.01
    with Scripted([]) as hb:
        assert hb._thread is None
