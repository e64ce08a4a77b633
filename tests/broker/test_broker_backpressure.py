"""Bounded queues: the default blocks and loses nothing; drops are counted and traced."""

from __future__ import annotations

import threading

import pytest
from broker_helpers import Recorder, Source, kinds, wait_until
from mailbus.broker import (
    Backpressure,
    Broker,
    BrokerError,
    BrokerMessage,
    ModuleStartError,
    Overflow,
    PublishTimeoutError,
)
from mailbus.broker.kinds import BrokerKind
from mailbus.trace import TraceEvent


def m(text: str) -> BrokerMessage:
    return BrokerMessage(text.encode())


def gated(broker: Broker, capacity: int, **kwargs: object) -> tuple[Source, Recorder]:
    """A source linked to a sink whose receive waits for `sink.gate`."""
    source, sink = Source(), Recorder()
    sink.gate = threading.Event()
    broker.add_module("source", source)
    broker.add_module("sink", sink, capacity=capacity, **kwargs)  # type: ignore[arg-type]
    broker.add_link(source, sink)
    return source, sink


def test_overload_with_the_default_policy_loses_nothing(broker: Broker) -> None:
    source, sink = gated(broker, capacity=4)
    errors: list[BaseException] = []
    broker.publish(source, m("0"))
    assert sink.entered.wait(10)  # so the queue below fills to exactly its capacity

    def flood() -> None:
        try:
            for n in range(1, 200):
                broker.publish(source, m(str(n)))
        except BaseException as exc:
            errors.append(exc)

    publisher = threading.Thread(target=flood)
    publisher.start()
    # The sink holds one message in receive and four queued; the publisher waits.
    assert wait_until(lambda: broker.snapshot().module("sink").blocked_publishers == 1)
    stats = broker.snapshot().module("sink")
    assert stats.queue_depth == 4
    assert stats.backpressure == "block 10s"
    assert sink.gate is not None
    sink.gate.set()
    publisher.join(30)
    assert errors == []
    assert wait_until(lambda: len(sink.messages) == 200)
    assert sink.contents == [str(n).encode() for n in range(200)]
    stats = broker.snapshot().module("sink")
    assert (stats.delivered, stats.dropped, stats.refused) == (200, 0, 0)


def test_blocking_timeout_names_the_sink_and_counts_it(
    broker: Broker, events: list[TraceEvent]
) -> None:
    source, sink = gated(broker, capacity=1, backpressure=Backpressure(timeout=0.05))
    roomy = Recorder()
    broker.add_module("roomy", roomy)
    broker.add_link(source, roomy)
    broker.publish(source, m("in receive"))
    assert sink.entered.wait(10)
    broker.publish(source, m("queued"))
    with pytest.raises(PublishTimeoutError) as caught:
        broker.publish(source, m("no room"))
    assert caught.value.sinks == ("sink",)
    assert "no room in the queue of sink" in str(caught.value)
    # The other sink got it all the same.
    assert wait_until(lambda: roomy.contents == [b"in receive", b"queued", b"no room"])
    assert broker.snapshot().module("sink").refused == 1
    refused = kinds(events, BrokerKind.REFUSED)
    assert [(e.name, e.extra["source"]) for e in refused] == [("sink", "source")]
    assert sink.gate is not None
    sink.gate.set()
    assert wait_until(lambda: sink.contents == [b"in receive", b"queued"])


@pytest.mark.parametrize(
    ("overflow", "kept", "reason"),
    [
        (Overflow.DROP_NEWEST, [b"0", b"1", b"2"], "dropped the newest"),
        (Overflow.DROP_OLDEST, [b"0", b"3", b"4"], "dropped the oldest"),
    ],
)
def test_drop_policies_count_and_trace_every_drop(
    broker: Broker, events: list[TraceEvent], overflow: Overflow, kept: list[bytes], reason: str
) -> None:
    source, sink = gated(broker, capacity=2, backpressure=Backpressure(overflow))
    broker.publish(source, m("0"))
    assert sink.entered.wait(10)
    for n in range(1, 5):
        broker.publish(source, m(str(n)))
    stats = broker.snapshot().module("sink")
    assert (stats.queue_depth, stats.dropped) == (2, 2)
    assert sink.gate is not None
    sink.gate.set()
    assert wait_until(lambda: len(sink.messages) == 3)
    assert broker.wait_idle(5)
    assert sink.contents == kept
    dropped = kinds(events, BrokerKind.DROPPED)
    assert len(dropped) == 2
    assert all(reason in e.detail and e.name == "sink" for e in dropped)


