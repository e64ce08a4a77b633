import gc
import threading
import time

import mailbus
import pytest
from mailbus import Kind
from mailbus.errors import WaitSetError
from mailbus.trace import TraceEvent


def test_zero_timeout_only_looks(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    sub = wait_set.add_subscription(ctx.subscription("t"))
    result = wait_set.wait(0)
    assert not result and result.timed_out
    ctx.publisher("t").publish("x")
    assert wait_set.wait(0).subscriptions == (sub,)


def test_positive_timeout_bounds_the_wait(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    wait_set.add_subscription(ctx.subscription("t"))
    started = time.monotonic()
    result = wait_set.wait(0.05)
    assert time.monotonic() - started >= 0.045  # it did wait (a lower bound: load-proof)
    assert not result and result.timed_out
    assert wait_set.stats.timeouts == 1 and wait_set.stats.waits == 1
    assert not wait_set.stats.waiting


def test_empty_wait_set_waits_like_a_sleep(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    started = time.monotonic()
    assert not wait_set.wait(0.03)
    assert time.monotonic() - started >= 0.027
    assert wait_set.stats.timeouts == 1


def test_infinite_and_nan_timeouts(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    guard = wait_set.add_guard_condition(ctx.guard_condition())
    guard.trigger()
    assert wait_set.wait(float("inf")).guard_conditions == (guard,)
    with pytest.raises(ValueError, match="NaN"):
        wait_set.wait(float("nan"))


def test_negative_timeout_blocks_until_a_guard_is_triggered(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    guard = wait_set.add_guard_condition(ctx.guard_condition("stop"))
    result_box: list[mailbus.WaitResult] = []
    waiter = threading.Thread(target=lambda: result_box.append(wait_set.wait(-1)), daemon=True)
    waiter.start()
    deadline = time.monotonic() + 5
    while not wait_set.stats.waiting and time.monotonic() < deadline:
        waiter.join(0.001)
    assert wait_set.stats.waiting and waiter.is_alive()  # blocked, nothing ready
    threading.Thread(target=guard.trigger).start()
    waiter.join(5)
    assert not waiter.is_alive()
    assert result_box[0].guard_conditions == (guard,)
    assert not guard.is_ready()  # a wait that returns it resets the trigger


def test_message_from_another_thread_wakes_a_blocked_wait(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    sub = wait_set.add_subscription(ctx.subscription("t"))
    publisher = ctx.publisher("t")
    threading.Timer(0.02, publisher.publish, args=("x",)).start()
    result = wait_set.wait(5.0)
    assert result.subscriptions == (sub,)


def test_wait_reports_every_ready_kind(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    sub = wait_set.add_subscription(ctx.subscription("t"))
    server = wait_set.add_server(ctx.server("s"))
    client = wait_set.add_client(ctx.client("s"))
    guard = wait_set.add_guard_condition(ctx.guard_condition())
    ctx.publisher("t").publish("x")
    client.send_request("r")
    guard.trigger()
    result = wait_set.wait(1.0)
    assert result.subscriptions == (sub,) and result.servers == (server,)
    assert result.guard_conditions == (guard,) and result.clients == ()
    request = server.take_request()
    assert request is not None
    server.send_response(request, "a")
    assert wait_set.wait(1.0).clients == (client,)


def test_guard_condition_in_two_wait_sets_is_an_error(ctx: mailbus.Context) -> None:
    guard = ctx.guard_condition("g")
    first, second = ctx.wait_set(), ctx.wait_set()
    first.add_guard_condition(guard)
    with pytest.raises(WaitSetError, match="another wait set"):
        second.add_guard_condition(guard)
    first.clear()
    second.add_guard_condition(guard)  # free again once cleared


def test_wait_set_is_reusable_and_clearable(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    a = wait_set.add_subscription(ctx.subscription("a"))
    pub_a, pub_b = ctx.publisher("a"), ctx.publisher("b")
    for _ in range(3):
        pub_a.publish("x")
        assert wait_set.wait(1.0).subscriptions == (a,)
        assert a.take() is not None
    wait_set.clear()
    assert wait_set.entities == ()
    b = wait_set.add_subscription(ctx.subscription("b"))
    pub_a.publish("ignored")
    pub_b.publish("y")
    assert wait_set.wait(1.0).subscriptions == (b,)


def test_wait_events_are_traced(ctx: mailbus.Context, events: list[TraceEvent]) -> None:
    wait_set = ctx.wait_set("main")
    wait_set.wait(0)
    kinds = [e.kind for e in events if e.name == "main"]
    assert kinds == [Kind.WAIT_STARTED, Kind.WAIT_TIMED_OUT]


def test_context_lists_its_wait_sets(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set("listed")
    assert wait_set in ctx.wait_sets
    wait_set.close()
    assert wait_set not in ctx.wait_sets


def test_single_entity_helpers_time_out_with_none(ctx: mailbus.Context) -> None:
    assert mailbus.wait_for_message(ctx.subscription("t"), 0.01) is None
    assert mailbus.wait_for_request(ctx.server("s"), 0.01) is None
    assert mailbus.wait_for_response(ctx.client("s"), 0.01) is None


def test_a_trigger_during_the_return_of_a_wait_is_kept(ctx: mailbus.Context) -> None:
    wait_set = ctx.wait_set()
    guard = wait_set.add_guard_condition(ctx.guard_condition())
    guard.trigger()
    assert wait_set.wait(0).guard_conditions == (guard,)
    guard.trigger()  # a new trigger after the wait took the first one
    assert wait_set.wait(0).guard_conditions == (guard,)
    assert not wait_set.wait(0)


def test_many_threads_waiting_on_one_subscription_all_stay_attached(
    ctx: mailbus.Context,
) -> None:
    sub = ctx.subscription("t", depth=10_000)
    publisher = ctx.publisher("t")
    taken: list[str] = []
    lock = threading.Lock()

    def consume() -> None:
        while True:
            message = mailbus.wait_for_message(sub, 5.0)
            if message is None or message.body == "stop":
                return
            with lock:
                taken.append(message.body)

    consumers = [threading.Thread(target=consume, daemon=True) for _ in range(8)]
    for c in consumers:
        c.start()
    for i in range(2000):
        publisher.publish(str(i))
    for _ in consumers:
        publisher.publish("stop")
    for c in consumers:
        c.join(10)
    assert not any(c.is_alive() for c in consumers)
    assert sorted(taken, key=int) == [str(i) for i in range(2000)]
    assert sub._wait_conditions == ()  # every helper wait detached again


def test_shutdown_releases_blocked_waits_and_calls() -> None:
    ctx = mailbus.Context(mailbus.Options()).init()
    sub = ctx.subscription("t")
    client = ctx.client("nobody")
    ctx.server("nobody")  # takes the request, never answers
    outcomes: list[object] = []

    def wait_forever() -> None:
        outcomes.append(mailbus.wait_for_message(sub, -1))

    def call_forever() -> None:
        try:
            client.call("x", timeout=-1)
        except mailbus.ContextError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=f, daemon=True) for f in (wait_forever, call_forever)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while (client.pending == 0 or not sub._wait_conditions) and time.monotonic() < deadline:
        threads[0].join(0.001)
    ctx.shutdown()
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert None in outcomes
    assert any(isinstance(o, mailbus.ContextError) for o in outcomes)


def test_a_guard_of_a_dropped_wait_set_can_join_another(ctx: mailbus.Context) -> None:
    guard = ctx.guard_condition("g")
    first = ctx.wait_set()
    first.add_guard_condition(guard)
    with pytest.raises(WaitSetError):
        ctx.wait_set().add_guard_condition(guard)
    del first  # dropped without clear()
    gc.collect()
    second = ctx.wait_set()
    second.add_guard_condition(guard)
    guard.trigger()
    assert second.wait(0).guard_conditions == (guard,)
