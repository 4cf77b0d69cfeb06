"""Broker transport options that settings, tests and benchmarks share (no Django imports,
so settings.py can use it)."""
from __future__ import annotations

from pathlib import Path


def filesystem_transport_options(folder: Path, polling_interval: float = 0.1) -> dict:
    """Options of kombu's filesystem transport rooted at ``folder`` (created if missing).

    One folder for both directions: every process both publishes and consumes. Processed
    messages are renamed into processed/ (atomic on one filesystem, so two workers never
    both take a message); the worker's recovery loop prunes it."""
    folder = Path(folder)
    for sub in ("in", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(folder / "in"),
        "data_folder_out": str(folder / "in"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "store_processed": True,
        "polling_interval": polling_interval,
    }