def test_a_link_policy_overrides_the_sinks(broker: Broker) -> None:
    sink = Recorder()
    sink.gate = threading.Event()
    lossy, strict = Source(), Source()
    broker.add_module("sink", sink, capacity=1, backpressure=Backpressure(timeout=0))
    broker.add_module("lossy", lossy)
    broker.add_module("strict", strict)
    broker.add_link("lossy", "sink", backpressure=Backpressure(Overflow.DROP_NEWEST))
    broker.add_link("strict", "sink")
    broker.publish(strict, m("first"))
    assert sink.entered.wait(10)
    broker.publish(strict, m("second"))  # fills the queue
    broker.publish(lossy, m("dropped"))  # the link drops instead of blocking
    with pytest.raises(PublishTimeoutError):
        broker.publish(strict, m("refused"))  # the sink's own policy, timeout 0
    stats = broker.snapshot().module("sink")
    assert (stats.dropped, stats.refused) == (1, 1)
    links = {(x.source, x.sink): x.backpressure for x in broker.links()}
    assert links == {("lossy", "sink"): "drop_newest", ("strict", "sink"): ""}
    sink.gate.set()
    assert wait_until(lambda: sink.contents == [b"first", b"second"])


def test_a_publisher_blocked_on_a_removed_sink_is_delivered_not_lost(broker: Broker) -> None:
    source, sink = gated(broker, capacity=1, backpressure=Backpressure(timeout=None))
    broker.publish(source, m("in receive"))
    assert sink.entered.wait(10)
    broker.publish(source, m("queued"))
    blocked = threading.Thread(target=lambda: broker.publish(source, m("was blocked")))
    blocked.start()
    assert wait_until(lambda: broker.snapshot().module("sink").blocked_publishers == 1)
    remover = threading.Thread(target=lambda: broker.remove_module("sink"))
    remover.start()
    blocked.join(10)
    assert not blocked.is_alive()
    assert sink.gate is not None
    sink.gate.set()
    remover.join(10)
    assert sink.contents == [b"in receive", b"queued", b"was blocked"]
    assert sink.destroyed == 1


def test_backpressure_validation() -> None:
    with pytest.raises(ValueError):
        Backpressure(timeout=-1)
    with pytest.raises(ValueError):
        Backpressure("sometimes")  # type: ignore[arg-type]
    assert Backpressure("drop_oldest").overflow is Overflow.DROP_OLDEST  # type: ignore[arg-type]
    assert Backpressure(timeout=None).describe() == "block"


def test_removing_a_module_from_receive_while_a_publisher_waits_on_us(broker: Broker) -> None:
    """The remover is the worker of a full queue a publisher is blocked on (holding its
    source's lock). The removal must not wait for that publisher's timeout."""

    class Remover(Recorder):
        def receive(self, message: BrokerMessage) -> None:
            super().receive(message)
            if message.content == b"remove other":
                broker.remove_module("other")

    source, remover, other = Source(), Remover(), Recorder()
    remover.gate = threading.Event()
    broker.add_module("source", source)
    broker.add_module("remover", remover, capacity=3, backpressure=Backpressure(timeout=20))
    broker.add_module("other", other)
    broker.add_link(source, remover)
    broker.publish(source, m("hold"))
    assert remover.entered.wait(10)
    for text in ("remove other", "a", "b"):  # fills the queue
        broker.publish(source, m(text))
    blocked = threading.Thread(target=lambda: broker.publish(source, m("blocked")))
    blocked.start()
    assert wait_until(lambda: broker.snapshot().module("remover").blocked_publishers == 1)
    remover.gate.set()
    # Without the overfill the removal inside receive would wait the publisher's 20 s.
    assert wait_until(lambda: other.destroyed == 1, timeout=15)
    blocked.join(10)
    assert wait_until(lambda: len(remover.messages) == 5)
    assert remover.contents == [b"hold", b"remove other", b"a", b"b", b"blocked"]
    assert broker.snapshot().module("remover").refused == 0


