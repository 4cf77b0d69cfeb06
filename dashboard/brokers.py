"""The embedded broker: kombu's filesystem transport made safe against bad files, and the
transport options that settings, tests and benchmarks share (no Django imports, so
settings.py can use it).

kombu's own filesystem transport writes a message in place under its final ``.msg`` name
and its reader parses whatever it finds: a reader that lists the folder while a writer is
still writing takes a half-written file, and an empty or garbled file makes ``json.loads``
raise inside the worker's consumer, which Celery treats as unrecoverable (the worker
exits). Here the writer writes into ``tmp/`` and renames into the inbox (rename is atomic
on one filesystem, so a reader sees a whole message or none), and the reader moves any
file it cannot turn into a message into ``bad/``, with a log line, instead of raising, whatever
the parser raised (a file nested 100,000 deep raises RecursionError, not ValueError).

Importing this module makes ``filesystem://`` mean this transport in the importing
process (settings.py and dashboard/celery.py import it, so every process of the service
does), unless ``BROKER_FILESYSTEM_TRANSPORT=kombu`` asks for kombu's own (kept only to
measure one against the other: bench/run_latency.py)."""
from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from time import monotonic
from typing import Any

import kombu.transport
from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

log = logging.getLogger("dashboard.broker")

TRANSPORT_PATH = "dashboard.brokers:SafeFilesystemTransport"


def filesystem_transport_options(folder: Path, polling_interval: float = 0.1) -> dict:
    """Options of the filesystem transport rooted at ``folder`` (created if missing).

    One folder for both directions: every process both publishes and consumes. Processed
    messages are renamed into processed/ (atomic on one filesystem, so two workers never
    both take a message); the worker's recovery loop prunes it. Messages are written in
    tmp/ first; unreadable ones end in bad/."""
    folder = Path(folder)
    for sub in ("in", "processed", "control", "tmp", "bad"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(folder / "in"),
        "data_folder_out": str(folder / "in"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "tmp_folder": str(folder / "tmp"),
        "bad_folder": str(folder / "bad"),
        "store_processed": True,
        "polling_interval": polling_interval,
    }


class SafeFilesystemChannel(filesystem.Channel):
    """Atomic writes, and a reader that quarantines what it cannot read."""

    def _sibling_folder(self, option: str, name: str) -> str:
        folder = self.transport_options.get(option) or os.path.join(
            os.path.dirname(os.path.abspath(self.data_folder_out)), name)
        os.makedirs(folder, exist_ok=True)
        return str(folder)

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        tmp = os.path.join(self._sibling_folder("tmp_folder", "tmp"), name)
        try:
            with open(tmp, "wb") as f:
                f.write(filesystem.str_to_bytes(filesystem.dumps(payload)))
            os.replace(tmp, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise ChannelError(f"Cannot add message {name!r} to {self.data_folder_out!r}: {exc}") from exc

    def _get(self, queue: str) -> Any:
        suffix = f".{queue}.msg"
        processed = self.processed_folder if self.store_processed else self._sibling_folder("tmp_folder", "tmp")
        for filename in sorted(os.listdir(self.data_folder_in)):
            if not filename.endswith(suffix):
                continue
            taken = os.path.join(processed, filename)
            try:
                # Taking a message is moving it out of the inbox: of several readers one wins.
                os.rename(os.path.join(self.data_folder_in, filename), taken)
            except OSError:
                continue
            try:
                with open(taken, "rb") as f:
                    raw = f.read()
            except OSError as exc:
                self._quarantine(taken, f"cannot be read: {exc}")
                continue
            try:
                payload = self._parse(raw)
            except Exception as exc:  # noqa: BLE001 - whatever a file does to the parser, the worker lives on
                payload = f"unreadable ({type(exc).__name__}: {str(exc)[:200]})"
            if isinstance(payload, str):
                self._quarantine(taken, payload)
                continue
            if not self.store_processed:
                os.unlink(taken)
            return payload
        raise filesystem.Empty()

    def _parse(self, raw: bytes) -> Any:
        """The message in ``raw``, or a string saying why it is not one."""
        if not raw.strip():
            return "empty file"
        try:
            payload = loads(bytes_to_str(raw))
        except Exception as exc:  # noqa: BLE001 - any failure to parse (ValueError, RecursionError on deep
            # nesting, MemoryError) sets the file aside; KeyboardInterrupt and SystemExit still stop the worker
            return f"not JSON ({type(exc).__name__}: {str(exc)[:200]})"
        try:
            # What the consumer will do with it: a payload that fails here would raise
            # inside the worker's event loop.
            self.Message(payload, channel=self)
        except Exception as exc:  # noqa: BLE001 - any malformed payload is quarantined
            return f"not a kombu message ({type(exc).__name__}: {str(exc)[:200]})"
        return payload

    def _quarantine(self, path: str, why: str) -> None:
        bad = self._sibling_folder("bad_folder", "bad")
        target = os.path.join(bad, os.path.basename(path))
        try:
            shutil.move(path, target)
        except OSError:
            target = "(could not be moved; deleted)"
            try:
                os.unlink(path)
            except OSError:
                pass
        log.warning("broker: skipped unreadable message file %s (%s); moved to %s. If it was a run's task, "
                    "the run is sent again by the recovery loop (RUN_RESEND_AFTER)",
                    os.path.basename(path), why, target)


class SafeFilesystemTransport(filesystem.Transport):
    Channel = SafeFilesystemChannel


def install() -> None:
    """Make ``filesystem://`` resolve to :class:`SafeFilesystemTransport` in this process."""
    if os.environ.get("BROKER_FILESYSTEM_TRANSPORT", "").strip().lower() == "kombu":
        return
    kombu.transport.TRANSPORT_ALIASES["filesystem"] = TRANSPORT_PATH
    kombu.transport._transport_cache.pop("filesystem", None)


install()
