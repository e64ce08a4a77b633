"""The broker: links, wildcard, serial delivery, order, removal, failures, ref counts."""

from __future__ import annotations

import logging
import threading

import pytest
from broker_helpers import Recorder, Source, kinds, wait_until
from mailbus.broker import (
    Broker,
    BrokerClosedError,
    BrokerError,
    BrokerMessage,
    DuplicateModuleError,
    LinkError,
    ModuleStartError,
    UnknownModuleError,
)
from mailbus.broker.kinds import BrokerKind
from mailbus.errors import InvalidNameError
from mailbus.trace import TraceEvent


def m(text: str) -> BrokerMessage:
    return BrokerMessage(text.encode())


def test_publish_reaches_linked_sinks_only(broker: Broker) -> None:
    source, linked, other = Source(), Recorder(), Recorder()
    broker.add_module("source", source)
    broker.add_module("linked", linked)
    broker.add_module("other", other)
    broker.add_link("source", "linked")
    assert broker.publish(source, m("one")) == 1
    assert wait_until(lambda: len(linked.messages) == 1)
    assert broker.wait_idle(5)
    assert linked.contents == [b"one"]
    assert other.messages == []
    # Every sink gets the same immutable object: no copy per sink.
    broker.add_link("source", "other")
    message = m("shared")
    assert broker.publish("source", message) == 2
    assert wait_until(lambda: len(other.messages) == 1 and len(linked.messages) == 2)
    assert other.messages[0] is message is linked.messages[1]


def test_links_and_unlinks_take_effect(broker: Broker) -> None:
    source, sink = Source(), Recorder()
    broker.add_module("source", source)
    broker.add_module("sink", sink)
    assert broker.publish(source, m("before")) == 0
    broker.add_link(source, sink)
    broker.publish(source, m("linked"))
    broker.remove_link("source", "sink")
    assert broker.publish(source, m("after")) == 0
    broker.add_link("source", "sink")
    broker.publish(source, m("again"))
    assert wait_until(lambda: len(sink.messages) == 2)
    assert broker.wait_idle(5)
    assert sink.contents == [b"linked", b"again"]
    with pytest.raises(LinkError, match="no link"):
        broker.remove_link("sink", "source")


def test_wildcard_links_every_other_module_including_later_ones(broker: Broker) -> None:
    hub = Recorder()
    a, b = Source(), Source()
    broker.add_module("hub", hub)
    broker.add_module("a", a)
    broker.add_link("*", "hub")
    broker.add_module("b", b)  # added after the wildcard link
    broker.publish(a, m("from a"))
    broker.publish(b, m("from b"))
    assert broker.publish(hub, m("from hub")) == 0  # never to itself
    assert wait_until(lambda: len(hub.messages) == 2)
    assert broker.wait_idle(5)
    assert sorted(hub.contents) == [b"from a", b"from b"]
    assert ("*", "hub") in {(link.source, link.sink) for link in broker.links()}
    broker.remove_link("*", "hub")
    assert broker.publish(a, m("gone")) == 0


def test_link_errors(broker: Broker) -> None:
    broker.add_module("a", Source())
    broker.add_module("b", Recorder())
    broker.add_link("a", "b")
    with pytest.raises(LinkError, match="duplicate link"):
        broker.add_link("a", "b")
    with pytest.raises(LinkError, match="itself"):
        broker.add_link("a", "a")
    with pytest.raises(LinkError, match="duplicate link '\\*'"):
        broker.add_link("*", "b")
    with pytest.raises(LinkError, match="only be a link's source"):
        broker.add_link("a", "*")
    with pytest.raises(UnknownModuleError):
        broker.add_link("a", "nobody")
    broker.remove_link("a", "b")
    broker.add_link("*", "b")
    with pytest.raises(LinkError, match="every module"):
        broker.add_link("a", "b")


def test_module_errors(broker: Broker) -> None:
    module = Recorder()
    broker.add_module("x", module)
    with pytest.raises(DuplicateModuleError, match="named 'x'"):
        broker.add_module("x", Recorder())
    with pytest.raises(DuplicateModuleError, match="already attached as 'x'"):
        broker.add_module("y", module)
    with pytest.raises(DuplicateModuleError, match="reserved"):
        broker.add_module("*", Recorder())
    with pytest.raises(InvalidNameError):
        broker.add_module("bad\nname", Recorder())
    with pytest.raises(TypeError, match="receive"):
        broker.add_module("z", object())
    with pytest.raises(ValueError, match="capacity"):
        broker.add_module("z", Recorder(), capacity=0)
    with pytest.raises(UnknownModuleError):
        broker.publish(Recorder(), m("from a stranger"))
    with pytest.raises(UnknownModuleError):
        broker.publish("nobody", m("x"))
    with pytest.raises(TypeError, match="BrokerMessage"):
        broker.publish(module, b"raw bytes")  # type: ignore[arg-type]
    assert broker.module_names() == ["x"]