@pytest.mark.parametrize("overflow", list(Overflow))
def test_exact_accounting_under_contention(broker: Broker, overflow: Overflow) -> None:
    """Four threads flood a small queue while the worker drains it: every message is
    delivered or counted as dropped, none vanishes (drop_oldest evicts concurrently with
    the worker's own pops)."""
    sink = Recorder()
    broker.add_module("sink", sink, capacity=5, backpressure=Backpressure(overflow, timeout=None))
    sources = [Source() for _ in range(4)]
    for index, source in enumerate(sources):
        broker.add_module(f"p{index}", source)
        broker.add_link(source, sink)
    per_thread = 3000

    def flood(source: Source) -> None:
        for n in range(per_thread):
            broker.publish(source, m(str(n)))

    threads = [threading.Thread(target=flood, args=(s,)) for s in sources]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert broker.wait_idle(20)
    stats = broker.snapshot().module("sink")
    assert stats.delivered == len(sink.messages)
    assert stats.delivered + stats.dropped == 4 * per_thread
    if overflow is Overflow.BLOCK:
        assert stats.dropped == 0


class Exiter(Recorder):
    """A module whose receive waits for its gate, then raises SystemExit (a
    BaseException, not an Exception) on b"exit"."""

    def receive(self, message: BrokerMessage) -> None:
        if message.content == b"exit":
            self.entered.set()
            assert self.gate is not None and self.gate.wait(30)
            raise SystemExit("module quit")
        super().receive(message)


def test_a_worker_killed_by_a_base_exception_is_failed_and_never_overfilled(
    broker: Broker, events: list[TraceEvent]
) -> None:
    source, sink = Source(), Exiter()
    sink.gate = threading.Event()
    broker.add_module("source", source)
    broker.add_module("sink", sink, capacity=10)  # the default: block
    broker.add_link(source, sink)
    broker.publish(source, m("exit"))
    assert sink.entered.wait(10)
    for i in range(5):
        broker.publish(source, m(f"queued {i}"))
    sink.gate.set()
    assert wait_until(lambda: broker.snapshot().module("sink").state == "failed")
    assert wait_until(lambda: sink.destroyed == 1)  # destroy ran as the worker ended
    for i in range(50):  # never blocks, never queues beyond capacity: each is counted
        assert broker.publish(source, m(f"late {i}")) == 1
    stats = broker.snapshot().module("sink")
    assert stats.queue_depth == 0 and stats.delivered == 0
    assert (stats.failed, stats.dropped, stats.refused) == (1, 55, 0)
    assert len(kinds(events, BrokerKind.DROPPED)) == 55
    failed = kinds(events, BrokerKind.MODULE_FAILED)
    assert [(e.name, e.extra["phase"], e.extra["error"]) for e in failed] == [
        ("sink", "receive", "SystemExit"),
        ("sink", "worker", "SystemExit"),
    ]
    assert "module quit" in failed[1].detail
    assert broker.wait_idle(10)  # a dead worker does not count as busy
    with pytest.raises(ModuleStartError, match="failed"):
        broker.start_module(sink)
    with pytest.raises(BrokerError, match="failed"):
        broker.publish(sink, m("from the dead"))
    broker.remove_module(sink)
    final = broker.final_stats("sink")
    assert final is not None and final.state == "failed" and final.dropped == 55
    assert [e.name for e in kinds(events, BrokerKind.MODULE_REMOVED)] == ["sink"]
    assert broker.publish(source, m("no links left")) == 0


