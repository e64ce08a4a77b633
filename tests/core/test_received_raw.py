"""email.received carries the bytes the email arrived with, and nothing when no bytes
travelled (the in-process transport hands over Python objects)."""

import mailbus
from mailbus import Kind
from mailbus.email_message import Email, to_bytes
from mailbus.inprocess import InProcessReceiver
from mailbus.trace import TraceEvent


def _received(events: list[TraceEvent]) -> list[TraceEvent]:
    return [e for e in events if e.kind == Kind.RECEIVED]


def test_bytes_from_the_wire_travel_with_the_received_event(
    ctx: mailbus.Context, events: list[TraceEvent]
) -> None:
    sub = ctx.subscription("wire/topic")
    email = Email(
        subject="wire/topic",
        body="from bytes",
        headers={"Source-Timestamp": "1", "Publisher-GID": "ab"},
        message_id="<w1@x>",
    )
    # What a relay adds in front, and a header Mailbus does not know: kept as they came.
    data = b"Received: from relay (127.0.0.1)\r\n\tby mx; Fri, 15 Jan 2027\r\n" + to_bytes(
        email, date="Fri, 15 Jan 2027 08:00:12 GMT"
    )
    receiver = ctx.transport.receiver
    assert isinstance(receiver, InProcessReceiver)
    receiver.push_raw(data, origin="uid:1")
    assert mailbus.wait_for_message(sub, 1.0) is not None
    (event,) = _received(events)
    assert event.raw == data
    assert event.body == "from bytes"


def test_an_email_object_has_no_raw_bytes(ctx: mailbus.Context, events: list[TraceEvent]) -> None:
    sub = ctx.subscription("t")
    ctx.publisher("t").publish("in process")
    assert mailbus.wait_for_message(sub, 1.0) is not None
    (event,) = _received(events)
    assert event.raw is None
