import threading
import time

import mailbus
import pytest
from mailbus import Kind, OverflowPolicy
from mailbus.errors import InvalidNameError
from mailbus.trace import TraceEvent


def test_message_carries_metadata(ctx: mailbus.Context) -> None:
    sub = ctx.subscription("sensors/temp")
    pub = ctx.publisher("sensors/temp")
    before = time.time_ns()
    message_id = pub.publish('{"c": 21}')
    message = mailbus.wait_for_message(sub, 1.0)
    assert message is not None
    assert message.body == '{"c": 21}'
    assert message.topic == "sensors/temp"
    assert message.message_id == message_id
    assert message.info.source_gid == pub.gid
    assert before <= message.info.source_timestamp_ns <= message.info.reception_timestamp_ns
    assert message.email.headers["Publisher-GID"] == pub.gid


def test_only_subscriptions_of_the_topic_receive(ctx: mailbus.Context) -> None:
    a1, a2, b = ctx.subscription("a"), ctx.subscription("a"), ctx.subscription("b")
    ctx.publisher("a").publish("x")
    assert [s.take() is not None for s in (a1, a2)] == [True, True]
    assert b.take() is None


def test_gids_are_unique_per_entity(ctx: mailbus.Context) -> None:
    gids = {ctx.publisher("t").gid for _ in range(100)}
    assert len(gids) == 100 and all(len(g) == 32 for g in gids)


def test_extra_headers_travel_and_are_validated(ctx: mailbus.Context) -> None:
    sub = ctx.subscription("t")
    ctx.publisher("t").publish("b", headers={"Content-Hint": "json"})
    message = sub.take()
    assert message is not None and message.email.headers["Content-Hint"] == "json"
    with pytest.raises(InvalidNameError):
        ctx.publisher("t").publish("b", headers={"X": "a\r\nBcc: v@x.org"})
    with pytest.raises(InvalidNameError):
        ctx.publisher("t").publish("b", headers={"Publisher-GID": "spoof\n"})
    with pytest.raises(InvalidNameError, match="longer"):
        ctx.publisher("t").publish("b", headers={"Note": "x" * 1000})


@pytest.mark.parametrize("name", ["", "  ", "a\r\nBcc: x@y", "tab\there", "nul\x00", "x" * 300])
def test_bad_topic_names_are_refused(ctx: mailbus.Context, name: str) -> None:
    with pytest.raises(InvalidNameError):
        ctx.publisher(name)
    with pytest.raises(InvalidNameError):
        ctx.subscription(name)


def test_drop_oldest_overflow_keeps_newest_and_counts(
    ctx: mailbus.Context, events: list[TraceEvent]
) -> None:
    sub = ctx.subscription("t", depth=3)
    pub = ctx.publisher("t")
    for i in range(5):
        pub.publish(str(i))
    assert [m.body for m in iter(sub.take, None)] == ["2", "3", "4"]
    assert sub.overflowed == 2 and ctx.counters["overflowed"] == 2
    dropped = [e for e in events if e.kind == Kind.OVERFLOWED]
    assert len(dropped) == 2 and all(e.name == "t" for e in dropped)


def test_drop_newest_overflow_keeps_oldest(ctx: mailbus.Context) -> None:
    sub = ctx.subscription("t", depth=2, overflow=OverflowPolicy.DROP_NEWEST)
    pub = ctx.publisher("t")
    for i in range(4):
        pub.publish(str(i))
    assert [m.body for m in iter(sub.take, None)] == ["0", "1"]
    assert sub.overflowed == 2


def test_closed_subscription_receives_nothing(ctx: mailbus.Context) -> None:
    sub = ctx.subscription("t")
    sub.close()
    ctx.publisher("t").publish("x")
    assert sub.take() is None
    assert ctx.subscriptions == []


def test_sixteen_threads_publish_without_loss_and_in_order(ctx: mailbus.Context) -> None:
    threads, per_thread = 16, 500
    sub = ctx.subscription("load", depth=threads * per_thread)
    start = threading.Barrier(threads)

    def publish(n: int) -> None:
        pub = ctx.publisher("load")
        start.wait(5)
        for i in range(per_thread):
            pub.publish(f"{n}:{i}")

    workers = [threading.Thread(target=publish, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    seen: dict[str, list[int]] = {}
    deadline = time.monotonic() + 30
    while sum(map(len, seen.values())) < threads * per_thread and time.monotonic() < deadline:
        message = mailbus.wait_for_message(sub, 1.0)
        if message is not None:
            seen.setdefault(message.info.source_gid, []).append(int(message.body.split(":")[1]))
    for w in workers:
        w.join(10)
    assert len(seen) == threads
    assert all(values == list(range(per_thread)) for values in seen.values())
    assert sub.overflowed == 0


def test_subscriber_on_another_thread_gets_every_message(ctx: mailbus.Context) -> None:
    sub = ctx.subscription("t")
    got: list[str] = []

    def consume() -> None:
        while len(got) < 200:
            message = mailbus.wait_for_message(sub, 5.0)
            if message is None:
                return
            got.append(message.body)

    thread = threading.Thread(target=consume)
    thread.start()
    pub = ctx.publisher("t")
    for i in range(200):
        pub.publish(str(i))
    thread.join(10)
    assert got == [str(i) for i in range(200)]
