"""OutboxSender over a real SMTP peer (smtp-sink), and under a Context."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import mailbus
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus.email_message import Email, to_bytes
from mailbus.errors import ConfigError, InvalidNameError, TransportError
from mailbus.inprocess import in_process_transport
from mailbus.options import options_from_mapping
from mailbus.outbox import OutboxSender, RetryPolicy, wrap_transport
from mailbus.outbox.listing import list_outbox
from mailbus.outbox.sender import QueueingReceiver, email_for_delivery
from mailbus.outbox.storage import Entry, Metadata, Schedule, State
from mailbus.trace import TraceEvent, Tracer
from mailbus.transport import EmailReceiver, Inbound
from outbox_support import (
    SMTP_SINK,
    TRAILER,
    RecordingSender,
    SmtplibSender,
    SmtpSink,
    free_port,
    make_email,
)
from waiting import eventually

FAST = RetryPolicy(first_delay_s=0.01, max_delay_s=0.05, max_attempts=1000)


class Events:
    def __init__(self, tracer: Tracer) -> None:
        self.events: list[TraceEvent] = []
        self.lock = threading.Lock()
        tracer.add_listener(self.add)

    def add(self, event: TraceEvent) -> None:
        with self.lock:
            self.events.append(event)

    def kinds(self, message_id: str | None = None) -> list[str]:
        with self.lock:
            return [e.kind for e in self.events if message_id is None or e.message_id == message_id]


def test_mail_goes_through_the_outbox_to_the_smtp_server(outbox_dir: Path, sink: SmtpSink) -> None:
    tracer = Tracer()
    events = Events(tracer)
    sender = OutboxSender(SmtplibSender(sink.port), outbox_dir, tracer=tracer)
    try:
        ids = [f"<smtp{i}@outbox.test>" for i in range(20)]
        for i, message_id in enumerate(ids):
            sender.send(make_email(i, message_id=message_id))
        sender.send(
            Email(
                subject="outbox/bcc",
                body=f"hidden\n{TRAILER}",
                sender="sender@example.org",
                to=("shown@example.org",),
                bcc=("hidden@example.org",),
                message_id="<bcc@outbox.test>",
            )
        )
        assert sender.wait_idle(10.0)
    finally:
        sender.close()
    eventually(lambda: len(sink.message_ids()) == 21, 5.0)
    assert sink.message_ids() == {m: 1 for m in [*ids, "<bcc@outbox.test>"]}
    (bcc_dump,) = [d for d in sink.dumps() if b"<bcc@outbox.test>" in d]
    # The Bcc recipient got the mail (envelope) but is not in the headers.
    assert b"X-Rcpt-Args: <hidden@example.org>" in bcc_dump
    assert b"hidden@example.org" not in bcc_dump.split(b"Message-ID:")[1]
    assert events.kinds(ids[0]) == [
        "outbox.enqueued",
        "outbox.send_started",
        "outbox.sent",
        "outbox.cleaned",
    ]
    assert events.kinds()[0] == "outbox.recovered"
    assert list_outbox(outbox_dir) == []
    assert sorted(p.name for p in (outbox_dir / "data").iterdir()) == []


def test_mail_waits_while_the_server_is_down_and_goes_when_it_is_back(
    outbox_dir: Path, tmp_path: Path
) -> None:
    port = free_port()  # nothing listens there yet: connections are refused
    tracer = Tracer()
    events = Events(tracer)
    sender = OutboxSender(SmtplibSender(port), outbox_dir, policy=FAST, tracer=tracer)
    try:
        sender.send(make_email(1, message_id="<late@outbox.test>"))
        eventually(lambda: events.kinds().count("outbox.rescheduled") >= 3, 10.0)

        def waiting_with_error() -> bool:
            items = list_outbox(outbox_dir)
            return (
                len(items) == 1
                and items[0].state == "queued"
                and items[0].attempts >= 3
                and "SMTP send failed" in items[0].last_error
            )

        eventually(waiting_with_error, 10.0)
        # The server comes up on that port: the next retry delivers.
        server = start_sink_on(SmtpSink(tmp_path), port)
        try:
            eventually(lambda: "<late@outbox.test>" in server.message_ids(), 10.0)
            assert sender.wait_idle(10.0)
        finally:
            server.stop()
    finally:
        sender.close()
    assert events.kinds("<late@outbox.test>")[-2:] == ["outbox.sent", "outbox.cleaned"]
    assert list_outbox(outbox_dir) == []


@pytest.mark.slow
def test_an_smtp_outage_costs_one_back_off_not_one_attempt_per_message(
    outbox_dir: Path, tmp_path: Path
) -> None:
    """200 messages queued while the real SMTP server is down: the outbox probes with one
    message per back-off instead of trying each one, and all 200 go,
    once each, when the server is back."""
    port = free_port()  # nothing listens there yet: connections are refused
    tracer = Tracer()
    events = Events(tracer)
    policy = RetryPolicy(first_delay_s=0.05, max_delay_s=0.2, max_attempts=1000)
    sender = OutboxSender(SmtplibSender(port), outbox_dir, policy=policy, tracer=tracer)
    ids = [f"<outage{i}@outbox.test>" for i in range(200)]
    try:
        for i, message_id in enumerate(ids):
            sender.send(make_email(i, message_id=message_id))
        # Several back-offs pass with the server down.
        eventually(lambda: events.kinds().count("outbox.rescheduled") >= 4, 10.0)
        server = start_sink_on(SmtpSink(tmp_path), port)
        try:
            eventually(lambda: set(ids) <= set(server.message_ids()), 30.0)
            assert sender.wait_idle(10.0)
            assert all(n == 1 for n in server.message_ids().values())
        finally:
            server.stop()
    finally:
        sender.close()
    failed = events.kinds().count("outbox.rescheduled")
    # One failed probe per back-off of the outage, not one per message (before: ~200+).
    assert 4 <= failed < 40, failed
    assert list_outbox(outbox_dir) == []


def start_sink_on(server: SmtpSink, port: int) -> SmtpSink:
    server.proc = subprocess.Popen(
        [SMTP_SINK, "-u", "root", "-d", f"{server.dump}/%M.", f"127.0.0.1:{port}", "100"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    server.port = port
    try:
        eventually(server._accepting, 10.0, "smtp-sink to accept connections")
        taken = server.proc.poll() is not None
    except AssertionError:
        taken = True
    if taken:
        server.stop()
        pytest.skip(f"port {port} was taken meanwhile")
    return server


def test_a_permanent_rejection_goes_to_dead_letters_and_stays_for_inspection(
    outbox_dir: Path, tmp_path: Path
) -> None:
    rejecting = SmtpSink(tmp_path, "-f", "DATA").start()  # 5xx on DATA
    tracer = Tracer()
    events = Events(tracer)
    sender = OutboxSender(SmtplibSender(rejecting.port), outbox_dir, policy=FAST, tracer=tracer)
    try:
        sender.send(make_email(1, message_id="<rejected@outbox.test>"))
        eventually(lambda: "outbox.dead_lettered" in events.kinds(), 10.0)
    finally:
        sender.close()
        rejecting.stop()
    (item,) = list_outbox(outbox_dir)
    assert item.state == "dead"
    assert item.attempts == 1
    assert "SMTP 5" in item.last_error
    assert item.message_id == "<rejected@outbox.test>"
    # Dead letters survive a restart untouched and are not retried by themselves.
    recorder = RecordingSender()
    again = OutboxSender(recorder, outbox_dir, policy=FAST)
    try:
        assert again.recovery.dead == 1
        assert again.wait_idle(2.0)
    finally:
        again.close()
    assert recorder.sent == []
    assert [i.state for i in list_outbox(outbox_dir)] == ["dead"]


def test_gives_up_after_max_attempts(outbox_dir: Path) -> None:
    recorder = RecordingSender()
    recorder.fail_with = TransportError("always down (test)")
    policy = RetryPolicy(first_delay_s=0.001, max_delay_s=0.002, max_attempts=4)
    tracer = Tracer()
    events = Events(tracer)
    sender = OutboxSender(recorder, outbox_dir, policy=policy, tracer=tracer)
    try:
        sender.send(make_email(1, message_id="<giveup@outbox.test>"))
        eventually(lambda: "outbox.dead_lettered" in events.kinds(), 10.0)
    finally:
        sender.close()
    assert events.kinds().count("outbox.rescheduled") == 3
    (item,) = list_outbox(outbox_dir)
    assert (item.state, item.attempts) == ("dead", 4)
    assert "always down" in item.last_error


def test_invalid_email_is_refused_at_send_and_nothing_is_stored(outbox_dir: Path) -> None:
    sender = OutboxSender(RecordingSender(), outbox_dir)
    try:
        with pytest.raises(InvalidNameError):
            sender.send(Email(subject="bad\r\nBcc: x@y.z", body="b", to=("a@b.c",)))
    finally:
        sender.close()
    assert list((outbox_dir / "data").iterdir()) == []


def test_a_header_receivers_would_drop_is_refused_at_send_and_nothing_is_stored(
    outbox_dir: Path,
) -> None:
    """It used to be stored, tried once and dead-lettered."""
    sender = OutboxSender(RecordingSender(), outbox_dir)
    try:
        with pytest.raises(InvalidNameError, match="encoded for the wire"):
            sender.send(Email(subject="t", body="b", to=("a@b.c",), headers={"N": "é" * 3000}))
    finally:
        sender.close()
    assert list((outbox_dir / "data").iterdir()) == []


def test_send_after_close_is_an_error_and_unsent_mail_waits_for_the_next_start(
    outbox_dir: Path,
) -> None:
    recorder = RecordingSender()
    recorder.fail_with = TransportError("down (test)")
    tracer = Tracer()
    events = Events(tracer)
    sender = OutboxSender(recorder, outbox_dir, policy=RetryPolicy(first_delay_s=60), tracer=tracer)
    sender.send(make_email(1, message_id="<later@outbox.test>"))
    eventually(lambda: "outbox.rescheduled" in events.kinds(), 5.0)
    sender.close()
    with pytest.raises(TransportError, match="closed"):
        sender.send(make_email(2))
    second = RecordingSender()
    again = OutboxSender(second, outbox_dir)
    try:
        assert again.recovery.queued == 1
        assert again.retry_now() == 1
        assert again.wait_idle(5.0)
    finally:
        again.close()
    assert [e.message_id for e in second.sent] == ["<later@outbox.test>"]


def test_context_with_an_outbox_table_publishes_through_the_outbox(outbox_dir: Path) -> None:
    options = options_from_mapping({"outbox": {"dir": str(outbox_dir), "max-attempts": 3}})
    with mailbus.Context(options, transport=in_process_transport()) as ctx:
        assert ctx.transport.name.endswith("+outbox")
        kinds: list[str] = []
        ctx.tracer.add_listener(lambda e: kinds.append(e.kind))
        subscription = ctx.subscription("sensors/t")
        ctx.publisher("sensors/t").publish("21.5")
        message = mailbus.wait_for_message(subscription, timeout=5.0)
        assert message is not None and message.body == "21.5"
        assert "outbox.enqueued" in kinds
        eventually(lambda: "outbox.cleaned" in kinds, 5.0)
    assert list_outbox(outbox_dir) == []


class QueueingSender(RecordingSender):
    """Like a sender with its own in-memory queue: `send` only queues; `send_sync` is
    the delivery the outbox must use, or a crash could lose a mail marked done."""

    def __init__(self) -> None:
        super().__init__()
        self.queued: list[Email] = []

    def deliver(self, email: Email) -> None:
        self.queued.append(email)

    def send_sync(self, email: Email) -> None:
        super().deliver(email)


def test_the_outbox_uses_the_inner_senders_synchronous_send(outbox_dir: Path) -> None:
    inner = QueueingSender()
    sender = OutboxSender(inner, outbox_dir)
    try:
        sender.send(make_email(1, message_id="<sync@x>"))
        assert sender.wait_idle(5.0)
    finally:
        sender.close()
    assert [e.message_id for e in inner.sent] == ["<sync@x>"]
    assert inner.queued == []


_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    subject=_text.filter(lambda s: s and s.strip() == s),
    body=st.text(max_size=200),
    gid=_text.filter(lambda s: s and s.strip() == s),
)
def test_the_email_handed_to_the_inner_sender_rebuilds_the_stored_bytes(
    subject: str, body: str, gid: str
) -> None:
    """An inner sender that serialises again (to_bytes) sends what was stored, Bcc
    recipients included in the envelope."""
    email = Email(
        subject=subject,
        body=body,
        sender="a@b.org",
        to=("c@d.org",),
        cc=("e@f.org",),
        bcc=("x@y.org",),
        headers={"Source-Timestamp": "123", "Publisher-GID": gid},
        message_id="<rt@b.org>",
    )
    date = "Sun, 22 Nov 2026 08:00:00 GMT"
    try:
        data = to_bytes(email, date=date)
    except InvalidNameError:
        return  # not a valid email: send() refuses it before storing anything
    meta = Metadata("<rt@b.org>", "a@b.org", email.recipients, subject, len(data), 1)
    rebuilt = email_for_delivery(Entry("i", "m", "d", State.INFLIGHT, meta, Schedule()), data)
    assert to_bytes(rebuilt, date=date) == data
    assert rebuilt.raw == data
    assert rebuilt.recipients == email.recipients


def test_outbox_options_are_checked(outbox_dir: Path) -> None:
    def wrap(section: dict[str, object]) -> None:
        options = options_from_mapping({"outbox": section})
        wrap_transport(in_process_transport(), options, Tracer()).close()

    with pytest.raises(ConfigError, match=r"outbox\.max-atempts': unknown key"):
        wrap({"dir": str(outbox_dir), "max-atempts": 3})
    with pytest.raises(ConfigError, match=r"outbox\.dir"):
        wrap({"max-attempts": 3})
    with pytest.raises(ConfigError, match=r"outbox\.lock-timeout-s"):
        wrap({"dir": str(outbox_dir), "lock-timeout-s": "soon"})
    wrap({"dir": str(outbox_dir), "first-delay-s": 1, "lock-timeout-s": 1})


def test_the_outbox_receiver_forwards_every_hook_but_direct_dispatch() -> None:
    """Under an outbox the receiver is wrapped; a hook it does not forward is lost (the
    routed email mode never learnt what its context receives). Every public method of
    EmailReceiver reaches the inner receiver, except set_consumer, declined on purpose."""
    calls: list[tuple[str, tuple[object, ...]]] = []

    class Inner(EmailReceiver):
        idle_wait_s = 7.0

        def receive(self, timeout: float | None) -> list[Inbound]:
            calls.append(("receive", (timeout,)))
            return []

        def wake(self) -> None:
            calls.append(("wake", ()))

        def follow(
            self, topics: frozenset[str], services: frozenset[str], clients: frozenset[str]
        ) -> None:
            calls.append(("follow", (topics, services, clients)))

        def close(self) -> None:
            calls.append(("close", ()))

        def set_consumer(self, consumer: object) -> bool:  # type: ignore[override]
            calls.append(("set_consumer", ()))
            return True

    wrapper = QueueingReceiver(Inner())
    assert wrapper.idle_wait_s == 7.0
    wrapper.receive(0.5)
    wrapper.wake()
    wrapper.follow(frozenset({"t"}), frozenset({"s"}), frozenset({"c"}))
    assert wrapper.set_consumer(lambda inbound: None) is False
    wrapper.close()
    assert calls == [
        ("receive", (0.5,)),
        ("wake", ()),
        ("follow", (frozenset({"t"}), frozenset({"s"}), frozenset({"c"}))),
        ("close", ()),
    ]
    public = {name for name in vars(EmailReceiver) if not name.startswith("_")}
    assert public - {"set_consumer", "idle_wait_s"} == {"receive", "wake", "follow", "close"}