def test_serial_delivery_and_order_per_source(broker: Broker) -> None:
    """Eight threads publish as four sources into one sink: the sink is never entered
    twice at once, runs on one thread, and sees each source's messages in order."""
    sink = Recorder()
    broker.add_module("sink", sink, capacity=64)
    sources = [Source() for _ in range(4)]
    for index, source in enumerate(sources):
        broker.add_module(f"s{index}", source)
        broker.add_link(source, sink)
    per_thread = 1500
    barrier = threading.Barrier(8)

    def publish(thread: int) -> None:
        source = sources[thread % 4]
        barrier.wait(10)
        for n in range(per_thread):
            broker.publish(source, BrokerMessage(f"{thread}:{n}".encode(), {"t": str(thread)}))

    threads = [threading.Thread(target=publish, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert wait_until(lambda: len(sink.messages) == 8 * per_thread, 30)
    assert sink.overlaps == 0
    assert len(sink.threads) == 1
    for t in range(8):
        seen = [int(c.split(b":")[1]) for c in sink.contents if c.startswith(f"{t}:".encode())]
        assert seen == list(range(per_thread))
    stats = broker.snapshot().module("sink")
    assert (stats.delivered, stats.dropped, stats.failed) == (8 * per_thread, 0, 0)


def test_every_sink_sees_one_sources_messages_in_the_same_order(broker: Broker) -> None:
    source = Source()
    sinks = [Recorder() for _ in range(3)]
    broker.add_module("source", source)
    for index, sink in enumerate(sinks):
        broker.add_module(f"k{index}", sink)
        broker.add_link("source", f"k{index}")

    def publish(thread: int) -> None:
        for n in range(500):
            broker.publish(source, m(f"{thread}:{n}"))

    threads = [threading.Thread(target=publish, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert wait_until(lambda: all(len(s.messages) == 2000 for s in sinks), 30)
    assert sinks[0].contents == sinks[1].contents == sinks[2].contents


def test_sixteen_publishers_while_modules_come_and_go(broker: Broker) -> None:
    """Publishing from 16 threads while sinks are added and removed: nothing raises,
    no module is entered twice, and every message queued for a sink is delivered to it
    (removal drains), so each sink's delivered count equals what it received."""
    hub = Recorder()
    broker.add_module("hub", hub)
    sources = [Source() for _ in range(16)]
    for index, source in enumerate(sources):
        broker.add_module(f"p{index}", source)
    broker.add_link("*", "hub")
    stop = threading.Event()
    errors: list[BaseException] = []
    published = [0] * 16

    def publish(index: int) -> None:
        try:
            n = 0
            while not stop.is_set() and n < 3000:
                broker.publish(sources[index], m(f"{index}:{n}"))
                n += 1
            published[index] = n
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    churned: list[Recorder] = []
    for round_ in range(30):
        sink = Recorder()
        name = f"churn{round_}"
        broker.add_module(name, sink, capacity=32)
        broker.add_link(f"p{round_ % 16}", name)
        broker.add_link(f"p{(round_ + 5) % 16}", name)
        broker.remove_module(name)  # drains what was queued, then destroys
        churned.append(sink)
    for thread in threads:
        thread.join(60)
    stop.set()
    assert errors == []
    assert wait_until(lambda: len(hub.messages) == sum(published), 30)
    assert hub.overlaps == 0
    for sink in churned:
        assert sink.overlaps == 0
        assert sink.destroyed == 1
    # Per source, the hub saw messages in publish order.
    for index in range(16):
        seen = [int(c.split(b":")[1]) for c in hub.contents if c.startswith(f"{index}:".encode())]
        assert seen == list(range(published[index]))
    assert broker.snapshot().module("hub").dropped == 0


def test_remove_while_busy_drains_then_destroys_on_the_worker(broker: Broker) -> None:
    source, sink = Source(), Recorder()
    sink.gate = threading.Event()
    broker.add_module("source", source)
    broker.add_module("sink", sink)
    broker.add_link(source, sink)
    for n in range(5):
        broker.publish(source, m(str(n)))
    assert sink.entered.wait(10)  # the worker is inside receive, four more queued
    done = threading.Event()
    threading.Thread(target=lambda: (broker.remove_module("sink"), done.set())).start()
    assert wait_until(lambda: "sink" not in broker.module_names())
    assert broker.publish(source, m("after removal")) == 0
    assert not done.is_set()  # removal waits for the receive in flight
    sink.gate.set()
    assert done.wait(10)
    assert sink.contents == [b"0", b"1", b"2", b"3", b"4"]
    assert sink.destroyed == 1
    assert sink.destroy_thread in sink.threads  # destroy ran on the worker, after receive
    assert sink.overlaps == 0


def test_remove_without_drain_counts_and_traces_the_rest(
    broker: Broker, events: list[TraceEvent]
) -> None:
    source, sink = Source(), Recorder()
    sink.gate = threading.Event()
    broker.add_module("source", source)
    broker.add_module("sink", sink)
    broker.add_link(source, sink)
    for n in range(4):
        broker.publish(source, m(str(n)))
    assert sink.entered.wait(10)
    remover = threading.Thread(target=lambda: broker.remove_module("sink", drain=False))
    remover.start()
    assert wait_until(lambda: "sink" not in broker.module_names())
    sink.gate.set()
    remover.join(10)
    assert sink.contents == [b"0"]
    dropped = [e for e in kinds(events, "broker.dropped") if e.name == "sink"]
    assert len(dropped) == 3
    assert all("removed before delivery" in e.detail for e in dropped)
    removed = [e for e in kinds(events, BrokerKind.MODULE_REMOVED) if e.name == "sink"]
    assert removed[-1].extra["dropped"] == 3


def test_remove_times_out_while_receive_is_stuck(broker: Broker) -> None:
    source, sink = Source(), Recorder()
    sink.gate = threading.Event()
    broker.add_module("source", source)
    broker.add_module("sink", sink)
    broker.add_link(source, sink)
    broker.publish(source, m("stuck"))
    assert sink.entered.wait(10)
    with pytest.raises(BrokerError, match=r"did not stop within 0\.05 s"):
        broker.remove_module("sink", timeout=0.05)
    sink.gate.set()
    assert wait_until(lambda: sink.destroyed == 1)


def test_a_module_can_remove_itself_from_receive(broker: Broker) -> None:
    class Quitter(Recorder):
        def receive(self, message: BrokerMessage) -> None:
            super().receive(message)
            broker.remove_module(self)

    source, quitter = Source(), Quitter()
    broker.add_module("source", source)
    broker.add_module("quitter", quitter)
    broker.add_link(source, quitter)
    broker.publish(source, m("bye"))
    assert wait_until(lambda: quitter.destroyed == 1)
    assert "quitter" not in broker.module_names()


def test_failing_receive_is_reported_and_the_worker_goes_on(
    broker: Broker, events: list[TraceEvent], caplog: pytest.LogCaptureFixture
) -> None:
    source, sink = Source(), Recorder()
    sink.fail_on = b"bad"
    broker.add_module("source", source)
    broker.add_module("sink", sink)
    broker.add_link(source, sink)
    with caplog.at_level(logging.ERROR, logger="mailbus.broker.broker"):
        for text in ("a", "bad", "b"):
            broker.publish(source, m(text))
        assert wait_until(lambda: len(sink.messages) == 2)
    assert sink.contents == [b"a", b"b"]
    stats = broker.snapshot().module("sink")
    assert (stats.delivered, stats.failed) == (2, 1)
    failed = kinds(events, BrokerKind.MODULE_FAILED)
    assert len(failed) == 1
    assert failed[0].name == "sink"
    assert failed[0].extra == {"phase": "receive", "source": "source", "error": "RuntimeError"}
    assert "refusing" in failed[0].detail
    assert "receive() raised" in caplog.text


def test_start_runs_on_the_worker_after_links(broker: Broker, events: list[TraceEvent]) -> None:
    class Greeter(Recorder):
        def start(self) -> None:
            super().start()
            broker.publish(self, m("hello"))

    greeter, sink = Greeter(), Recorder()
    broker.add_module("greeter", greeter)
    broker.add_module("sink", sink)
    broker.add_link("greeter", "sink")
    broker.start_module("greeter")
    assert greeter.started == 1
    assert wait_until(lambda: sink.contents == [b"hello"])
    broker.publish("sink", m("x"))  # sink has no links: nothing to do
    broker.add_link("sink", "greeter")
    broker.publish("sink", m("back"))
    assert wait_until(lambda: greeter.contents == [b"back"])
    assert greeter.start_thread in greeter.threads
    assert broker.snapshot().module("greeter").started
    assert [e.name for e in kinds(events, "broker.module_started")] == ["greeter"]
    broker.start_module("sink")  # Recorder has start(); plain modules without are fine too
    broker.add_module("nostart", Source())
    broker.start_module("nostart")
    assert broker.snapshot().module("nostart").started


def test_start_that_raises(broker: Broker, events: list[TraceEvent]) -> None:
    class Broken(Recorder):
        def start(self) -> None:
            raise OSError("no device")

    broker.add_module("broken", Broken())
    with pytest.raises(ModuleStartError, match="no device"):
        broker.start_module("broken")
    assert kinds(events, BrokerKind.MODULE_FAILED)[0].extra["phase"] == "start"


def test_destroy_that_raises_is_reported(broker: Broker, events: list[TraceEvent]) -> None:
    class Leaky(Recorder):
        def destroy(self) -> None:
            raise RuntimeError("leak")

    broker.add_module("leaky", Leaky())
    broker.remove_module("leaky")
    assert [e.extra["phase"] for e in kinds(events, BrokerKind.MODULE_FAILED)] == ["destroy"]


def test_reference_counting_and_destroy_with_modules_attached(
    tracer: object, caplog: pytest.LogCaptureFixture
) -> None:
    broker = Broker.create()
    sink = Recorder()
    broker.add_module("sink", sink)
    broker.inc_ref()
    assert broker.refcount == 2
    broker.dec_ref()
    assert not broker.destroyed and sink.destroyed == 0
    with caplog.at_level(logging.WARNING, logger="mailbus.broker.broker"):
        broker.dec_ref()
    assert broker.destroyed
    assert sink.destroyed == 1
    assert "modules still attached: sink" in caplog.text
    with pytest.raises(BrokerClosedError):
        broker.add_module("late", Recorder())
    with pytest.raises(BrokerClosedError):
        broker.inc_ref()
    with pytest.raises(BrokerClosedError):
        broker.publish("sink", m("x"))
    broker.dec_ref()  # a further release is harmless


def test_context_manager_releases_the_reference() -> None:
    with Broker.create() as broker:
        broker.add_module("s", Recorder())
        broker.remove_module("s")
    assert broker.destroyed


def test_trace_events_of_a_delivery(broker: Broker, events: list[TraceEvent]) -> None:
    source, sink = Source(), Recorder()
    broker.add_module("source", source)
    broker.add_module("sink", sink)
    broker.add_link(source, sink)
    broker.publish(source, BrokerMessage(b"12345"))
    assert wait_until(lambda: len(kinds(events, BrokerKind.DELIVERED)) == 1)
    published = kinds(events, BrokerKind.PUBLISHED)[0]
    assert (published.name, published.size, published.extra["sinks"]) == ("source", 5, ["sink"])
    delivered = kinds(events, BrokerKind.DELIVERED)[0]
    assert (delivered.name, delivered.extra["source"]) == ("sink", "source")
    added = [e.name for e in kinds(events, "broker.module_added")]
    assert added == ["source", "sink"]
    assert kinds(events, "broker.link_added")[0].extra == {
        "source": "source",
        "sink": "sink",
        "backpressure": "",
    }


def test_snapshot_is_plain_data(broker: Broker) -> None:
    import dataclasses

    source, sink = Source(), Recorder()
    broker.add_module("source", source)
    broker.add_module("sink", sink, capacity=7)
    broker.add_link("*", "sink")
    broker.publish(source, m("x"))
    assert wait_until(lambda: broker.snapshot().module("sink").delivered == 1)
    snapshot = broker.snapshot()
    assert dataclasses.is_dataclass(snapshot)
    assert snapshot.refcount == 1 and not snapshot.destroyed
    stats = snapshot.module("sink")
    assert (stats.kind, stats.capacity, stats.state, stats.queue_depth) == (
        "Recorder",
        7,
        "running",
        0,
    )
    assert snapshot.module("source").published == 1
    assert [(x.source, x.sink) for x in snapshot.links] == [("*", "sink")]
    with pytest.raises(KeyError):
        snapshot.module("nobody")


def test_a_pipeline_forwarding_from_receive_keeps_order(broker: Broker) -> None:
    class Upper(Recorder):
        def receive(self, message: BrokerMessage) -> None:
            super().receive(message)
            broker.publish(self, BrokerMessage(message.content.upper(), message.properties))

    source, upper, sink = Source(), Upper(), Recorder()
    broker.add_module("source", source)
    broker.add_module("upper", upper, capacity=8)
    broker.add_module("sink", sink, capacity=8)
    broker.add_link("source", "upper")
    broker.add_link("upper", "sink")
    words = [f"word{n}" for n in range(300)]
    for word in words:
        broker.publish(source, BrokerMessage(word, {"n": word}))
    assert wait_until(lambda: len(sink.messages) == 300)
    assert sink.contents == [w.upper().encode() for w in words]
    assert [msg.properties["n"] for msg in sink.messages] == words


def test_a_failing_trace_listener_does_not_break_delivery(broker: Broker) -> None:
    assert broker.tracer is not None

    def explode(event: TraceEvent) -> None:
        raise RuntimeError("listener bug")

    broker.tracer.add_listener(explode)
    source, sink = Source(), Recorder()
    broker.add_module("source", source)
    broker.add_module("sink", sink)
    broker.add_link(source, sink)
    broker.publish(source, m("still delivered"))
    assert wait_until(lambda: sink.contents == [b"still delivered"])
    assert broker.tracer.listener_errors > 0


def test_removing_a_source_stops_its_publishing(broker: Broker) -> None:
    source, sink = Source(), Recorder()
    broker.add_module("source", source)
    broker.add_module("sink", sink)
    broker.add_link(source, sink)
    broker.remove_module(source)
    with pytest.raises(UnknownModuleError):
        broker.publish(source, m("late"))
    assert broker.links() == []
    with pytest.raises(UnknownModuleError):
        broker.remove_module("source")
    assert broker.final_stats("source") is not None
    assert broker.final_stats("never") is None


def test_trace_messages_off_keeps_only_life_cycle_drops_and_failures() -> None:
    from mailbus.trace import Tracer

    tracer = Tracer()
    seen: list[TraceEvent] = []
    tracer.add_listener(seen.append)
    with Broker.create(tracer=tracer, trace_messages=False) as quiet:
        source, sink = Source(), Recorder()
        sink.fail_on = b"bad"
        quiet.add_module("source", source)
        quiet.add_module("sink", sink)
        quiet.add_link(source, sink)
        quiet.publish(source, m("ok"))
        quiet.publish(source, m("bad"))
        assert wait_until(lambda: quiet.snapshot().module("sink").failed == 1)
        quiet.remove_module("sink")
        quiet.remove_module("source")
    got = {e.kind for e in seen}
    assert BrokerKind.PUBLISHED not in got and BrokerKind.DELIVERED not in got
    assert {
        "broker.module_added",
        "broker.link_added",
        BrokerKind.MODULE_FAILED,
        BrokerKind.MODULE_REMOVED,
    } <= got


def test_links_toggling_under_publishers_never_duplicate_or_reorder(broker: Broker) -> None:
    sink = Recorder()
    broker.add_module("sink", sink)
    sources = [Source() for _ in range(8)]
    for index, source in enumerate(sources):
        broker.add_module(f"p{index}", source)
    errors: list[BaseException] = []
    done = threading.Event()

    def publish(index: int) -> None:
        try:
            for n in range(2000):
                broker.publish(sources[index], m(f"{index}:{n}"))
        except BaseException as exc:
            errors.append(exc)

    def toggle() -> None:
        try:
            while not done.is_set():
                for index in range(8):
                    broker.add_link(f"p{index}", "sink")
                for index in range(8):
                    broker.remove_link(f"p{index}", "sink")
                broker.add_link("*", "sink")
                broker.remove_link("*", "sink")
        except BaseException as exc:
            errors.append(exc)

    toggler = threading.Thread(target=toggle)
    toggler.start()
    threads = [threading.Thread(target=publish, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    done.set()
    toggler.join(10)
    assert errors == []
    broker.add_link("*", "sink")  # the toggler stopped with no link: one left for the end
    for index in range(8):
        broker.publish(sources[index], m(f"{index}:2000"))
    assert wait_until(lambda: sum(c.endswith(b":2000") for c in sink.contents) == 8)
    for index in range(8):
        seen = [int(c.split(b":")[1]) for c in sink.contents if c.startswith(f"{index}:".encode())]
        assert seen == sorted(set(seen))  # in order, no duplicates
        assert seen[-1] == 2000
    assert sink.overlaps == 0
