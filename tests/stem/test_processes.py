"""Hubs in separate processes joined by portals over real cross-process transports.

Topology: this test process runs hub A; process B listens on net1 (where A is) and
connects to C on net2, with a client portal back to A that becomes its DEFAULT;
process C listens on net2 and reaches A through B. Every test runs twice:

- over the PostOffice transport: a real daemon (mailbus.postoffice.server) on a random
  loopback port, with one group of mailboxes per network (`n1.a`, `n1.b`, `n2.b`, ...);
- over the Maildir-style directory transport of maildir_transport.py.

Either way an email travels as RFC 5322 bytes written by one process and parsed by the
engine in another.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mailbus import Email, to_bytes
from mailbus.postoffice.client import PostOfficeClient
from mailbus.postoffice.server import ServerConfig, ServerThread
from mailbus.postoffice.store import HashParams
from mailbus.stem import ADDRESSING_ERROR, Address, CallTimeoutError, Cell, Hub, StemMessage
from stem_helpers import Recorder, make_context
from waiting import eventually

HERE = Path(__file__).parent
READY_TIMEOUT_S = 30.0
PASSWORD = "stem-test-pw"


class Box(Cell):
    def __init__(self) -> None:
        self.got: list[StemMessage] = []
        self.changed = threading.Condition()

    def msg_in(self, message: StemMessage) -> None:
        with self.changed:
            self.got.append(message)
            self.changed.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[StemMessage]:
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
    """The running topology; `net(n, hub)` is hub's spec on network n (1 or 2)."""

    def __init__(
        self,
        kind: str,
        net: Callable[[int, str], str],
        hub: Hub,
        events: Recorder,
        procs: dict[str, subprocess.Popen[str]],
        inject: Callable[[str, bytes], None],
    ) -> None:
        self.kind = kind
        self.net = net
        self.hub = hub
        self.events = events
        self.procs = procs
        self.inject = inject  # raw bytes into a hub's net1 inbox


@contextlib.contextmanager
def postoffice_nets(root: Path) -> Iterator[tuple[Callable[[int, str], str], Any]]:
    config = ServerConfig(
        store_path=root / "store" / "postoffice.db",
        port=0,
        hash_params=HashParams(log2_n=8, r=8, p=1),  # cheap scrypt for tests
        auth_delay_s=0.01,
        auth_delay_max_s=0.05,
        comm_timeout_s=5.0,
    )
    server = ServerThread(config).start()

    def net(n: int, hub: str) -> str:
        return f"po:{server.port}:n{n}.{hub.lower()}:{PASSWORD}"

    def inject(hub: str, data: bytes) -> None:
        client = PostOfficeClient("127.0.0.1", server.port, timeout=10.0)
        try:
            with contextlib.suppress(Exception):
                client.create_box("junk", PASSWORD)
            client.check_out("junk", PASSWORD)
            client.send(f"n1.{hub.lower()}", data)
        finally:
            client.close()

    try:
        yield net, inject
    finally:
        server.stop()


@contextlib.contextmanager
def maildir_nets(root: Path) -> Iterator[tuple[Callable[[int, str], str], Any]]:
    def net(n: int, hub: str) -> str:
        return f"dir:{root / f'net{n}'}"

    counter = iter(range(10**6))

    def inject(hub: str, data: bytes) -> None:
        (root / "net1" / hub / "new" / f"{next(counter):020d}.junk.eml").write_bytes(data)

    yield net, inject


@contextlib.contextmanager
def email_nets(root: Path, stack: Any) -> Iterator[tuple[Callable[[int, str], str], Any]]:
    """Real Dovecot + Postfix (or its LMTP relay without root) on loopback: the session's
    mail stack (tests/conftest.py); one user per hub and network, each sending to all of
    its net."""
    members = {1: ("A", "B", "D"), 2: ("B", "C")}
    users = {(n, hub): stack.add_user(f"n{n}{hub.lower()}") for n in members for hub in members[n]}

    def net(n: int, hub: str) -> str:
        path = root / f"n{n}{hub.lower()}.toml"
        if not path.exists():
            user = users[(n, hub)]
            everyone = ", ".join(f'"{users[(n, h)].address}"' for h in members[n])
            path.write_text(
                f'transport = "email"\nurl-smtp = "{stack.smtps_url}"\n'
                f'url-imap = "{stack.imaps_url}"\nusername = "{user.address}"\n'
                f'password = "{user.password}"\nca-file = "{stack.ca_file}"\n'
                f"polling-period-ms = 10\n[recipients]\nto = [{everyone}]\n"
                "[mail]\nreconnect-max-s = 0.5\nstart-uid = 1\n"
            )
        return f"toml:{path}"

    def inject(hub: str, data: bytes) -> None:
        stack.deliver(users[(1, hub)].address, data)

    yield net, inject


