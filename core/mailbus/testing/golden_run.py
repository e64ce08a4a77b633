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


class GoldenEmpty(AssertionError):
    """No golden output to compare with, or none to write: a golden test that would pass
    while checking nothing (unless `allow_empty=True` says that nothing is right)."""


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
        allow_empty: bool = False,
    ) -> list[Output]:
        """Replay, capture, compare; GoldenMismatch with the diff when they differ.
        Returns this run's (normalised) outputs. No golden output, or an update with no
        output to write, is GoldenEmpty unless `allow_empty`."""
        __tracebackhide__ = True
        if order not in ORDERS:
            raise ValueError(f"order is one of {', '.join(ORDERS)}, not {order!r}")
        # Sessions need polars: imported only by a test that uses a recording.
        from mailbus.sessions.player import Player, ReplayEvent, replay_events

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
        source = f"golden file {path}" if path.exists() else f"the recording {session}"
        if not expected and not self.update and not allow_empty:
            raise GoldenEmpty(
                f"golden.check: {source} has no output on {', '.join(sorted(names))}: the "
                "test would pass while checking nothing. Name the outputs the recording "
                "holds, or pass allow_empty=True if the system must produce none"
            )
        capture = Capture(self.bus, topics, services)
        requests: dict[str, int] = dict.fromkeys(services, 0)

        def answer_before_going_on(player: Player, event: ReplayEvent) -> None:
            # A replayed request to the system's own service waits for the system's
            # answer, as its recorded client did, so that what the recording sent after
            # the answer is not sent before it.
            if event.what == "request" and event.name in requests:
                requests[event.name] += 1
                capture.wait_answered(event.name, requests[event.name], time.monotonic() + within)

        try:
            # Recorded requests to the system's services are inputs too (their recorded
            # responses, replayed beside them, are told apart by Replay-Of).
            player = Player(
                session,
                self.bus.context,
                exclude=names_regex(topics) if topics else None,
                rate=rate,
                on_sent=answer_before_going_on,
            )
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
            if not actual and not allow_empty:
                raise GoldenEmpty(
                    f"golden.check: this run produced no output on "
                    f"{', '.join(sorted(names))}, so {path} is not written: a golden file "
                    "of none passes while checking nothing. Pass allow_empty=True if the "
                    "system must produce none"
                )
            write_golden(path, actual, session)
            self.updated.append(path)
            return actual
        lines = compare(expected, actual, order, tolerance)
        if lines:
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
