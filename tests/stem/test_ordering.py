"""Delivery order, checked against a model: the hub's queue is first in, first out, and
a message dispatched inside a callback waits until that callback has returned."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mailbus import Context
from mailbus.stem import Cell, Hub, StemMessage

CELLS = ("a", "b", "c")
# A message's data: its label and the messages its receiver sends on (a tree).
TREE = st.recursive(
    st.tuples(st.sampled_from(CELLS), st.just([])),
    lambda inner: st.tuples(st.sampled_from(CELLS), st.lists(inner, max_size=3)),
    max_leaves=15,
)


class Forwarder(Cell):
    def __init__(self, journal: list[tuple[str, str]]) -> None:
        self.journal = journal
        self.depth = 0

    def step_in(self, message: StemMessage) -> None:
        self.depth += 1
        assert self.depth == 1, "a delivery started inside another one"
        label, children = message.data
        for i, (to, grandchildren) in enumerate(children):
            self.send(to, type="step", data=(f"{label}.{i}", grandchildren))
        self.journal.append((self.name, label))
        self.depth -= 1


def model(roots: list[tuple[str, list[Any]]]) -> list[tuple[str, str]]:
    queue = deque((to, str(i), children) for i, (to, children) in enumerate(roots))
    order = []
    while queue:
        to, label, children = queue.popleft()
        order.append((to, label))
        queue.extend((c, f"{label}.{i}", gc) for i, (c, gc) in enumerate(children))
    return order


@settings(max_examples=60, deadline=None)
@given(st.lists(TREE, min_size=1, max_size=4))
def test_delivery_order_is_breadth_first_like_the_model(roots: list[Any]) -> None:
    journal: list[tuple[str, str]] = []
    hub = Hub("home")
    for name in CELLS:
        hub.register_cell(Forwarder(journal), name)
    for i, (to, children) in enumerate(roots):
        hub.send(to=to, from_="x", type="step", data=(str(i), children))
    hub.process_queue()
    assert journal == model(roots)


class Ping(Cell):
    """Keeps a local conversation going for ever."""

    def ball_in(self, message: StemMessage) -> None:
        self.send("pong" if self.name == "ping" else "ping", type="ball")


def test_endless_local_traffic_does_not_starve_the_inbox(
    ctx: Context, hubs: Callable[..., Hub]
) -> None:
    home, other = hubs("home"), hubs("other")
    arrived = threading.Event()

    class Door(Cell):
        def knock_in(self, message: StemMessage) -> None:
            arrived.set()

    home.register_cell(Ping(), "ping")
    home.register_cell(Ping(), "pong")
    home.register_cell(Door(), "door")
    home.listen(ctx)
    other.connect(ctx, "home")
    with home:
        home.send(to="ping", from_="x", type="ball")
        other.send(to="home:door", from_="x", type="knock")
        other.process_queue()
        assert arrived.wait(5.0)
        thread = home._thread
        home.stop(timeout=5.0)  # ends although the local traffic never does
        assert thread is not None and not thread.is_alive() and not home.running
    assert home.counters["delivered"] > 1


def test_a_hub_can_share_its_contexts_tracer(ctx: Context, hubs: Callable[..., Hub]) -> None:
    seen: list[str] = []
    ctx.tracer.add_listener(lambda event: seen.append(event.kind))
    hub = hubs("home", tracer=ctx.tracer)
    hub.send(to="nobody", from_="x", type="data")
    hub.process_queue()
    assert "stem.addressing_error" in seen


def test_a_hub_without_a_tracer_reports_through_its_context(
    ctx: Context, hubs: Callable[..., Hub]
) -> None:
    """So that a workbench (or a recorder) on the context sees the hub's errors."""
    seen: list[str] = []
    ctx.tracer.add_listener(lambda event: seen.append(event.kind))
    hub = hubs("home")
    hub.listen(ctx)
    hub.send(to="nobody", from_="x", type="data")
    hub.process_queue()
    assert "stem.addressing_error" in seen
