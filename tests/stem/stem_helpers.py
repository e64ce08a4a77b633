"""Helpers shared by the Stem tests (imported by name: pytest puts this folder on
sys.path)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from mailbus import Context, Options, TraceEvent
from mailbus.options import load_options, options_from_mapping
from maildir_transport import maildir_transport


class Recorder:
    """Collects a hub's trace events; `wait_for` blocks on a condition, bounded."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self._changed = threading.Condition()

    def __call__(self, event: TraceEvent) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def of(self, kind: str) -> list[TraceEvent]:
        return [e for e in self.events if e.kind == kind]

    def wait_for(self, kind: str, count: int = 1, timeout: float = 5.0) -> list[TraceEvent]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.of(kind)) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no {count} x {kind} within {timeout} s: {self.kinds()}")
                self._changed.wait(remaining)
            return self.of(kind)


def make_context(net: str, name: str) -> Context:
    """A context (not initialised yet) for the network spec `net`: `dir:ROOT` (the
    directory transport), `po:PORT:BOX:PASSWORD` (PostOffice), `toml:FILE` (options)."""
    kind, _, rest = net.partition(":")
    if kind == "dir":
        options = Options(from_address=f"{name.lower()}@localhost", polling_period_ms=5)
        return Context(options, transport=maildir_transport(Path(rest), name))
    if kind == "po":
        port, box, password = rest.split(":")
        table = {"port": int(port), "box": box, "password": password}
        return Context(options_from_mapping({"transport": "postoffice", "postoffice": table}))
    if kind == "toml":
        return Context(load_options(rest))
    raise ValueError(f"unknown network spec {net!r}")