def test_a_publisher_blocked_on_a_sink_whose_worker_dies_is_released_and_counted(
    broker: Broker, events: list[TraceEvent]
) -> None:
    source, sink = Source(), Exiter()
    sink.gate = threading.Event()
    broker.add_module("source", source)
    broker.add_module("sink", sink, capacity=1, backpressure=Backpressure(timeout=None))
    broker.add_link(source, sink)
    broker.publish(source, m("exit"))
    assert sink.entered.wait(10)
    broker.publish(source, m("queued"))
    blocked = threading.Thread(target=lambda: broker.publish(source, m("was blocked")))
    blocked.start()
    assert wait_until(lambda: broker.snapshot().module("sink").blocked_publishers == 1)
    sink.gate.set()
    blocked.join(10)
    assert not blocked.is_alive()  # released by the death, not left waiting forever
    assert wait_until(lambda: sink.destroyed == 1)  # the worker's last drain is done
    stats = broker.snapshot().module("sink")
    assert (stats.state, stats.queue_depth, stats.failed, stats.dropped) == ("failed", 0, 1, 2)
    assert sink.contents == []


def test_a_base_exception_in_start_fails_the_module(
    broker: Broker, events: list[TraceEvent]
) -> None:
    class Quitter(Recorder):
        def start(self) -> None:
            raise SystemExit("no start")

    broker.add_module("quitter", Quitter(), capacity=2)
    with pytest.raises(ModuleStartError, match="no start"):
        broker.start_module("quitter")
    assert wait_until(lambda: len(kinds(events, BrokerKind.MODULE_FAILED)) == 2)
    assert [e.extra["phase"] for e in kinds(events, BrokerKind.MODULE_FAILED)] == [
        "start",
        "worker",
    ]
    assert broker.snapshot().module("quitter").state == "failed"


@pytest.mark.parametrize("timeout", [1e300, float("inf")])
def test_a_huge_block_timeout_waits_instead_of_overflowing(broker: Broker, timeout: float) -> None:
    assert Backpressure(timeout=float("inf")).timeout is None  # for ever: one spelling
    source, sink = gated(broker, capacity=1, backpressure=Backpressure(timeout=timeout))
    broker.publish(source, m("in receive"))
    assert sink.entered.wait(10)
    broker.publish(source, m("queued"))
    errors: list[BaseException] = []

    def publish() -> None:
        try:
            broker.publish(source, m("was blocked"))
        except BaseException as exc:  # OverflowError from the wait, before the fix
            errors.append(exc)

    blocked = threading.Thread(target=publish)
    blocked.start()
    assert wait_until(
        lambda: broker.snapshot().module("sink").blocked_publishers == 1 or bool(errors)
    )
    assert sink.gate is not None
    sink.gate.set()
    blocked.join(10)
    assert not blocked.is_alive() and errors == []
    assert wait_until(lambda: sink.contents == [b"in receive", b"queued", b"was blocked"])


def test_a_start_asked_for_while_the_worker_dies_is_answered_not_left_waiting(
    broker: Broker,
) -> None:
    """start_module() queues the call for the module's worker; if the worker dies
    first, the caller gets the failure at once instead of waiting out its timeout."""

    class StartableExiter(Exiter):
        def start(self) -> None:
            raise AssertionError("start() must not run on a dead worker")

    source, sink = Source(), StartableExiter()
    sink.gate = threading.Event()
    broker.add_module("source", source)
    broker.add_module("sink", sink, capacity=1)
    broker.add_link(source, sink)
    broker.publish(source, m("exit"))
    assert sink.entered.wait(10)  # the worker is busy in receive
    outcome: list[BaseException] = []

    def start() -> None:
        try:
            broker.start_module(sink, timeout=60)
        except BaseException as exc:
            outcome.append(exc)

    starter = threading.Thread(target=start)
    starter.start()
    assert wait_until(lambda: broker._record(sink).control)  # queued for the worker
    sink.gate.set()  # the worker dies: SystemExit in receive
    starter.join(10)
    assert not starter.is_alive()
    (error,) = outcome
    assert isinstance(error, ModuleStartError) and "worker ended" in str(error)
