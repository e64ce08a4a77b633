"""A publisher on PostOffice outlives a daemon restart: `publish()`
queues and returns while the daemon is down, the letters go in order once it is back,
and what cannot go within `retry-for-s` is given up, reported, never silently."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mailbus
import pytest
from mailbus.email_message import from_bytes
from mailbus.postoffice.background import SEND_ABANDONED, SEND_RETRYING
from mailbus.postoffice.transport import PostOfficeSender
from mailbus.trace import TraceEvent

from .conftest import DaemonProcess, wait_until
from .test_po_transport import options


def bodies(daemon: DaemonProcess, box: str) -> list[str]:
    with daemon.client() as reader:
        reader.check_out(box, "pw")
        return [from_bytes(x.payload).body for x in reader.get_mail(0)]


@pytest.mark.slow
def test_publishing_goes_on_through_a_daemon_restart(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    store = tmp_path / "restart" / "postoffice.db"
    first = spawn_daemon(store=store)
    port = first.port
    with first.client() as setup:
        setup.create_box("lab.sub", "pw")  # the reader, offline: letters wait for it
    events: list[TraceEvent] = []
    ctx = mailbus.Context(options(port, "lab.pub", **{"retry-for-s": 120.0})).init()
    try:
        ctx.tracer.add_listener(events.append)
        sender = ctx.sender
        assert isinstance(sender, PostOfficeSender)
        publisher = ctx.publisher("robot/pose")
        for n in range(10):
            publisher.publish(f"before {n}")
        assert sender.flush(30)
        first.kill()  # SIGKILL: the daemon is gone, mid-stream
        for n in range(20):
            publisher.publish(f"during {n}")  # must not raise
        wait_until(lambda: any(e.kind == SEND_RETRYING for e in events), 30)
        assert sender.delivery.pending > 0
        second = spawn_daemon("--port", str(port), store=store)  # same port, same store
        assert second.port == port
        assert sender.flush(60)
    finally:
        ctx.shutdown()
    expected = [f"before {n}" for n in range(10)] + [f"during {n}" for n in range(20)]
    assert bodies(second, "lab.sub") == expected  # all of them, once each, in order
    assert sender.delivery.counters["send_abandoned"] == 0
    assert not any(e.kind == SEND_ABANDONED for e in events)


def test_letters_the_daemon_never_takes_are_given_up_and_reported(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    daemon = spawn_daemon(store=tmp_path / "gone" / "postoffice.db")
    events: list[TraceEvent] = []
    ctx = mailbus.Context(options(daemon.port, "gone.pub", **{"retry-for-s": 0.5})).init()
    try:
        ctx.tracer.add_listener(events.append)
        sender = ctx.sender
        assert isinstance(sender, PostOfficeSender)
        daemon.kill()
        publisher = ctx.publisher("t")
        for n in range(5):
            publisher.publish(f"lost {n}")
        assert sender.flush(30)  # given up after half a second, not held for ever
    finally:
        ctx.shutdown()
    abandoned = [e for e in events if e.kind == SEND_ABANDONED]
    given_up = [mid for e in abandoned for mid in e.extra["message_ids"]]
    assert sum(e.extra["count"] for e in abandoned) == 5 == len(given_up)
    assert sender.delivery.counters["send_abandoned"] == 5
