import sys
import threading
import types

import mailbus
import pytest
from mailbus import ConfigError, ContextError, Options
from mailbus.inprocess import InProcessReceiver


class InProcessReceiverForTest(InProcessReceiver):
    """An in-process receiver that makes the engine use its polling thread."""

    def set_consumer(self, consumer):  # type: ignore[no-untyped-def]
        return False


def polling_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "mailbus-polling"]


def test_second_init_is_an_error() -> None:
    ctx = mailbus.Context().init()
    with pytest.raises(ContextError, match="already"):
        ctx.init()
    ctx.shutdown()


def test_shutdown_is_idempotent_and_stops_use() -> None:
    ctx = mailbus.Context().init()
    publisher = ctx.publisher("t")
    ctx.shutdown()
    ctx.shutdown()
    assert ctx.state == "shut down"
    with pytest.raises(ContextError):
        publisher.publish("x")


def test_entities_need_an_initialised_context() -> None:
    ctx = mailbus.Context()
    with pytest.raises(ContextError, match="init"):
        ctx.publisher("t").publish("x")


def test_queued_receiver_thread_exits_on_shutdown() -> None:
    from mailbus.inprocess import InProcessReceiver, InProcessSender
    from mailbus.transport import Transport

    class QueuedReceiver(InProcessReceiver):
        def set_consumer(self, consumer):  # type: ignore[no-untyped-def]
            return False  # force the polling thread

    receiver = QueuedReceiver()
    ctx = mailbus.Context(transport=Transport(InProcessSender(receiver), receiver)).init()
    assert len(polling_threads()) == 1
    sub = ctx.subscription("t")
    ctx.publisher("t").publish("via thread")
    message = mailbus.wait_for_message(sub, 2.0)
    assert message is not None and message.body == "via thread"
    ctx.shutdown()
    assert polling_threads() == []


def test_default_context() -> None:
    with pytest.raises(ContextError):
        mailbus.default_context()
    ctx = mailbus.init()
    try:
        assert mailbus.default_context() is ctx
        with pytest.raises(ContextError, match="already"):
            mailbus.init()
    finally:
        mailbus.shutdown()
    with pytest.raises(ContextError):
        mailbus.default_context()


def test_unavailable_transport_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from mailbus import registry

    monkeypatch.setitem(registry.TRANSPORTS, "email", registry.TransportEntry("mailbus.nowhere:c"))
    with pytest.raises(ConfigError, match="not available"):
        mailbus.Context(Options(transport="email")).init()


def test_introspection_lists_entities(ctx: mailbus.Context) -> None:
    sub, server, client = ctx.subscription("a"), ctx.server("s"), ctx.client("s")
    assert ctx.subscriptions == [sub] and ctx.servers == [server] and ctx.clients == [client]


def test_context_without_options_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAILBUS_FROM", "me@example.com")
    assert mailbus.Context().address == "me@example.com"
    monkeypatch.setenv("MAILBUS_TRANSPORT", "pigeon")
    with pytest.raises(ConfigError, match="transport"):
        mailbus.Context()


def test_a_failed_init_closes_the_transport_it_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    from mailbus import registry
    from mailbus.inprocess import InProcessReceiver, InProcessSender
    from mailbus.transport import Transport

    closed: list[str] = []

    class Receiver(InProcessReceiver):
        def close(self) -> None:
            closed.append("receiver")
            super().close()

    def factory(options: Options, tracer: object) -> Transport:
        receiver = Receiver()
        return Transport(InProcessSender(receiver), receiver)

    monkeypatch.setitem(
        registry.TRANSPORTS, "email", registry.TransportEntry("tests_factory:create")
    )
    monkeypatch.setitem(sys.modules, "tests_factory", types.SimpleNamespace(create=factory))
    options = Options(transport="email", sections={"outbox": {"no-such-key": 1}})
    ctx = mailbus.Context(options)
    with pytest.raises(ConfigError):
        ctx.init()
    assert closed == ["receiver"]
    assert ctx.state == "new"


def test_receive_failures_back_off_exponentially() -> None:
    from mailbus.inprocess import InProcessSender
    from mailbus.trace import TraceEvent
    from mailbus.transport import Inbound, Transport

    class Failing(InProcessReceiverForTest):
        def receive(self, timeout: float | None) -> list[Inbound]:
            raise mailbus.TransportError("server down")

    receiver = Failing()
    ctx = mailbus.Context(
        mailbus.Options(), transport=Transport(InProcessSender(receiver), receiver)
    )
    delays: list[float] = []
    done = threading.Event()

    def listen(event: TraceEvent) -> None:
        if event.kind == "error":
            delays.append(float(event.extra["retry_in_s"]))  # type: ignore[arg-type]
            if len(delays) >= 4:
                done.set()

    ctx.tracer.add_listener(listen)
    ctx.init()
    try:
        assert done.wait(10)
    finally:
        ctx.shutdown()
    assert delays[:4] == [0.1, 0.2, 0.4, 0.8]
    assert ctx.counters["receive_errors"] >= 4


def test_the_same_message_id_from_another_sender_is_not_a_duplicate() -> None:
    from mailbus.email_message import Email
    from mailbus.inprocess import InProcessSender
    from mailbus.transport import Transport

    receiver = InProcessReceiverForTest()
    with mailbus.Context(
        mailbus.Options(), transport=Transport(InProcessSender(receiver), receiver)
    ) as ctx:
        sub = ctx.subscription("alarm")
        meta = {"Source-Timestamp": "1", "Publisher-GID": "g"}
        spoof = Email("alarm", "fake", sender="mallory@x.org", headers=meta, message_id="<n@x>")
        real = Email("alarm", "real", sender="alice@x.org", headers=meta, message_id="<n@x>")
        receiver.push(spoof)
        receiver.push(real)
        bodies = [m.body for m in (mailbus.wait_for_message(sub, 2.0) for _ in range(2)) if m]
        assert bodies == ["fake", "real"]


def test_life_cycle_states_are_one_enum() -> None:
    ctx = mailbus.Context()
    assert ctx.state is mailbus.ContextState.NEW and not ctx.is_initialized
    ctx.init()
    assert ctx.state is mailbus.ContextState.INITIALISED and ctx.is_initialized
    ctx.shutdown()
    assert ctx.state is mailbus.ContextState.SHUT_DOWN
    assert ctx.state == "shut down"  # the values still read as words in messages
    with pytest.raises(ContextError, match="shut down; call init"):
        ctx.check_open()
