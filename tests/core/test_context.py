import threading

import mailbus
import pytest
from mailbus import ConfigError, ContextError, Options


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
    from mailbus import context

    monkeypatch.setitem(context.TRANSPORT_FACTORIES, "email", "mailbus.nowhere:create")
    with pytest.raises(ConfigError, match="not available"):
        mailbus.Context(Options(transport="email")).init()


def test_introspection_lists_entities(ctx: mailbus.Context) -> None:
    sub, server, client = ctx.subscription("a"), ctx.server("s"), ctx.client("s")
    assert ctx.subscriptions == [sub] and ctx.servers == [server] and ctx.clients == [client]
