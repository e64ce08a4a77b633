"""Every dispatch rule of the design and every error path, inside one hub (and, for
the rules that hand a message to a portal, two hubs on one in-process context)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from mailbus import Context
from mailbus.stem import (
    ADDRESSING_ERROR,
    CELL_ERROR,
    NO_METHOD,
    UNDELIVERABLE,
    Address,
    CallTimeoutError,
    Cell,
    Hub,
    MessageError,
    StemMessage,
)
from mailbus.stem.hub import CALLS_CELL
from stem_helpers import Recorder

MakeHub = Callable[..., Hub]
Attach = Callable[[Hub], Recorder]


class Log(Cell):
    """Records every delivery as (cell name, method, message)."""

    def __init__(self, journal: list[tuple[str, str, StemMessage]]) -> None:
        self.journal = journal

    def _note(self, method: str, message: StemMessage) -> None:
        self.journal.append((self.name, method, message))

    def msg_in(self, message: StemMessage) -> None:
        self._note("msg_in", message)

    def data_in(self, message: StemMessage) -> None:
        self._note("data_in", message)

    def echo_cmd(self, message: StemMessage) -> Any:
        self._note("echo_cmd", message)
        return message.data

    def quiet_cmd(self, message: StemMessage) -> None:
        self._note("quiet_cmd", message)

    def fail_cmd(self, message: StemMessage) -> Any:
        raise RuntimeError("boom")

    def _secret_cmd(self, message: StemMessage) -> str:
        raise AssertionError("a private method must never be reached by a message")


class Bare:
    """A cell without msg_in."""

    def __init__(self) -> None:
        self.got: list[StemMessage] = []

    def ping_cmd(self, message: StemMessage) -> str:
        self.got.append(message)
        return "pong"


@pytest.fixture
def journal() -> list[tuple[str, str, StemMessage]]:
    return []


@pytest.fixture
def hub(hubs: MakeHub, journal: list[tuple[str, str, StemMessage]]) -> Hub:
    h = hubs("home")
    h.register_cell(Log(journal), "a")
    h.register_cell(Log(journal), "b")
    return h


def calls(journal: list[tuple[str, str, StemMessage]]) -> list[tuple[str, str]]:
    return [(cell, method) for cell, method, _ in journal]


# -- phase 3: which method -----------------------------------------------------------------
def test_cmd_goes_to_cmd_method_and_the_value_comes_back_as_response(
    hub: Hub, journal: list[tuple[str, str, StemMessage]]
) -> None:
    cmd = hub.send(to="b", from_="a", cmd="echo", data={"n": 1})
    assert journal == []  # queued, not delivered yet
    hub.process_queue()
    assert calls(journal) == [("b", "echo_cmd"), ("a", "msg_in")]
    response = journal[1][2]
    assert response.type == "response" and response.data == {"n": 1}
    assert response.reply_id == cmd.msg_id and response.to == Address("a")
    assert response.from_ == Address("b")


def test_type_goes_to_type_in_else_msg_in(hub: Hub, journal: list[Any]) -> None:
    hub.send(to="b", from_="a", type="data", data=1)
    hub.send(to="b", from_="a", type="status", status="up")
    hub.send(to="b", from_="a", type="weird kind!")  # not a method name: msg_in
    hub.send(to="b", from_="a", cmd="unknown")  # no unknown_cmd: msg_in, and no response
    hub.process_queue()
    assert calls(journal) == [("b", "data_in"), ("b", "msg_in"), ("b", "msg_in"), ("b", "msg_in")]


def test_private_methods_are_never_reached(hub: Hub, journal: list[Any]) -> None:
    hub.send(to="b", from_="a", cmd="_secret")
    hub.process_queue()
    assert calls(journal) == [("b", "msg_in")]


def test_none_from_a_cmd_method_sends_no_response(hub: Hub, journal: list[Any]) -> None:
    hub.send(to="b", from_="a", cmd="quiet")
    assert hub.process_queue() == 1
    assert calls(journal) == [("b", "quiet_cmd")]


def test_reply_type_sets_the_type_of_the_automatic_response(hub: Hub, journal: list[Any]) -> None:
    hub.send(to="b", from_="a", cmd="echo", data="x", reply_type="data")
    hub.process_queue()
    assert calls(journal) == [("b", "echo_cmd"), ("a", "data_in")]


def test_reply_to_overrides_from(hubs: MakeHub, journal: list[Any]) -> None:
    hub = hubs("home")
    for name in ("a", "b", "c"):
        hub.register_cell(Log(journal), name)
    hub.send(to="b", from_="a", reply_to="c", cmd="echo", data=5)
    hub.process_queue()
    assert calls(journal) == [("b", "echo_cmd"), ("c", "msg_in")]
    assert journal[1][2].data == 5


def test_ack_req_sends_msg_ack_after_delivery(hub: Hub, journal: list[Any]) -> None:
    data = hub.send(to="b", from_="a", type="data", ack_req=True)
    hub.process_queue()
    assert calls(journal) == [("b", "data_in"), ("a", "msg_in")]
    ack = journal[1][2]
    assert ack.type == "msg_ack" and ack.reply_id == data.msg_id
    journal.clear()
    hub.send(to="b", from_="a", cmd="echo", data=1, ack_req=True)
    hub.process_queue()
    assert [(c, m, msg.type) for c, m, msg in journal] == [
        ("b", "echo_cmd", "cmd"),
        ("a", "msg_in", "response"),
        ("a", "msg_in", "msg_ack"),
    ]


def test_no_method_is_reported_with_the_dump(hubs: MakeHub, recorder: Attach) -> None:
    hub = hubs("home")
    bare = Bare()
    hub.register_cell(bare, "bare")
    events = recorder(hub)
    hub.send(to="bare", from_="x", type="data", data={"v": 1})
    hub.process_queue()
    (event,) = events.of(NO_METHOD)
    assert "neither data_in() nor msg_in()" in event.detail
    assert json.loads(event.body or "")["data"] == {"v": 1}
    assert event.extra["message"]["to"] == "bare"  # type: ignore[index]
    assert hub.counters[NO_METHOD] == 1


def test_a_raising_method_is_reported_answered_with_error_and_the_hub_goes_on(
    hub: Hub, journal: list[Any], recorder: Attach
) -> None:
    events = recorder(hub)
    hub.send(to="b", from_="a", cmd="fail", ack_req=True)
    hub.send(to="b", from_="a", type="data")
    hub.process_queue()
    (event,) = events.of(CELL_ERROR)
    assert "boom" in event.detail and json.loads(event.body or "")["cmd"] == "fail"
    assert [(c, m, msg.type) for c, m, msg in journal] == [
        ("b", "data_in", "data"),
        ("a", "msg_in", "error"),
    ]
    assert journal[1][2].data == "RuntimeError: boom"


# -- phase 2: which cell ---------------------------------------------------------------------
def test_target_lookup_then_name_alone(hubs: MakeHub) -> None:
    plain: list[Any] = []
    special: list[Any] = []
    hub = hubs("home")
    hub.register_cell(Log(plain), "log")
    hub.register_cell(Log(special), "log", "special")
    hub.send(to=":log:special", from_="x", type="data")
    hub.send(to=":log:other", from_="x", type="data")
    hub.send(to="log", from_="x", type="data")
    hub.process_queue()
    assert [msg.to_target for *_, msg in special] == ["special"]
    assert [msg.to_target for *_, msg in plain] == ["other", ""]


def test_own_hub_name_is_local(hub: Hub, journal: list[Any]) -> None:
    hub.send(to="home:b", from_="a", type="data")
    hub.process_queue()
    assert calls(journal) == [("b", "data_in")]


def test_named_hub_without_the_cell_is_an_addressing_error(
    hub: Hub, journal: list[Any], recorder: Attach
) -> None:
    events = recorder(hub)
    hub.send(to="home:ghost", from_="a", type="data")
    hub.process_queue()
    (event,) = events.of(ADDRESSING_ERROR)
    assert "no cell 'ghost' in hub 'home'" in event.detail
    assert json.loads(event.body or "")["to"] == "home:ghost"
    assert journal == []


def test_no_hub_no_cell_no_default_is_an_addressing_error(hub: Hub, recorder: Attach) -> None:
    events = recorder(hub)
    hub.send(to="ghost", from_="a", type="data")
    hub.process_queue()
    (event,) = events.of(ADDRESSING_ERROR)
    assert "no DEFAULT portal" in event.detail


def test_message_from_a_portal_naming_no_local_cell_is_not_forwarded_again(
    hubs: MakeHub, ctx: Context, recorder: Attach
) -> None:
    hub = hubs("home")
    hub.connect(ctx, "elsewhere")  # a DEFAULT portal exists, yet it must not be used
    events = recorder(hub)
    hub.dispatch(StemMessage(to="ghost", from_="far:x", type="data", in_portal="far"))
    hub.process_queue()
    (event,) = events.of(ADDRESSING_ERROR)
    assert "not forwarded again" in event.detail
    assert hub.counters["forwarded"] == 0


# -- phase 1: which hub ----------------------------------------------------------------------
def test_unknown_hub_is_reported_not_dropped(hub: Hub, recorder: Attach) -> None:
    events = recorder(hub)
    hub.send(to="mars:rover", from_="a", cmd="move")
    hub.process_queue()
    (event,) = events.of(UNDELIVERABLE)
    assert "unknown hub 'mars'" in event.detail
    assert json.loads(event.body or "")["to"] == "mars:rover"
    assert hub.counters[UNDELIVERABLE] == 1


def test_named_hub_and_default_go_to_portals(hubs: MakeHub, ctx: Context, recorder: Attach) -> None:
    home, there = hubs("home"), hubs("there")
    journal: list[Any] = []
    there.register_cell(Log(journal), "b")
    there.listen(ctx)
    home.register_cell(Log(journal), "a")
    home.connect(ctx, "there")
    home.send(to="there:b", from_="a", type="data", data=1)  # by hub name
    home.send(to="b", from_="a", type="data", data=2)  # no local b: DEFAULT
    home.process_queue()
    assert home.counters["forwarded"] == 2
    assert there.run_until(lambda: len(journal) == 2, 5.0)
    assert [(c, msg.data, msg.in_portal) for c, _, msg in journal] == [
        ("b", 1, "home"),
        ("b", 2, "home"),
    ]


# -- queueing and ordering -------------------------------------------------------------------
class Chain(Cell):
    """Dispatches inside its callback and notes when it returns."""

    def __init__(self, order: list[str]) -> None:
        self.order = order

    def go_in(self, message: StemMessage) -> None:
        self.send("next", type="step", data=1)
        self.send("next", type="step", data=2)
        self.order.append("go returns")


class Next(Cell):
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def step_in(self, message: StemMessage) -> None:
        self.order.append(f"step {message.data}")


def test_delivery_waits_for_the_current_callback_and_keeps_order(hubs: MakeHub) -> None:
    order: list[str] = []
    hub = hubs("home")
    hub.register_cell(Chain(order), "chain")
    hub.register_cell(Next(order), "next")
    for _ in range(2):
        hub.send(to="chain", from_="x", type="go")
    hub.process_queue()
    assert order == ["go returns", "go returns", "step 1", "step 2", "step 1", "step 2"]


def test_dispatch_refuses_invalid_messages_and_queues_nothing(hub: Hub) -> None:
    for bad in (
        StemMessage(from_="a", type="data"),
        StemMessage(to="a", type="data"),
        StemMessage(to="a", from_="b"),
        StemMessage(to="a", from_="b", type="cmd"),
        StemMessage(to="a", from_="b", type="status"),
    ):
        with pytest.raises(MessageError):
            hub.dispatch(bad)
    assert hub.process_queue() == 0


# -- the hub's own thread, and call ----------------------------------------------------------
def test_call_in_the_callers_thread_and_in_the_hubs_thread(hubs: MakeHub) -> None:
    hub = hubs("home")
    hub.register_cell(Bare(), "bare")
    assert hub.call("bare", "ping", timeout=2.0).data == "pong"  # drives the loop itself
    hub.start()
    assert hub.running
    reply = hub.call("home:bare", "ping", timeout=2.0)
    assert reply.type == "response" and reply.data == "pong"
    with pytest.raises(RuntimeError, match="already started"):
        hub.start()
    with pytest.raises(RuntimeError, match="runs its own loop"):
        hub.process_queue()
    hub.stop()
    assert not hub.running


def test_call_times_out_and_a_late_reply_is_counted(hubs: MakeHub) -> None:
    hub = hubs("home")
    late: list[StemMessage] = []

    class Slow(Cell):
        def slow_cmd(self, message: StemMessage) -> Any:
            late.append(message)
            return None  # answers later, by hand

    hub.register_cell(Slow(), "slow")
    with pytest.raises(CallTimeoutError, match="'slow'"):
        hub.call("slow", "slow", timeout=0.05)
    assert len(late) == 1
    hub.dispatch(late[0].reply(data="too late"))
    hub.process_queue()
    assert hub.counters["late_replies"] == 1
    assert hub.cells.lookup(CALLS_CELL).pending == {}  # type: ignore[union-attr]


def test_call_keeps_acks_apart_from_the_reply(hubs: MakeHub) -> None:
    hub = hubs("home")
    hub.register_cell(Bare(), "bare")
    reply = hub.call("bare", "ping", timeout=2.0, ack_req=True)
    assert reply.type == "response" and reply.data == "pong"
    hub.process_queue()  # the ack follows the response, after the call has returned
    assert hub.counters["late_replies"] == 0 and hub.counters["delivered"] == 3


class Blocker(Cell):
    def __init__(self) -> None:
        self.error: BaseException | None = None

    def try_in(self, message: StemMessage) -> None:
        assert self.hub is not None
        try:
            self.hub.call("x", "y", timeout=0.1)
        except RuntimeError as exc:
            self.error = exc


def test_call_from_a_cell_of_a_running_hub_is_refused(hubs: MakeHub) -> None:
    hub = hubs("home")
    blocker = Blocker()
    hub.register_cell(blocker, "blocker")
    hub.register_cell(Bare(), "bare")
    with hub:
        hub.send(to="blocker", from_="x", type="try")
        hub.call("bare", "ping", timeout=2.0)  # processed after try_in: in order
    assert blocker.error is not None and "block its own hub" in str(blocker.error)


def test_dispatch_from_many_threads_reaches_the_running_hub(hubs: MakeHub) -> None:
    got: list[Any] = []
    done = threading.Event()

    class Sink(Cell):
        def data_in(self, message: StemMessage) -> None:
            got.append(message.data)
            if len(got) == 400:
                done.set()

    hub = hubs("home")
    hub.register_cell(Sink(), "sink")
    hub.start()

    def blast(base: int) -> None:
        for i in range(100):
            hub.send(to="sink", from_="x", type="data", data=base + i)

    threads = [threading.Thread(target=blast, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert done.wait(5.0)
    for k in range(4):  # each sender's messages arrive in the order sent
        mine = [g for g in got if k * 1000 <= g < (k + 1) * 1000]
        assert mine == list(range(k * 1000, k * 1000 + 100))


def test_cell_send_needs_a_hub() -> None:
    with pytest.raises(RuntimeError, match="not registered"):
        Cell().send("x", type="data")


def test_hub_names_are_checked() -> None:
    with pytest.raises(ValueError, match="needs a name"):
        Hub("")
    with pytest.raises(ValueError, match="other than DEFAULT"):
        Hub("DEFAULT")
    with pytest.raises(ValueError):
        Hub("bad name")


def test_two_threads_cannot_run_one_hub_loop(hubs: MakeHub) -> None:
    hub = hubs("home")
    errors: list[BaseException] = []
    entered, release = threading.Event(), threading.Event()

    class Slow(Cell):
        def wait_in(self, message: StemMessage) -> None:
            entered.set()
            release.wait(5)

    hub.register_cell(Slow(), "slow")
    hub.send(to="slow", from_="x", type="wait")
    runner = threading.Thread(target=hub.process_queue)
    runner.start()
    try:
        assert entered.wait(5)
        try:
            hub.process_queue()
        except RuntimeError as exc:
            errors.append(exc)
    finally:
        release.set()
        runner.join(5)
    assert errors and "run by another thread" in str(errors[0])
    assert hub.process_queue() == 0  # free again once the other thread is done


def test_a_cell_cannot_call_or_drain_its_hub_without_a_thread(hubs: MakeHub) -> None:
    hub = hubs("home")
    errors: list[str] = []

    class Eager(Cell):
        def try_in(self, message: StemMessage) -> None:
            assert self.hub is not None
            for attempt in (self.hub.process_queue, lambda: self.hub.call("x", "y", timeout=1)):  # type: ignore[union-attr]
                try:
                    attempt()
                except RuntimeError as exc:
                    errors.append(str(exc))

    hub.register_cell(Eager(), "eager")
    hub.send(to="eager", from_="x", type="try")
    hub.process_queue()
    assert len(errors) == 2
    assert "waits until the current callback returns" in errors[0]
    assert "would block its own hub" in errors[1]
