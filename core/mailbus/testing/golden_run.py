"""The `golden` fixture: `golden.check(session, ...)` replays a recording's inputs into
the system under test and compares its outputs with the golden ones
(mailbus.testing.golden says how)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from mailbus.testing.buses import Bus
from mailbus.testing.golden import (
    DIFF_LINES,
    ORDERS,
    Capture,
    Normaliser,
    Output,
    compare,
    names_regex,
    read_golden,
    write_golden,
)
from mailbus.testing.system import System


class GoldenMismatch(AssertionError):
    """The system's outputs differ from the golden ones; the message is the diff."""


class Golden:
    def __init__(self, bus: Bus, system: System | None, update: bool, default_file: Path) -> None:
        self.bus = bus
        self.system = system
        self.update = update
        self.default_file = default_file
        self.updated: list[Path] = []

    def outputs_of_system(self) -> tuple[set[str], set[str]]:
        """(topics, services) the system under test publishes and serves."""
        if self.system is None:
            return set(), set()
        entities = self.system.entities()
        return (
            {n for k, n in entities if k == "publisher"},
            {n for k, n in entities if k == "server"},
        )

    def check(
        self,
        session: str | Path,
        *,
        outputs: Iterable[str] | None = None,
        file: str | Path | None = None,
        ignore: Iterable[str] = (),
        normalise: Mapping[str, Callable[[Any], Any]] | None = None,
        tolerance: float = 1e-9,
        order: str = "topic",
        rate: float = 20.0,
        within: float = 10.0,
        settle: float = 0.3,
    ) -> list[Output]:
        """Replay, capture, compare; GoldenMismatch with the diff when they differ.
        Returns this run's (normalised) outputs."""
        __tracebackhide__ = True
        if order not in ORDERS:
            raise ValueError(f"order is one of {', '.join(ORDERS)}, not {order!r}")
        # Sessions need polars: imported only by a test that uses a recording.
        from mailbus.sessions.player import Player, replay_events

        session = str(session)
        topics, services = self.outputs_of_system()
        if outputs is not None:
            declared = set(outputs)
            topics, services = declared - services, declared & services
        names = topics | services
        if not names:
            raise ValueError(
                "golden.check: no outputs; name them with outputs=[...] or start the "
                "system under test with the system fixture first"
            )
        norm = Normaliser(ignore, normalise)
        path = Path(file) if file is not None else self.default_file
        if path.exists():
            expected = read_golden(path)
        else:
            expected = [
                norm(e.name, "message" if e.what == "message" else "response", e.body)
                for e in replay_events(session, include=names_regex(names))
                if e.what in ("message", "response")
            ]
        # A declared output is a service when its golden outputs are responses.
        answered = {o.name for o in expected if o.what == "response"}
        topics, services = topics - answered, services | answered
        capture = Capture(self.bus, topics, services)
        try:
            player = Player(session, self.bus.context, exclude=names_regex(names), rate=rate)
            player.run()
            deadline = time.monotonic() + within
            capture.wait_for(len(expected), deadline)
            # Outputs beyond the golden ones fail too (and an update takes them all):
            # wait until the system has been quiet for `settle` seconds.
            capture.wait_quiet(settle, deadline + settle)
        finally:
            capture.close()
        actual = [norm(name, what, body) for name, what, body in capture.produced()]
        if self.update:
            write_golden(path, actual, session)
            self.updated.append(path)
            return actual
        lines = compare(expected, actual, order, tolerance)
        if lines:
            source = f"golden file {path}" if path.exists() else f"the recording {session}"
            shown = lines[:DIFF_LINES]
            if len(lines) > DIFF_LINES:
                shown.append(f"... {len(lines) - DIFF_LINES} more lines")
            raise GoldenMismatch(
                f"outputs differ from {source} (order: {order}; {len(expected)} golden, "
                f"{len(actual)} produced):\n"
                + "\n".join(f"  {line}" for line in shown)
                + "\nrun with --mailbus-update to accept this run's outputs"
            )
        return actual
