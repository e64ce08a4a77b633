"""Over PostOffice the received event carries the letter's bytes (what the daemon
delivered), and no password is among them."""

from __future__ import annotations

import threading

import mailbus
from mailbus.email_message import from_bytes
from mailbus.options import options_from_mapping
from mailbus.trace import Kind, TraceEvent

from .conftest import Daemon

PASSWORD = "Zq9-letter-K3y-long"


def test_received_event_carries_the_letter_bytes(daemon: Daemon) -> None:
    def options(box: str) -> mailbus.Options:
        table = {"port": daemon.port, "box": box, "password": PASSWORD}
        return options_from_mapping({"transport": "postoffice", "postoffice": table})

    received: list[TraceEvent] = []
    arrived = threading.Event()

    def listen(event: TraceEvent) -> None:
        if event.kind == Kind.RECEIVED:
            received.append(event)
            arrived.set()

    with mailbus.Context(options("lab.pub")) as pub, mailbus.Context(options("lab.sub")) as sub:
        sub.tracer.add_listener(listen)
        subscription = sub.subscription("lab/raw")
        pub.publisher("lab/raw").publish('{"celsius": 21.5}')
        assert mailbus.wait_for_message(subscription, 10.0) is not None
        assert arrived.wait(10.0)
    (event,) = received
    assert event.raw is not None
    letter = from_bytes(event.raw)
    assert (letter.subject, letter.body, letter.message_id) == (
        "lab/raw",
        '{"celsius": 21.5}',
        event.message_id,
    )
    assert PASSWORD.encode() not in event.raw
