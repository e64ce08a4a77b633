"""The engine over PostOffice: options, topics and services between participants (in one
process and across processes), bad letters, a daemon restart under a live transport."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

import mailbus
import pytest
from mailbus.errors import ConfigError, TransportError
from mailbus.options import Options, options_from_mapping
from mailbus.postoffice.client import PostOfficeClient
from mailbus.postoffice.transport import (
    PASSWORD_ENV,
    PostOfficeOptions,
    address_box,
    reply_box,
)
from mailbus.trace import TraceEvent

from .conftest import REPO, Daemon, DaemonProcess, assert_close_wakes_a_receive, wait_until


def options(port: int, box: str, **extra: object) -> Options:
    table = {"port": port, "box": box, "password": "pw", **extra}
    return options_from_mapping({"transport": "postoffice", "postoffice": table})


@pytest.fixture
def participants(daemon: Daemon) -> Iterator[Callable[..., mailbus.Context]]:
    contexts: list[mailbus.Context] = []

    def make(box: str, **extra: object) -> mailbus.Context:
        ctx = mailbus.Context(options(daemon.port, box, **extra)).init()
        contexts.append(ctx)
        return ctx

    yield make
    for ctx in contexts:
        ctx.shutdown()


# -- options -------------------------------------------------------------------------
def test_options_from_the_postoffice_table() -> None:
    opts = PostOfficeOptions.from_options(options(9000, "robot.arm"), environ={})
    assert (opts.host, opts.port, opts.box, opts.group, opts.send_box) == (
        "127.0.0.1",
        9000,
        "robot.arm",
        "robot",
        "robot.arm.out",
    )
    assert "pw" not in repr(opts)


def test_password_from_the_environment_wins() -> None:
    opts = PostOfficeOptions.from_options(options(9000, "a.b"), environ={PASSWORD_ENV: "env"})
    assert opts.password == "env"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"password": "pw"}, "postoffice.box"),
        ({"box": "a.b"}, "postoffice.password"),
        ({"box": "a b", "password": "pw"}, "postoffice.box"),
        ({"box": "a.b", "password": "pw", "peers": ["x", "bad name"]}, "postoffice.peers"),
        ({"box": "a.b", "password": "pw", "port": 0}, "postoffice.port"),
        ({"box": "a.b", "password": "pw", "port": "8228"}, "postoffice.port"),
        ({"box": "alone", "password": "pw"}, "postoffice.group"),
        ({"box": "a.b", "password": "pw", "colour": "red"}, "postoffice.colour"),
        ({"box": "a.b", "password": "pw", "idle-wait-s": -1.0}, "postoffice.idle-wait-s"),
        ({"box": "a.b", "password": "pw", "idle-wait-s": "1"}, "postoffice.idle-wait-s"),
    ],
)
def test_bad_options_name_their_key(table: dict[str, object], key: str) -> None:
    opts = options_from_mapping({"transport": "postoffice", "postoffice": table})
    with pytest.raises(ConfigError) as info:
        PostOfficeOptions.from_options(opts, environ={})
    assert info.value.key == key


def test_addresses_map_to_boxes() -> None:
    assert address_box("robot.arm@postoffice") == "robot.arm"
    assert address_box("robot.arm@example.com") is None
    assert address_box("bad!name@postoffice") is None
    assert reply_box("robot.arm.out") == "robot.arm"
    assert reply_box("robot.arm") == "robot.arm"


# -- the engine over the daemon --------------------------------------------------------
def test_topics_fan_out_to_every_member_of_the_group(
    daemon: Daemon, participants: Callable[..., mailbus.Context]
) -> None:
    arm, cam, leg = participants("robot.arm"), participants("robot.cam"), participants("robot.leg")
    events: list[TraceEvent] = []
    arm.tracer.add_listener(events.append)
    subs = [ctx.subscription("sensors/temp") for ctx in (cam, leg)]
    publisher = arm.publisher("sensors/temp")
    for i in range(5):
        publisher.publish(f'{{"c": {i}}}')
    for sub in subs:
        bodies = []
        while len(bodies) < 5:
            message = mailbus.wait_for_message(sub, 10.0)
            assert message is not None
            bodies.append(message.body)
        assert bodies == [f'{{"c": {i}}}' for i in range(5)]  # in order per sender
    assert [e.kind for e in events].count("postoffice.letter_in") == 5


@pytest.mark.parametrize("observe", [True, False])
def test_service_call_between_participants(
    daemon: Daemon, participants: Callable[..., mailbus.Context], observe: bool
) -> None:
    extra = {"observe-responses": observe}
    caller, callee = participants("svc.caller", **extra), participants("svc.callee", **extra)
    server = callee.server("math/add")
    client = caller.client("math/add")
    sequence = client.send_request("1+2")
    request = mailbus.wait_for_request(server, 10.0)
    assert request is not None and request.body == "1+2"
    # The reply address is the daemon's stamp, not what the From header claimed.
    assert request.email.sender == "svc.caller@postoffice"

    def letters_in() -> list[str]:
        return [e.name for e in daemon.events if e.kind == "postoffice.letter_in"]

    before = len(letters_in())
    server.send_response(request, "3")
    response = mailbus.wait_for_response(client, 10.0)
    assert response is not None and response.body == "3"
    assert response.sequence_number == sequence
    wanted = ["svc.callee", "svc.caller"] if observe else ["svc.caller"]
    daemon.wait_for(lambda: len(letters_in()) >= before + len(wanted))
    # Observed: through the group, so the caller gets it once and so does every other
    # member; else to the caller's box only.
    assert sorted(letters_in()[before:]) == wanted
    assert mailbus.wait_for_response(client, 0.2) is None  # the caller got it once


def test_wrong_password_fails_at_init_and_is_traced(
    daemon: Daemon, participants: Callable[..., mailbus.Context]
) -> None:
    participants("locked.box")
    ctx = mailbus.Context(
        options_from_mapping(
            {
                "transport": "postoffice",
                "postoffice": {"port": daemon.port, "box": "locked.box", "password": "nope"},
            }
        )
    )
    events: list[TraceEvent] = []
    ctx.tracer.add_listener(events.append)
    with pytest.raises(TransportError, match="refused the password"):
        ctx.init()
    assert "postoffice.auth_failed" in [e.kind for e in events]


def test_a_box_the_daemon_will_not_create_is_a_clear_error(
    daemon: Daemon, participants: Callable[..., mailbus.Context]
) -> None:
    participants("crew.one")  # "crew" is now a group: no box may take its name
    ctx = mailbus.Context(options(daemon.port, "crew", group="crew.one"))
    with pytest.raises(TransportError, match="refused to create it"):
        ctx.init()


def test_no_daemon_is_a_clear_transport_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with pytest.raises(TransportError, match="cannot connect"):
        mailbus.Context(options(port, "no.daemon")).init()


def test_a_letter_that_is_not_an_email_is_skipped_and_reported(
    daemon: Daemon, participants: Callable[..., mailbus.Context]
) -> None:
    ctx = participants("bad.mail")
    sub = ctx.subscription("ok/topic")
    with daemon.client() as rogue:
        rogue.create_box("bad.rogue", "x")
        rogue.check_out("bad.rogue", "x")
        rogue.send("bad.mail", b"\x00\x01 not an email at all")
    participants("bad.other").publisher("ok/topic").publish("fine")
    message = mailbus.wait_for_message(sub, 10.0)
    assert message is not None and message.body == "fine"
    wait_until(lambda: ctx.counters["malformed"] == 1)


@pytest.mark.slow
def test_transport_reconnects_after_a_daemon_restart(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    store = tmp_path / "restart" / "po.db"
    first = spawn_daemon(store=store)
    os.environ[PASSWORD_ENV] = "pw"
    try:
        sender = mailbus.Context(options(first.port, "re.sender")).init()
        receiver = mailbus.Context(options(first.port, "re.receiver")).init()
        sub = receiver.subscription("t")
        sender.publisher("t").publish("before")
        assert (m := mailbus.wait_for_message(sub, 10.0)) is not None and m.body == "before"
        port = first.port
        first.terminate()
        second = spawn_daemon("--port", str(port), store=store)
        assert second.port == port
        # The sender's connection is gone; the next publish reconnects (one retry).
        sender.publisher("t").publish("after")
        got = None
        for _ in range(100):  # the receiver reconnects on its next poll
            got = mailbus.wait_for_message(sub, 0.1)
            if got is not None:
                break
        assert got is not None and got.body == "after"
        sender.shutdown()
        receiver.shutdown()
    finally:
        os.environ.pop(PASSWORD_ENV, None)


def test_service_across_processes(daemon: Daemon, tmp_path: Path) -> None:
    with daemon.client() as admin:  # the remote participant's boxes, created ahead
        admin.create_box("proc.server", "participant-pw")
        admin.create_box("proc.server.out", "participant-pw")
    env = {**os.environ, PASSWORD_ENV: "participant-pw", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.postoffice.participant", str(daemon.port), "proc.server"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=env,
    )
    try:
        assert child.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(child.stdout, selectors.EVENT_READ)
        assert selector.select(30), "participant did not start"
        assert child.stdout.readline().strip() == b"ready"
        with mailbus.Context(options(daemon.port, "proc.client")) as ctx:
            client = ctx.client("echo")
            for i in range(3):
                assert client.call(f"hello {i}", timeout=10.0).body == f"echo: hello {i}"
            ctx.publisher("control.stop").publish("stop")
        assert child.wait(30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()


def test_raw_client_sees_engine_letters_as_emails(
    daemon: Daemon, participants: Callable[..., mailbus.Context]
) -> None:
    participants("peek.pub").publisher("peek/topic").publish("look")
    # Another member of the group, read with the plain client: the letter is an email.
    with PostOfficeClient("127.0.0.1", daemon.port) as raw:
        raw.create_box("peek.raw", "pw")
        raw.check_out("peek.raw", "pw")
        participants("peek.pub2").publisher("peek/topic").publish("look again")
        letters = []
        for letter in raw.get_mail(10.0):
            letters.append(letter)
            break
    assert letters and letters[0].sender == "peek.pub2.out"
    parsed = mailbus.from_bytes(letters[0].payload)
    assert parsed.subject == "peek/topic" and parsed.body == "look again"


def test_peers_replace_the_group(
    daemon: Daemon, participants: Callable[..., mailbus.Context]
) -> None:
    listed = participants("east.listed")
    unlisted = participants("east.unlisted")
    sender = participants("west.sender", peers=["east.listed"])
    subs = {name: ctx.subscription("news") for name, ctx in (("l", listed), ("u", unlisted))}
    sender.publisher("news").publish("for the listed only")
    message = mailbus.wait_for_message(subs["l"], 10.0)
    assert message is not None and message.body == "for the listed only"
    # The unlisted member of the same group got nothing: nothing is in its box either.
    daemon.wait_for(lambda: daemon.office.boxes["east.unlisted"].letters == deque())
    assert subs["u"].take() is None


def test_wake_returns_a_blocked_receive(daemon: Daemon) -> None:
    from mailbus.postoffice.transport import create_transport
    from mailbus.trace import Tracer

    transport = create_transport(options(daemon.port, "wake.me"), Tracer())
    try:
        results: list[object] = []
        thread = threading.Thread(target=lambda: results.append(transport.receiver.receive(60)))
        thread.start()
        daemon.wait_for(lambda: daemon.office.boxes["wake.me"].holder is not None)
        wait_until(lambda: bool(daemon.office.boxes["wake.me"].holder._waiting_mail))  # type: ignore[union-attr]
        transport.receiver.wake()
        thread.join(10)
        assert not thread.is_alive()
        assert results == [[]]  # woken, and the wake-up letter is not handed on
    finally:
        transport.close()


def test_closing_the_transport_unblocks_a_receive_in_another_thread(daemon: Daemon) -> None:
    from mailbus.postoffice.transport import create_transport
    from mailbus.trace import Tracer

    transport = create_transport(options(daemon.port, "close.me"), Tracer())
    assert_close_wakes_a_receive(daemon, transport, "close.me")


# -- idle cost and wake-up -----------------------------------------------------------
def getmails(daemon: Daemon) -> int:
    return int(daemon.thread.call(lambda: daemon.office.getmail_requests))


def polling_thread(ctx: mailbus.Context) -> threading.Thread:
    thread = ctx._polling._thread  # type: ignore[union-attr]
    assert thread is not None and thread.is_alive()
    return thread


def wait_in_getmail(daemon: Daemon, box: str) -> None:
    def waiting() -> bool:
        holder = daemon.office.boxes[box].holder if box in daemon.office.boxes else None
        return holder is not None and bool(holder._waiting_mail)

    daemon.wait_for(waiting)


def test_an_idle_participant_makes_few_getmail_round_trips(
    daemon: Daemon, participants: Callable[..., mailbus.Context]
) -> None:
    ctx = participants("idle.one")  # the engine's default polling period: 10 ms
    sub = ctx.subscription("quiet")
    wait_in_getmail(daemon, "idle.one")
    before = getmails(daemon)
    threading.Event().wait(1.5)  # the idle interval observed, not a synchronisation
    idle = getmails(daemon) - before
    # One GETMAIL per 10 ms poll would be ~150; a 1 s wait makes about 2.
    assert idle <= 10, f"{idle} GETMAIL round trips in 1.5 s of idling"
    # Stretching the wait costs no latency: a letter ends it.
    participants("idle.two").publisher("quiet").publish("wake up")
    message = mailbus.wait_for_message(sub, 10.0)
    assert message is not None and message.body == "wake up"


def test_shutdown_interrupts_a_long_idle_wait(
    daemon: Daemon, participants: Callable[..., mailbus.Context]
) -> None:
    # A wait far longer than the engine's 5 s join: only wake() can end it in time.
    ctx = participants("long.wait", **{"idle-wait-s": 600.0})
    thread = polling_thread(ctx)
    wait_in_getmail(daemon, "long.wait")
    # The engine stops the polling thread (wake, then a 5 s join) before it closes the
    # transport, whose close would cut the socket anyway: look before that happens.
    receiver = ctx.transport.receiver
    close = receiver.close
    alive_at_close: list[bool] = []

    def recording_close() -> None:
        alive_at_close.append(thread.is_alive())
        close()

    receiver.close = recording_close  # type: ignore[method-assign]
    ctx.shutdown()
    assert alive_at_close == [False]
    thread.join(10.0)
    assert not thread.is_alive()
    daemon.wait_for(lambda: "long.wait" not in daemon.office.boxes)  # ours: removed


def test_wake_cuts_the_wait_when_no_wake_up_letter_can_go(daemon: Daemon) -> None:
    from mailbus.postoffice.transport import create_transport
    from mailbus.trace import Tracer

    transport = create_transport(
        options(daemon.port, "cut.off", **{"idle-wait-s": 600.0}), Tracer()
    )
    try:
        outcome: list[object] = []

        def receive() -> None:
            try:
                outcome.append(transport.receiver.receive(0.01))
            except TransportError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=receive)
        thread.start()
        wait_in_getmail(daemon, "cut.off")
        transport.sender.close()  # the wake-up letter cannot be sent now
        transport.receiver.wake()
        thread.join(10.0)
        assert not thread.is_alive() and len(outcome) == 1
        # A later receive reconnects and finds nothing waiting.
        assert transport.receiver.receive(0) == []
    finally:
        transport.close()


def test_a_wake_before_the_wait_is_not_lost(daemon: Daemon) -> None:
    from mailbus.postoffice.transport import create_transport
    from mailbus.trace import Tracer

    transport = create_transport(
        options(daemon.port, "early.wake", **{"idle-wait-s": 600.0}), Tracer()
    )
    try:
        transport.sender.close()  # only the flag and the socket cut remain
        transport.receiver.wake()
        done = threading.Event()
        results: list[object] = []
        thread = threading.Thread(
            target=lambda: (results.append(transport.receiver.receive(0.01)), done.set())
        )
        thread.start()
        assert done.wait(10.0)
        assert results == [[]]
    finally:
        transport.close()
