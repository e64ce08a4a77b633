"""Participant announcements from a real context (mailbus.announcer): what it says about
itself, the goodbye at shutdown, a failing send, and the options that turn it on."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import mailbus
import pytest
from mailbus.announcer import Announcer
from mailbus.broker import Broker
from mailbus.email_message import Email
from mailbus.errors import ConfigError, TransportError
from mailbus.inprocess import in_process_transport
from mailbus.options import Options, options_from_mapping
from mailbus.presence import TOPIC, Announcement, PresenceState, decode
from mailbus.trace import Kind, TraceEvent
from mailbus.transport import EmailSender, Transport

PERIOD = 0.1


class Sink:
    def receive(self, message: object) -> None:
        pass

    def destroy(self) -> None:
        pass


def next_announcement(sub: mailbus.Subscription, timeout: float = 5.0) -> Announcement:
    message = mailbus.wait_for_message(sub, timeout)
    assert message is not None, "no announcement within the time-out"
    return decode(message.body)


def test_context_announces_its_entities_wait_sets_and_brokers() -> None:
    with mailbus.Context(Options(announce_period_s=PERIOD, name="probe")) as ctx:
        watch = ctx.subscription(TOPIC)
        # Held: entities are weak in the context, and announced while they live.
        publisher = ctx.publisher("robot/pose")
        server = ctx.server("demo/add")
        client = ctx.client("demo/add")
        wait_set = ctx.wait_set("loop")
        wait_set.add_server(server)
        broker = Broker.create(context=ctx)
        broker.add_module("tally", Sink(), capacity=10)
        waiter = threading.Thread(target=lambda: wait_set.wait(10), daemon=True)
        waiter.start()
        try:
            # Announcements taken until one shows the wait set waiting (bounded).
            for _ in range(50):
                seen = next_announcement(watch)
                if seen.wait_sets and seen.wait_sets[0].waiting:
                    break
            else:
                raise AssertionError("never announced the wait set as waiting")
        finally:
            broker.remove_module("tally", timeout=5)
            broker.dec_ref()
        assert seen.gid == ctx.participant_gid
        assert (seen.name, seen.transport, seen.state) == ("probe", "inprocess", "alive")
        kinds = {(e.kind, e.name) for e in seen.entities}
        assert {
            ("publisher", "robot/pose"),
            ("server", "demo/add"),
            ("client", "demo/add"),
            ("subscription", TOPIC),
        } <= kinds
        (loop,) = seen.wait_sets
        assert loop.name == "loop"
        assert loop.timeout_s == 10
        assert [(e.kind, e.name) for e in loop.entities] == [("server", "demo/add")]
        (announced,) = seen.brokers
        assert announced.name == broker.announced_as
        assert [(m.name, m.capacity) for m in announced.modules] == [("tally", 10)]
        assert seen.outbox_depth is None
        del publisher, client
    waiter.join(5)  # the shutdown ends the wait
    assert not waiter.is_alive()


def test_shutdown_says_goodbye_last() -> None:
    bodies: list[str] = []
    ctx = mailbus.Context(Options(announce_period_s=PERIOD))

    def listen(event: TraceEvent) -> None:
        if event.kind == Kind.RECEIVED and event.name == TOPIC and event.body:
            bodies.append(event.body)

    ctx.tracer.add_listener(listen)
    with ctx:
        next_announcement(ctx.subscription(TOPIC))
    states = [decode(b).state for b in bodies]
    assert states[-1] is PresenceState.GOODBYE
    assert PresenceState.GOODBYE not in states[:-1]
    sequences = [decode(b).sequence for b in bodies]
    assert sequences == sorted(sequences)
    assert ctx.announcer is not None and ctx.announcer.failures == 0


def test_off_by_default() -> None:
    with mailbus.Context(Options()) as ctx:
        assert ctx.announcer is None


class RefusingSender(EmailSender):
    """Refuses announcements, passes everything else on."""

    def __init__(self, inner: EmailSender) -> None:
        self.inner = inner

    def deliver(self, email: Email) -> None:
        if email.subject == TOPIC:
            raise TransportError("server said no")
        self.inner.send(email)


def test_a_failing_send_is_traced_and_the_context_goes_on() -> None:
    inner = in_process_transport()
    transport = Transport(RefusingSender(inner.sender), inner.receiver)
    errors: list[TraceEvent] = []
    failed = threading.Event()
    ctx = mailbus.Context(Options(announce_period_s=PERIOD), transport=transport)

    def listen(event: TraceEvent) -> None:
        if event.kind == Kind.ERROR and "announcement" in event.detail:
            errors.append(event)
            failed.set()

    ctx.tracer.add_listener(listen)
    with ctx:
        assert failed.wait(5)
        sub = ctx.subscription("still/works")
        ctx.publisher("still/works").publish("yes")
        message = mailbus.wait_for_message(sub, 5)
        assert message is not None and message.body == "yes"
    assert "participant announcement failed: server said no" in errors[0].detail
    assert ctx.announcer is not None and ctx.announcer.sent == 0


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"announce-period-s": -1}, "announce-period-s"),
        ({"announce-period-s": 0.01}, "announce-period-s"),
        ({"announce-period-s": float("nan")}, "announce-period-s"),
        ({"announce-period-s": "often"}, "announce-period-s"),
        ({"name": "a\nb"}, "name"),
        ({"name": " padded"}, "name"),
    ],
)
def test_bad_options_name_their_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        options_from_mapping(raw)
    assert caught.value.key == key


def test_options_from_file_keys_and_environment() -> None:
    options = options_from_mapping({"name": "arm", "announce-period-s": 30})
    assert (options.name, options.announce_period_s) == ("arm", 30.0)
    env = options_from_mapping({}, {"MAILBUS_ANNOUNCE_PERIOD_S": "2.5", "MAILBUS_NAME": "x"})
    assert (env.name, env.announce_period_s) == ("x", 2.5)
    assert options_from_mapping({}).announce_period_s == 0


def test_an_outbox_announces_its_depth(tmp_path: Path) -> None:
    raw = {"announce-period-s": PERIOD, "outbox": {"dir": str(tmp_path / "outbox")}}
    with mailbus.Context(options_from_mapping(raw)) as ctx:
        seen = next_announcement(ctx.subscription(TOPIC))
        assert seen.outbox_depth is not None and seen.outbox_depth >= 0
        assert seen.transport == "inprocess+outbox"  # as built, not only as configured
        assert ctx.outbox_depth() is not None
    with mailbus.Context(Options()) as plain:
        assert plain.outbox_depth() is None


class Flaky:
    """A context whose first copy of its subscriptions meets a concurrent change."""

    def __init__(self, ctx: mailbus.Context) -> None:
        self._ctx = ctx
        self.raised = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    @property
    def subscriptions(self) -> list[mailbus.Subscription]:
        if not self.raised:
            self.raised += 1
            raise RuntimeError("Set changed size during iteration")
        return self._ctx.subscriptions


def test_a_copy_taken_during_a_change_is_taken_again() -> None:
    sent: list[str] = []
    with mailbus.Context(Options()) as ctx:
        kept = ctx.subscription("a/b")
        source = Flaky(ctx)
        announcer = Announcer(source, lambda body, _: sent.append(body), 1.0, ctx.tracer)  # type: ignore[arg-type]
        assert announcer.announce()
        assert source.raised == 1 and announcer.failures == 0
        assert [e.name for e in decode(sent[0]).entities] == ["a/b"]
        del kept