@pytest.fixture(
    scope="module",
    params=["postoffice", "maildir", pytest.param("email", marks=pytest.mark.mailstack)],
)
def network(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Network]:
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "email":
        nets = email_nets(root, request.getfixturevalue("mail_stack"))
    else:
        nets = {"postoffice": postoffice_nets, "maildir": maildir_nets}[request.param](root)
    with nets as (net, inject):
        context = make_context(net(1, "A"), "A")
        procs: dict[str, subprocess.Popen[str]] = {}
        hub = Hub("A")
        hub.connect(context, "B")  # before init: the inbox exists when polling starts
        hub.add_route("C", via="B")
        events = Recorder()
        hub.tracer.add_listener(events)
        try:
            context.init()
            # C first: its inbox must exist before B forwards anything to it.
            procs["C"] = start_hub("C", "--net", net(2, "C"), "--route", "A=B")
            procs["B"] = start_hub(
                "B", "--net", net(1, "B"), "--net", net(2, "B"),
                "--connect", f"{net(1, 'B')}:A", "--connect", f"{net(2, 'B')}:C",
            )  # fmt: skip
            with hub:
                yield Network(request.param, net, hub, events, procs, inject)
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
    transport = network.hub.portals.names["B"].context.transport.name
    expected = {"postoffice": "postoffice", "maildir": "maildir-test", "email": "email"}
    assert transport == expected[network.kind]
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

    def refused() -> dict[str, Any] | None:
        # Mail may deliver the status request before the ghost: ask until B counted it.
        found = status(network, "B")
        return found if found["counters"].get(ADDRESSING_ERROR, 0) == before + 1 else None

    after = eventually(refused, 30.0, "B's addressing error for the ghost")
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
    network.inject("B", b"\x00\xffnot an email\r\n")
    network.inject("B", b"Subject: stem/B\r\nFrom: x@y\r\n\r\nno Mailbus headers at all\r\n")
    fake = Email(subject="stem/B", body="{", headers={"Stem-Hub": "A", "Stem-Hops": "1"})
    network.inject("B", to_bytes(fake))  # Mailbus-looking but no Source-Timestamp
    assert network.hub.call("B:echo", "echo", "after garbage", timeout=10.0).data == (
        "after garbage"
    )
    assert network.procs["B"].poll() is None


def test_a_remote_hub_that_crashes_and_restarts(network: Network) -> None:
    """Killed, hub D leaves a command unanswered (the call times out, nothing else
    breaks); restarted on the same mailbox, it answers that command and new calls work
    again. (A transport that delivers at least once may also answer an older one again.)"""
    hub = network.hub
    box = Box()
    hub.register_cell(box, "crashbox")
    network.procs["D"] = start_hub("D", "--net", network.net(1, "D"))
    hub.connect(network.hub.portals.names["B"].context, "D")
    try:
        assert hub.call("D:echo", "echo", "first", timeout=10.0).data == "first"
        network.procs["D"].kill()
        network.procs["D"].wait(timeout=10)
        hub.send(to="D:echo", from_="crashbox", cmd="echo", data="while down")
        with pytest.raises(CallTimeoutError):
            hub.call("D:echo", "echo", "call while down", timeout=0.3)
        assert hub.call("B:echo", "echo", "others fine", timeout=10.0).data == "others fine"
        network.procs["D"] = start_hub("D", "--net", network.net(1, "D"))
        assert hub.call("D:echo", "echo", "again", timeout=20.0).data == "again"
        # D took its backlog too. Its answers may be read in any order with "again"'s
        # (a directory transport lists files, not a queue), so wait for them, bounded.
        assert "while down" in [m.data for m in box.wait_for(1, timeout=20.0)]
        # The answer to the call that had given up, counted when it comes.
        eventually(lambda: hub.counters["late_replies"] >= 1, 20.0, "a late reply counted")
    finally:
        hub.unregister_cell("crashbox")


@pytest.mark.slow
@pytest.mark.parametrize("network", ["postoffice"], indirect=True)
def test_the_command_line_across_processes(network: Network, tmp_path: Path) -> None:
    """`mailbus stem send`, a process of its own, asks hub B (another process) over the
    PostOffice daemon and prints the response."""
    port = network.net(1, "x").split(":")[1]
    config = tmp_path / "cli.toml"
    config.write_text(
        f'transport = "postoffice"\n[postoffice]\nport = {port}\nbox = "n1.cli"\n'
        f'password = "{PASSWORD}"\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "mailbus", "--config", str(config),
         "stem", "send", "--timeout", "20", "B:echo", "echo", '{"from": "the shell"}'],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == '{"from": "the shell"}'
    failing = subprocess.run(
        [sys.executable, "-m", "mailbus", "--config", str(config),
         "stem", "send", "--timeout", "1.5", "B:nosuch", "echo"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert failing.returncode == 1 and "no reply" in failing.stderr
