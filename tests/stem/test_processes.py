"""Hubs in separate processes joined by portals over a real cross-process transport.

Topology: this test process runs hub A; process B listens on net1 (where A is) and
connects to C on net2, with a client portal back to A that becomes its DEFAULT;
process C listens on net2 and reaches A through B. The transport is the Maildir-style
directory transport of maildir_transport.py: the email travels as RFC 5322 bytes
written by one process and parsed by the engine in another.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mailbus import Context, Options
from mailbus.stem import ADDRESSING_ERROR, Address, CallTimeoutError, Cell, Hub, Message
from maildir_transport import maildir_transport
from stem_helpers import Recorder

HERE = Path(__file__).parent
READY_TIMEOUT_S = 30.0


class Box(Cell):
    def __init__(self) -> None:
        self.got: list[Message] = []
        self.changed = threading.Condition()

    def msg_in(self, message: Message) -> None:
        with self.changed:
            self.got.append(message)
            self.changed.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Message]:
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.got) >= count, timeout):
                raise AssertionError(f"{self.name} got {len(self.got)} of {count}: {self.got}")
            return list(self.got)


def start_hub(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "remote_hub.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True
    ).start()
    try:
        line = lines.get(timeout=READY_TIMEOUT_S)
    except queue.Empty:
        line = ""
    if line.strip() != "READY":
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"hub {args[0]} did not start: {line!r} {err[-2000:]}")
    return proc


class Network:
    def __init__(
        self,
        hub: Hub,
        events: Recorder,
        procs: dict[str, subprocess.Popen[str]],
        net1: Path,
        context: Context,
    ) -> None:
        self.net1 = net1
        self.context = context
        self.hub = hub
        self.events = events
        self.procs = procs


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    net1, net2 = tmp_path_factory.mktemp("net1"), tmp_path_factory.mktemp("net2")
    options = Options(from_address="a@localhost", polling_period_ms=5)
    context = Context(options, transport=maildir_transport(net1, "A")).init()
    procs: dict[str, subprocess.Popen[str]] = {}
    hub = Hub("A")
    try:
        # C first: its directory must exist before B forwards anything to it.
        procs["C"] = start_hub("C", "--net", str(net2), "--route", "A=B")
        procs["B"] = start_hub(
            "B", "--net", str(net1), "--net", str(net2),
            "--connect", f"{net1}:A", "--connect", f"{net2}:C",
        )  # fmt: skip
        hub.connect(context, "B")
        hub.add_route("C", via="B")
        events = Recorder()
        hub.tracer.add_listener(events)
        with hub:
            yield Network(hub, events, procs, net1, context)
            for name in [n for n in ("D", "C", "B") if n in procs]:
                with contextlib.suppress(Exception):  # the kill below ends it anyway
                    hub.call(f"{name}:control", "stop", timeout=5.0)
    finally:
        hub.close()
        for proc in procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        context.shutdown()


def status(network: Network, hub: str) -> dict[str, Any]:
    reply = network.hub.call(f"{hub}:status", "status", timeout=10.0)
    assert reply.type == "response"
    data: dict[str, Any] = reply.data
    return data


def test_command_with_response_across_processes(network: Network) -> None:
    data = {"text": "grüße", "n": [1, 2.5, None, True], "nested": {"k": "v"}}
    reply = network.hub.call("B:echo", "echo", data, timeout=10.0)
    assert reply.type == "response" and reply.data == data
    assert reply.from_ == Address("echo", "B") and reply.in_portal == "B"


def test_ack_req_and_reply_to_overriding_from(network: Network) -> None:
    hub = network.hub
    box, other = Box(), Box()
    hub.register_cell(box, "box")
    hub.register_cell(other, "other")
    try:
        hub.send(to="B:echo", from_="box", cmd="echo", data=1, ack_req=True)
        got = box.wait_for(2)
        assert [(m.type, m.data) for m in got] == [("response", 1), ("msg_ack", None)]
        assert got[0].reply_id == got[1].reply_id
        hub.send(to="B:echo", from_="box", reply_to="other", cmd="echo", data=2)
        (reply,) = other.wait_for(1)
        assert reply.data == 2 and reply.to == Address("other", "A")
        assert len(box.got) == 2  # the from address got nothing this time
    finally:
        hub.unregister_cell("box")
        hub.unregister_cell("other")


def test_default_portal_routes_a_message_naming_no_hub(network: Network) -> None:
    assert network.hub.call("echo", "echo", "via default", timeout=10.0).data == "via default"


def test_loop_guard_across_processes(network: Network) -> None:
    """B's DEFAULT portal leads back to A; a message from A naming no cell B has must
    stop at B as an addressing error, not come back."""
    before = status(network, "B")["counters"].get(ADDRESSING_ERROR, 0)
    network.hub.send(to="ghost", from_="x", type="data")
    after = status(network, "B")  # B handles A's messages in order: ghost first
    assert after["counters"].get(ADDRESSING_ERROR, 0) == before + 1
    assert after["portals"]["DEFAULT"] == after["portals"]["A"]  # a loop was possible
    assert network.hub.counters[ADDRESSING_ERROR] == 0
    assert not [e for e in network.events.of("stem.received") if e.name == "ghost"]


def test_three_hubs_across_processes_cross_two_portals(network: Network) -> None:
    reply = network.hub.call("C:echo", "echo", {"far": "away"}, timeout=10.0)
    assert reply.data == {"far": "away"} and reply.from_ == Address("echo", "C")
    assert reply.in_portal == "B"  # the last hop
    c = status(network, "C")
    assert "A" not in c["portals"] and "B" in c["portals"]  # C knows only B
    assert c["counters"]["forwarded"] >= 1


def test_unknown_hub_is_reported_by_the_remote_hub(network: Network) -> None:
    def undeliverable() -> int:
        count: int = status(network, "C")["counters"].get("stem.undeliverable", 0)
        return count

    before = undeliverable()
    network.hub.send(to="C:echo", from_="x", reply_to="Z:nowhere", cmd="echo", data=0)
    # C queues the response behind the status command that may already be waiting, so
    # ask again until it shows (bounded).
    deadline = time.monotonic() + 10.0
    while (now := undeliverable()) == before and time.monotonic() < deadline:
        pass
    assert now == before + 1


def test_garbage_in_the_transport_does_not_stop_the_remote_hub(network: Network) -> None:
    new = network.net1 / "B" / "new"
    (new / "00000000000000000000.garbage.eml").write_bytes(b"\x00\xffnot an email\r\n")
    (new / "00000000000000000001.foreign.eml").write_bytes(
        b"Subject: stem/B\r\nFrom: x@y\r\n\r\nno Mailbus headers at all\r\n"
    )
    assert network.hub.call("B:echo", "echo", "after garbage", timeout=10.0).data == (
        "after garbage"
    )
    assert network.procs["B"].poll() is None


def test_a_remote_hub_that_crashes_and_restarts(network: Network) -> None:
    """Killed, hub D leaves a command unanswered (the call times out, nothing else
    breaks); restarted on the same directory, it answers that command late (counted as
    a late reply) and new calls work again."""
    hub = network.hub
    network.procs["D"] = start_hub("D", "--net", str(network.net1))
    hub.connect(network.context, "D")
    assert hub.call("D:echo", "echo", "first", timeout=10.0).data == "first"
    network.procs["D"].kill()
    network.procs["D"].wait(timeout=10)
    with pytest.raises(CallTimeoutError):
        hub.call("D:echo", "echo", "while down", timeout=0.3)
    assert hub.call("B:echo", "echo", "others fine", timeout=10.0).data == "others fine"
    late_before = hub.counters["late_replies"]
    network.procs["D"] = start_hub("D", "--net", str(network.net1))
    assert hub.call("D:echo", "echo", "again", timeout=10.0).data == "again"
    # D answered the backlog first, in order: that reply came after its call gave up.
    assert hub.counters["late_replies"] == late_before + 1
