"""A bad email never stalls or kills the stream: it is skipped, counted and traced."""

import mailbus
from mailbus import Kind
from mailbus.email_message import Email, to_bytes
from mailbus.inprocess import InProcessReceiver
from mailbus.trace import TraceEvent


def receiver_of(ctx: mailbus.Context) -> InProcessReceiver:
    receiver = ctx.transport.receiver
    assert isinstance(receiver, InProcessReceiver)
    return receiver


def test_garbage_and_foreign_emails_are_skipped_and_the_stream_goes_on(
    ctx: mailbus.Context, events: list[TraceEvent]
) -> None:
    sub = ctx.subscription("t")
    receiver = receiver_of(ctx)
    receiver.push_raw(b"\x00\xffnot an email", origin="uid:7")
    newsletter = to_bytes(Email(subject="Our spring sale", body="50% off"))
    receiver.push_raw(newsletter, origin="uid:8")
    receiver.push_raw(b"Subject: t\r\nSource-Timestamp: soon\r\nPublisher-GID: x\r\n\r\nb")
    ctx.publisher("t").publish("after")
    message = mailbus.wait_for_message(sub, 1.0)
    assert message is not None and message.body == "after"
    assert ctx.counters["malformed"] == 1
    assert ctx.counters["foreign"] == 2
    skipped = [e for e in events if e.kind == Kind.SKIPPED]
    assert [e.extra["origin"] for e in skipped][:2] == ["uid:7", "uid:8"]
    assert "Source-Timestamp" in skipped[2].detail


def test_raw_mailbus_email_from_the_wire_is_delivered(ctx: mailbus.Context) -> None:
    sub = ctx.subscription("wire/topic")
    email = Email(
        subject="wire/topic",
        body="from bytes",
        headers={"Source-Timestamp": "1", "Publisher-GID": "ab"},
        message_id="<w1@x>",
    )
    receiver_of(ctx).push_raw(to_bytes(email))
    message = sub.take()
    assert message is not None and message.body == "from bytes" and message.message_id == "<w1@x>"


def test_in_process_receiver_adds_a_message_id(ctx: mailbus.Context) -> None:
    sub = ctx.subscription("t")
    receiver_of(ctx).push(
        Email(subject="t", body="b", headers={"Source-Timestamp": "1", "Publisher-GID": "g"})
    )
    message = sub.take()
    assert message is not None and message.message_id.startswith("<")


def test_a_failing_handler_or_listener_does_not_stop_delivery(ctx: mailbus.Context) -> None:
    def bad_listener(event: TraceEvent) -> None:
        raise RuntimeError("listener bug")

    ctx.tracer.add_listener(bad_listener)
    sub = ctx.subscription("t")
    ctx.publisher("t").publish("still delivered")
    assert sub.take() is not None
    assert ctx.tracer.listener_errors > 0


def test_duplicate_message_ids_from_a_queued_transport_are_dropped() -> None:
    from mailbus.inprocess import InProcessSender
    from mailbus.transport import Transport

    class QueuedReceiver(InProcessReceiver):
        def set_consumer(self, consumer):  # type: ignore[no-untyped-def]
            return False

    receiver = QueuedReceiver()
    with mailbus.Context(transport=Transport(InProcessSender(receiver), receiver)) as ctx:
        sub = ctx.subscription("t")
        email = Email(
            subject="t",
            body="once",
            headers={"Source-Timestamp": "1", "Publisher-GID": "g"},
            message_id="<dup@x>",
        )
        receiver.push(email)
        receiver.push(email)
        receiver.push(email.with_message_id("<other@x>"))
        got = [mailbus.wait_for_message(sub, 2.0), mailbus.wait_for_message(sub, 0.2)]
        assert [m.message_id for m in got if m] == ["<dup@x>", "<other@x>"]
        assert ctx.counters["duplicates"] == 1
