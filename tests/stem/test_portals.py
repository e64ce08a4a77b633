"""Hubs joined by portals over real in-process Mailbus contexts: two hubs on one
context, and a chain of three hubs over two contexts where messages cross two portals."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from mailbus import Context
from mailbus.stem import (
    ADDRESSING_ERROR,
    DEFAULT,
    UNDELIVERABLE,
    Address,
    Cell,
    Hub,
    StemMessage,
    inbox_topic,
)
from mailbus.stem.portal import H_HOPS
from stem_helpers import Recorder

MakeHub = Callable[..., Hub]
Attach = Callable[[Hub], Recorder]


class Echo(Cell):
    def echo_cmd(self, message: StemMessage) -> Any:
        return {"data": message.data, "from": str(message.from_), "in_portal": message.in_portal}


class Inbox(Cell):
    def __init__(self) -> None:
        self.got: list[StemMessage] = []

    def msg_in(self, message: StemMessage) -> None:
        self.got.append(message)


@pytest.fixture
def pair(hubs: MakeHub, ctx: Context) -> tuple[Hub, Hub]:
    """Hub A (client portal to B, its DEFAULT) and hub B (listening), both running."""
    a, b = hubs("A"), hubs("B")
    b.register_cell(Echo(), "echo")
    b.listen(ctx)
    a.connect(ctx, "B")
    a.start()
    b.start()
    return a, b


def test_command_and_response_across_two_hubs(pair: tuple[Hub, Hub]) -> None:
    a, b = pair
    reply = a.call("B:echo", "echo", {"n": [1, 2]}, timeout=5.0)
    assert reply.type == "response" and reply.from_ == Address("echo", "B")
    assert reply.in_portal == "B"
    assert reply.data["data"] == {"n": [1, 2]}
    assert reply.data["from"] == "A:_calls"  # from_hub set on the way out
    assert reply.data["in_portal"] == "A"
    assert a.portals.names["B"].kind == "client"
    assert b.portals.names["A"].kind == "accepted"  # B learnt A from its first message
    assert DEFAULT not in b.portals.names  # accepted portals never become DEFAULT


def test_default_portal_carries_messages_naming_no_hub(pair: tuple[Hub, Hub]) -> None:
    a, _ = pair
    assert a.portals.default is a.portals.names["B"]
    assert a.call("echo", "echo", 7, timeout=5.0).data["data"] == 7


def test_ack_req_and_reply_to_across_hubs(pair: tuple[Hub, Hub], recorder: Attach) -> None:
    a, _ = pair
    box = Inbox()
    a.register_cell(box, "box")
    events = recorder(a)
    a.send(to="B:echo", from_="nobody", reply_to="box", cmd="echo", data="hi", ack_req=True)
    events.wait_for("stem.delivered", 2)
    assert [m.type for m in box.got] == ["response", "msg_ack"]
    assert box.got[0].data["data"] == "hi" and box.got[0].to == Address("box", "A")
    assert a.counters[ADDRESSING_ERROR] == 0  # nothing went to the "nobody" from address


def test_loop_guard_with_defaults_on_both_sides(
    hubs: MakeHub, ctx: Context, recorder: Attach
) -> None:
    a, b = hubs("A"), hubs("B")
    a.connect(ctx, "B")  # A's DEFAULT is B ...
    b.connect(ctx, "A")  # ... and B's DEFAULT is A: a loop if B forwarded again
    a_events, b_events = recorder(a), recorder(b)
    with a, b:
        a.send(to="ghost", from_="x", type="data")
        (event,) = b_events.wait_for(ADDRESSING_ERROR)
    assert "not forwarded again" in event.detail and event.extra["message"]["in_portal"] == "A"  # type: ignore[index]
    assert a.counters["forwarded"] == 1 and b.counters["forwarded"] == 0
    assert a_events.of("stem.received") == []


def test_unknown_hub_and_refused_sender_are_reported(
    hubs: MakeHub, ctx: Context, recorder: Attach
) -> None:
    a, b, c = hubs("A"), hubs("B"), hubs("C")
    a.connect(ctx, "B")
    b.connect(ctx, "C")  # B only has a client portal: it does not listen
    c.connect(ctx, "B")
    b_events, a_events = recorder(b), recorder(a)
    with a, b, c:
        a.send(to="Z:cell", from_="x", type="data")
        assert "unknown hub 'Z'" in a_events.wait_for(UNDELIVERABLE)[0].detail
        a.send(to="B:cell", from_="x", type="data")  # B does not know A: refused
        (event,) = b_events.wait_for(UNDELIVERABLE)
    assert "refused a message from hub 'A'" in event.detail
    assert event.extra["message"]["to"] == "B:cell"  # type: ignore[index]


def test_garbage_on_the_inbox_is_reported_and_the_hub_goes_on(
    pair: tuple[Hub, Hub], ctx: Context, recorder: Attach
) -> None:
    a, b = pair
    events = recorder(b)
    publisher = ctx.publisher(inbox_topic("B"))
    publisher.publish("not json at all", {"Stem-Hub": "A", "Stem-Hops": "1"})
    publisher.publish("{}", {"Subject-Like": "no stem headers"})
    first, second = events.wait_for(UNDELIVERABLE, 2)
    assert "unreadable portal email" in first.detail and first.body == "not json at all"
    assert "no Stem-Hub header" in second.detail
    assert a.call("B:echo", "echo", "still", timeout=5.0).data["data"] == "still"


def test_data_that_cannot_travel_is_reported(pair: tuple[Hub, Hub], recorder: Attach) -> None:
    a, _ = pair
    events = recorder(a)
    a.send(to="B:echo", from_="x", cmd="echo", data={1, 2})
    (event,) = events.wait_for(UNDELIVERABLE)
    assert "data cannot travel as JSON" in event.detail and "portal to hub 'B'" in event.detail
    assert json.dumps(event.extra)  # the set shows as its repr: a recorder can store it
    assert event.extra["message"]["data"] == "{1, 2}"  # type: ignore[index]


def test_a_route_loop_ends_at_the_hop_limit(hubs: MakeHub, ctx: Context, recorder: Attach) -> None:
    a, b = hubs("A", max_hops=4), hubs("B", max_hops=4)
    a.connect(ctx, "B")
    b.connect(ctx, "A")
    a.add_route("X", via="B")
    b.add_route("X", via="A")  # a misconfigured network
    events = recorder(a)
    with a, b:
        a.send(to="X:cell", from_="c", type="data")
        # hops 0 -> B (1) -> A (2) -> B (3) -> A (4): A stops it.
        (event,) = events.wait_for(UNDELIVERABLE)
    assert "crossed 4 portals" in event.detail
    assert a.counters["forwarded"] + b.counters["forwarded"] == 4


def test_portal_to_itself_and_twice_to_one_hub_are_refused(hubs: MakeHub, ctx: Context) -> None:
    a = hubs("A")
    with pytest.raises(ValueError, match="to itself"):
        a.connect(ctx, "A")
    a.connect(ctx, "B")
    with pytest.raises(ValueError, match="already has a portal"):
        a.connect(ctx, "B")


def test_three_hubs_in_a_chain_cross_two_portals(
    hubs: MakeHub, ctx: Context, ctx2: Context, recorder: Attach
) -> None:
    """A --ctx--> B --ctx2--> C: A reaches C only through B, and C answers through B."""
    a, b, c = hubs("A"), hubs("B"), hubs("C")
    c.register_cell(Echo(), "echo")
    b.listen(ctx)
    b.connect(ctx2, "C")
    c.listen(ctx2)
    a.connect(ctx, "B")
    a.add_route("C", via="B")
    c.add_route("A", via="B")
    hop_counts: list[str] = []
    ctx2.tracer.add_listener(
        lambda e: (
            hop_counts.append(e.headers.get(H_HOPS, "")) if e.kind == "email.received" else None
        )
    )
    c_events = recorder(c)
    with a, b, c:
        reply = a.call("C:echo", "echo", {"far": True}, timeout=5.0)
        # A message naming no hub goes A -> B by DEFAULT, and B has no such cell:
        a.send(to="echo", from_="x", type="data")
        b_error = recorder(b).wait_for(ADDRESSING_ERROR)
    assert reply.data == {"data": {"far": True}, "from": reply.to.__str__(), "in_portal": "B"}
    assert reply.from_ == Address("echo", "C") and reply.in_portal == "B"
    assert b.counters["forwarded"] == 2  # the command on to C, the response back to A
    assert "2" in hop_counts  # the command reached C after its second portal
    assert c_events.of("stem.received")[0].extra["message"]["in_portal"] == "B"  # type: ignore[index]
    assert "not forwarded again" in b_error[0].detail
    assert c.counters[ADDRESSING_ERROR] == 0


@pytest.mark.parametrize("claimed", ["B", "DEFAULT"])
def test_a_sender_claiming_an_impossible_name_is_refused(
    pair: tuple[Hub, Hub], ctx: Context, recorder: Attach, claimed: str
) -> None:
    a, b = pair
    events = recorder(b)
    headers = {
        "Stem-Hub": claimed,
        "Stem-Hops": "1",
        "Stem-To": "B:echo",
        "Stem-From": "X:x",
        "Stem-Type": '"data"',
    }
    ctx.publisher(inbox_topic("B")).publish("null", headers)
    (event,) = events.wait_for(UNDELIVERABLE)
    assert f"refused a message from hub {claimed!r}" in event.detail
    assert a.call("B:echo", "echo", 1, timeout=5.0).data["data"] == 1  # B goes on


def test_portals_added_while_the_hubs_run(hubs: MakeHub, ctx: Context) -> None:
    a, b = hubs("A"), hubs("B")
    b.register_cell(Echo(), "echo")
    with a, b:  # both loops are already waiting when the inboxes appear
        b.listen(ctx)
        a.connect(ctx, "B")
        assert a.call("B:echo", "echo", "late link", timeout=5.0).data["data"] == "late link"


def test_close_leaves_the_context(hubs: MakeHub, ctx: Context) -> None:
    hub = hubs("A")
    hub.listen(ctx)
    assert [s.topic for s in ctx.subscriptions] == ["stem/A"]
    hub.close()
    assert [s.topic for s in ctx.subscriptions] == []
    hub.close()  # twice is fine
