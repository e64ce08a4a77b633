"""Ctrl-C in the middle of the listening loop of `topic list`, `service list` and
`participant list` (mailbus.shell.session.listen): an email already taken from the queue
when the signal lands is still gathered. As KeyboardInterrupt it was lost: it could land
between the queue handing the email over and `take` counting it (a shell test saw
`lab/counted` missing between two counted topics, 1 run in 8 under load)."""

from __future__ import annotations

import os
import signal
import types
from typing import Any

from mailbus.shell.session import Traffic, listen
from mailbus.trace import Kind, TraceEvent, Tracer


def test_an_email_being_taken_when_ctrl_c_lands_is_still_gathered() -> None:
    tracer = Tracer()
    traffic = Traffic(types.SimpleNamespace(tracer=tracer))  # type: ignore[arg-type]
    names = ["lab/ready", "lab/counted", "lab/later"]
    for name in names:
        tracer.emit(TraceEvent(Kind.RECEIVED, 0, name=name))
    gathered: list[str] = []

    def take(event: TraceEvent) -> None:
        if event.name == "lab/counted":
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands while this one is taken
        gathered.append(event.name)

    summary: dict[str, Any] = {}
    before = signal.getsignal(signal.SIGINT)
    listen(traffic, None, take, summary)  # no deadline: only the Ctrl-C ends it
    assert gathered == names
    assert summary["interrupted"] is True
    assert signal.getsignal(signal.SIGINT) is before  # Ctrl-C is KeyboardInterrupt again
