"""The daemon through the client binding: every reachable error code as its exception,
the box lock, letters that survive a client vanishing, COMMTIMEOUT, limits, fuzzing."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from mailbus.postoffice import auth as auth_module
from mailbus.postoffice.client import (
    ERRORS,
    AlreadyConnected,
    BadCommand,
    BoxExists,
    BoxInUse,
    CommTimeout,
    ConnectionLost,
    DeliveryFailed,
    Letter,
    NoBoxConnected,
    NoSuchBox,
    NotAuthorized,
    PostOfficeClient,
    PostOfficeError,
    ServerShutdown,
)
from mailbus.postoffice.office import PostOffice
from mailbus.postoffice.protocol import ResponseCode
from mailbus.postoffice.store import password_digest

from .conftest import Daemon, daemon_config, wait_until


def box(daemon: Daemon, name: str, password: str = "pw") -> PostOfficeClient:
    client = daemon.client()
    with contextlib.suppress(BoxExists):
        client.create_box(name, password)
    client.check_out(name, password)
    return client


def test_every_error_code_has_its_own_exception() -> None:
    assert len(set(ERRORS.values())) == len(ERRORS)
    errors = {ResponseCode.REQGRANTED, ResponseCode.REQDATA, ResponseCode.INMAIL}
    assert set(ERRORS) == set(ResponseCode) - errors


def test_error_codes_reachable_from_the_client(daemon: Daemon) -> None:
    with daemon.client() as client, daemon.client() as other:
        with pytest.raises(NoBoxConnected):
            client.send("a.b", b"x")
        with pytest.raises(NoBoxConnected):
            list(client.get_mail(0))
        with pytest.raises(NoBoxConnected):
            client.empty()
        with pytest.raises(NoBoxConnected):
            client.remove()
        with pytest.raises(NoBoxConnected):
            client.return_box()
        with pytest.raises(NoSuchBox):
            client.check_out("no.such", "pw")
        client.create_box("a.b", "pw")
        with pytest.raises(BoxExists):
            client.create_box("a.b", "other")
        with pytest.raises(NotAuthorized):
            client.check_out("a.b", "wrong")
        client.check_out("a.b", "pw")
        with pytest.raises(AlreadyConnected):
            client.check_out("a.b", "pw")
        with pytest.raises(BoxInUse):
            other.check_out("a.b", "pw")
        with pytest.raises(DeliveryFailed):
            client.send("no.such", b"x")
        # Still usable after every refusal.
        client.send("a.b", b"to myself")
        assert list(client.get_mail(0)) == [Letter("a.b", b"to myself")]


def test_unknown_code_is_bad_command(daemon: Daemon) -> None:
    raw = daemon.raw()
    try:
        raw.exchange(b"\x63", b"\x03")
        raw.exchange(b"\x08", b"\x08")  # and the connection goes on
    finally:
        raw.close()


def answering(*answers: bytes) -> tuple[int, threading.Thread]:
    """A stand-in server that reads one request code per answer and sends the answer:
    how an older or smaller PostOffice refuses codes it does not know or offer."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        with listener:
            listener.settimeout(10)
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                for answer in answers:
                    if not conn.recv(1):
                        return
                    conn.sendall(answer)

    thread = threading.Thread(target=serve)
    thread.start()
    return port, thread


def test_refusals_of_other_servers_become_their_exceptions() -> None:
    from mailbus.postoffice.client import ProtocolViolation, Unsupported

    port, thread = answering(b"\x03", b"\x0e", b"\x06")
    client = PostOfficeClient("127.0.0.1", port, timeout=10)
    with pytest.raises(BadCommand):
        client.return_box()
    with pytest.raises(Unsupported):
        client.empty()
    with pytest.raises(ProtocolViolation):
        client.return_box()  # BOXEXISTS is no answer to RETBOX: the client gives up
    assert not client.connected
    thread.join(10)


def test_box_lock_across_two_clients_released_by_return_and_by_disconnect(daemon: Daemon) -> None:
    first = box(daemon, "lock.me")
    second = daemon.client()
    with pytest.raises(BoxInUse):
        second.check_out("lock.me", "pw")
    first.return_box()  # the reference's RETBOX kept the box: ours releases it
    second.check_out("lock.me", "pw")
    with pytest.raises(BoxInUse):
        first.check_out("lock.me", "pw")
    second._sock.close()  # type: ignore[union-attr]  # vanish without DISCONNECT
    daemon.wait_for(lambda: daemon.office.boxes["lock.me"].holder is None)
    first.check_out("lock.me", "pw")
    first.close()
    kinds = daemon.kinds()
    assert kinds.count("postoffice.checked_out") == 3
    assert kinds.count("postoffice.returned") == 3


def test_remove_box_takes_exactly_the_checked_out_box(daemon: Daemon) -> None:
    keeper = box(daemon, "keep.me")
    keeper.send("keep.me", b"stay")
    keeper.return_box()
    remover = daemon.client()
    remover.create_box("drop.me", "pw")
    remover.create_box("decoy", "pw")  # the name given last is not what gets removed
    remover.check_out("drop.me", "pw")
    remover.remove()
    with pytest.raises(NoSuchBox):
        remover.check_out("drop.me", "pw")
    remover.check_out("decoy", "pw")
    remover.close()
    keeper.check_out("keep.me", "pw")
    assert [x.payload for x in keeper.get_mail(0)] == [b"stay"]
    keeper.close()


def test_letters_to_a_group_reach_every_member(daemon: Daemon) -> None:
    a, b = box(daemon, "team.a"), box(daemon, "team.b")
    outsider = box(daemon, "other.c")
    outsider.send("team", b"all hands")
    assert [x.payload for x in a.get_mail(0)] == [b"all hands"]
    assert [x.payload for x in b.get_mail(0)] == [b"all hands"]
    assert list(outsider.get_mail(0)) == []
    with pytest.raises(DeliveryFailed):
        outsider.send("nobody", b"x")
    for c in (a, b, outsider):
        c.close()


def test_a_group_name_cannot_be_taken_by_a_new_box(daemon: Daemon) -> None:
    arm, cam = box(daemon, "robot.arm"), box(daemon, "robot.cam")
    intruder = daemon.client()
    with pytest.raises(BoxExists):
        intruder.create_box("robot", "pw")  # would capture every letter to the group
    with pytest.raises(NoSuchBox):
        intruder.check_out("robot", "pw")  # nothing was created
    sender = box(daemon, "other.sender")
    sender.send("robot", b"to the group")
    assert [x.payload for x in arm.get_mail(0)] == [b"to the group"]
    assert [x.payload for x in cam.get_mail(0)] == [b"to the group"]
    # Once the group has no members left, the name is free for a mailbox.
    for member in (arm, cam):
        member.remove()
    intruder.create_box("robot", "pw")
    for c in (arm, cam, intruder, sender):
        c.close()


def test_members_under_a_box_do_not_change_where_its_letters_go(daemon: Daemon) -> None:
    robot = box(daemon, "robot")  # the reverse order: the mailbox first
    # Allowed (the transport keeps "robot.arm.out" beside "robot.arm"), but the name
    # "robot" keeps meaning the mailbox: the newcomers take none of its letters.
    arm, cam = box(daemon, "robot.arm"), box(daemon, "robot.cam")
    sender = box(daemon, "other.sender")
    sender.send("robot", b"to the box")
    assert [x.payload for x in robot.get_mail(0)] == [b"to the box"]
    assert list(arm.get_mail(0)) == []
    assert list(cam.get_mail(0)) == []
    with pytest.raises(BoxExists):
        sender.create_box("robot", "other")  # still taken, by the mailbox
    # Without the mailbox, "robot" is the group of the members again; then it is refused.
    robot.remove()
    sender.send("robot", b"to the group")
    assert [x.payload for x in arm.get_mail(0)] == [b"to the group"]
    assert [x.payload for x in cam.get_mail(0)] == [b"to the group"]
    with pytest.raises(BoxExists):
        sender.create_box("robot", "pw")
    for c in (robot, arm, cam, sender):
        c.close()


def test_names_being_created_count_as_existing(tmp_path: Path) -> None:
    office = PostOffice(daemon_config(tmp_path))
    assert office.name_conflict("robot") == ""
    office.reserved.add("robot.arm")  # hashing its password, not committed yet
    assert "group" in office.name_conflict("robot")
    assert "exists" in office.name_conflict("robot.arm")
    assert office.name_conflict("robot.cam") == ""  # a second member is fine
    assert "being created" in office.name_conflict("robot.arm.out")
    office.reserved = set()
    assert office.name_conflict("robot.arm.out") == ""
    assert office.name_conflict("robotic") == ""


def test_disconnect_mid_getmail_loses_nothing(daemon: Daemon) -> None:
    receiver = box(daemon, "r.one")
    sender = box(daemon, "s.one")
    for i in range(3):
        sender.send("r.one", f"letter {i}".encode())
    mail = receiver.get_mail(5.0)
    assert next(mail).payload == b"letter 0"  # held, not yet acknowledged
    receiver._sock.close()  # type: ignore[union-attr]  # crash while holding it
    daemon.wait_for(lambda: daemon.office.boxes["r.one"].holder is None)
    again = box(daemon, "r.one")
    assert [x.payload for x in again.get_mail(0)] == [b"letter 0", b"letter 1", b"letter 2"]
    assert list(again.get_mail(0)) == []  # taken out once received whole
    again.close()
    sender.close()


def test_leaving_get_mail_early_keeps_the_rest(daemon: Daemon) -> None:
    client = box(daemon, "early.exit")
    for i in range(4):
        client.send("early.exit", bytes([i]))
    for letter in client.get_mail(1.0):
        if letter.payload == b"\x01":
            break  # SATIATED: letters 0 and 1 are taken, 2 and 3 stay
    assert [x.payload for x in client.get_mail(0)] == [b"\x02", b"\x03"]
    client.close()


def test_get_mail_waits_for_a_letter_sent_meanwhile(daemon: Daemon) -> None:
    receiver = box(daemon, "wait.r")
    sender = box(daemon, "wait.s")
    got: list[Letter] = []

    def consume() -> None:
        for letter in receiver.get_mail(20.0):
            got.append(letter)
            if len(got) == 2:
                break

    thread = threading.Thread(target=consume)
    thread.start()
    daemon.wait_for(lambda: daemon.office.boxes["wait.r"].holder is not None)
    sender.send("wait.r", b"ping")
    wait_until(lambda: bool(got), 20.0)
    assert got[0] == Letter("wait.s", b"ping")
    sender.send("wait.r", b"done")
    thread.join(30)
    assert [x.payload for x in got] == [b"ping", b"done"]
    receiver.close()
    sender.close()


def test_empty_box(daemon: Daemon) -> None:
    client = box(daemon, "empty.me")
    for _ in range(5):
        client.send("empty.me", b"junk")
    client.empty()
    assert list(client.get_mail(0)) == []
    client.close()


def test_commtimeout_for_a_client_that_stalls(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(comm_timeout_s=0.3)
    raw = daemon.raw()
    try:
        raw.exchange(b"\x02", b"\x01")  # CREATEBOX ... then nothing
        assert raw.recv_exactly(1) == b"\x0c"  # COMMTIMEOUT
        assert raw.at_eof()
    finally:
        raw.close()
    assert "postoffice.timeout" in daemon.kinds()
    # Idle between requests is not a stall.
    idle = daemon.client()
    idle.create_box("idle.ok", "pw")
    threading.Event().wait(0.6)  # idle for longer than the comm timeout, on purpose
    idle.check_out("idle.ok", "pw")
    idle.close()


def test_client_sees_commtimeout_as_its_exception(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(comm_timeout_s=0.3)
    client = box(daemon, "slow.poke")
    client.send("slow.poke", b"x")
    mail = client.get_mail(5.0)
    next(mail)
    # Inside GETMAIL the client owes NEXTLETTER or SATIATED; it stalls instead.
    wait_until(lambda: "postoffice.timeout" in daemon.kinds())
    with pytest.raises((CommTimeout, ConnectionLost)):
        next(mail)
    assert not client.connected


def test_wrong_passwords_are_slowed_down_per_peer(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(auth_delay_s=0.01, auth_delay_max_s=0.08)
    owner = daemon.client()
    owner.create_box("guarded", "Right-Pa55")
    for _ in range(2):  # a new connection does not start from zero: failures are per host
        attacker = daemon.client()
        for _ in range(2):
            with pytest.raises(NotAuthorized):
                attacker.check_out("guarded", "Wrong-Pa55")
        attacker.close()
    assert daemon.thread.call(lambda: daemon.office.gate.failures["127.0.0.1"].count) == 4
    failures = [e.extra["failures"] for e in daemon.events if e.kind == "postoffice.auth_failed"]
    assert failures == [1, 2, 3, 4]
    assert all("Pa55" not in repr(e) for e in daemon.events)  # never a password
    owner.check_out("guarded", "Right-Pa55")  # the right password is not held back
    owner.close()


def test_attackers_in_back_off_do_not_lock_the_owner_out(
    make_daemon: Callable[..., Daemon],
) -> None:
    # Back-offs that soon outgrow the owner's patience (its client gives up after 3 s).
    daemon = make_daemon(auth_delay_s=0.1, auth_delay_max_s=5.0)
    with daemon.client() as setup:
        setup.create_box("vault", "Right-Pa55")
    stop = threading.Event()
    attackers = [PostOfficeClient("127.0.0.1", daemon.port, timeout=30.0) for _ in range(4)]
    refused = [0] * len(attackers)

    def attack(index: int) -> None:
        while not stop.is_set():
            try:
                attackers[index].check_out("vault", "Wrong-Pa55")
            except NotAuthorized:
                refused[index] += 1
            except PostOfficeError:
                return  # aborted at the end of the test

    threads = [threading.Thread(target=attack, args=(i,), daemon=True) for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        # Enough failures that the next waits are 1.6 s and more, with attempts queued.
        wait_until(lambda: daemon.kinds().count("postoffice.auth_failed") >= 5, timeout=30.0)
        with PostOfficeClient("127.0.0.1", daemon.port, timeout=3.0) as owner:
            owner.check_out("vault", "Right-Pa55")
            assert owner.box == "vault"
            assert daemon.thread.call(lambda: daemon.office.boxes["vault"].holder is not None)
    finally:
        stop.set()
        for attacker in attackers:
            attacker.abort()
        for thread in threads:
            thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    assert sum(refused) >= 1


@pytest.mark.slow
def test_a_host_with_too_many_attempts_waiting_has_the_next_one_closed(
    make_daemon: Callable[..., Daemon],
) -> None:
    daemon = make_daemon(auth_delay_s=5.0, auth_delay_max_s=5.0, auth_max_waiting=2)
    with daemon.client() as setup:
        setup.create_box("capped", "Right-Pa55")
    raws = [daemon.raw() for _ in range(3)]
    try:
        for raw in raws[:2]:  # two wrong attempts sit out their 5 s back-off
            raw.exchange(b"\x00", b"\x01")
            raw.exchange(b"\x00\x06capped", b"\x01")
            raw.send(password_digest("Wrong-Pa55"))
        daemon.wait_for(lambda: waiting_in_back_off(daemon) == 2)
        third = raws[2]
        third.exchange(b"\x00", b"\x01")
        third.exchange(b"\x00\x06capped", b"\x01")
        third.exchange(password_digest("Wrong-Pa55"), bytes((ResponseCode.NOAUTH,)))
        assert third.at_eof()  # answered at once and closed, not queued
        # The owner is still served at once while the two wait.
        with PostOfficeClient("127.0.0.1", daemon.port, timeout=3.0) as owner:
            owner.check_out("capped", "Right-Pa55")
        for raw in raws[:2]:  # and the waiting ones get their answer in the end
            assert raw.recv_exactly(1) == bytes((ResponseCode.NOAUTH,))
    finally:
        for raw in raws:
            raw.close()
    assert daemon.thread.call(lambda: waiting_in_back_off(daemon)) == 0


def waiting_in_back_off(daemon: Daemon) -> int:
    record = daemon.office.gate.failures.get("127.0.0.1")
    return 0 if record is None else int(record.waiting)


def test_limits_are_refused_with_their_codes(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(
        max_letter_bytes=100,
        max_letters_per_box=2,
        when_full="refuse",
        max_boxes_per_connection=2,
        max_connections=3,
    )
    client = daemon.client()
    client.create_box("lim.a", "pw")
    client.create_box("lim.b", "pw")
    with pytest.raises(BoxExists):
        client.create_box("lim.c", "pw")  # boxes per connection: ERRATA's only refusal
    with pytest.raises(NoSuchBox):
        client.check_out("lim.c", "pw")  # refused, not created
    assert any(e.kind == "postoffice.box_refused" and "limit" in e.detail for e in daemon.events)
    client.check_out("lim.a", "pw")
    with pytest.raises(DeliveryFailed):
        client.send("lim.b", b"x" * 101)  # letter size
    # The oversized letter was skipped, not kept, and this connection is still in step.
    client.send("lim.b", b"x" * 100)
    client.send("lim.b", b"y")
    with pytest.raises(DeliveryFailed):
        client.send("lim.b", b"z")  # letters per box
    extra = [daemon.client(), daemon.client()]
    daemon.wait_for(lambda: len(daemon.office.clerks) == 3)
    with pytest.raises((ServerShutdown, ConnectionLost)):
        daemon.client().create_box("over.limit", "pw")  # connections
    assert daemon.office.refused_connections >= 1
    for c in [client, *extra]:
        c.close()


def test_createbox_refusals_are_only_what_errata_allows() -> None:
    from mailbus.postoffice.protocol import ANYTIME, RequestCode, allowed_replies

    final = allowed_replies(RequestCode.CREATEBOX, 2) - ANYTIME
    assert final == {ResponseCode.REQGRANTED, ResponseCode.BOXEXISTS}


def test_invalid_names_are_refused_with_codes(daemon: Daemon) -> None:
    raw = daemon.raw()
    try:
        raw.exchange(b"\x02", b"\x01")
        raw.exchange(b"\x00\x04bad!", b"\x01")
        raw.exchange(bytes(16), b"\x06")  # CREATEBOX of an invalid name: BOXEXISTS
        raw.exchange(b"\x00", b"\x01")
        raw.exchange(b"\x00\x02\xc3\x28", b"\x01")  # not UTF-8
        raw.exchange(bytes(16), b"\x07")  # REQBOX: NONEXISTBOX
    finally:
        raw.close()
    with pytest.raises(ValueError):
        daemon.client().create_box("bad name", "pw")  # the binding checks first


def test_shutdown_is_announced_to_connected_clients(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon()
    raw = daemon.raw()
    raw.exchange(b"\x08", b"\x08")
    daemon.thread.stop()
    try:
        assert raw.recv_exactly(1) == b"\x0b"  # SHUTDOWN
        assert raw.at_eof()
    finally:
        raw.close()


def test_admin_listing_counts_letters(daemon: Daemon) -> None:
    client = box(daemon, "count.me")
    for _ in range(3):
        client.send("count.me", b"abc")
    status = {s.name: s for s in daemon.thread.call(daemon.office.status)}
    assert status["count.me"].letters == 3 and status["count.me"].checked_out
    client.close()


def test_fuzzing_from_many_connections_leaves_the_daemon_serving(
    make_daemon: Callable[..., Daemon],
) -> None:
    daemon = make_daemon(comm_timeout_s=0.5, max_letter_bytes=4096, max_connections=64)
    good = box(daemon, "good.one")
    good.send("good.one", b"before")
    rng = random.Random(1234)
    streams = []
    for _ in range(24):
        # Random bytes, sometimes starting with a valid request so deeper states are hit.
        prefix = rng.choice([b"", b"\x02", b"\x00", b"\x04", b"\x05", b"\x02\x00\x03f.z"])
        streams.append(prefix + rng.randbytes(rng.randint(0, 3000)))

    def hammer(data: bytes) -> None:
        try:
            with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as sock:
                view = memoryview(data)
                while view:
                    n = rng.randint(1, 700)
                    sock.sendall(view[:n])
                    view = view[n:]
                sock.shutdown(socket.SHUT_WR)
                sock.settimeout(5)
                while sock.recv(65536):
                    pass
        except OSError:
            pass  # the daemon may close on us: that is fine

    threads = [threading.Thread(target=hammer, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    daemon.wait_for(lambda: len(daemon.office.clerks) == 1, timeout=20)
    good.send("good.one", b"after")
    assert [x.payload for x in good.get_mail(0)] == [b"before", b"after"]
    with daemon.client() as fresh:
        fresh.create_box("fresh.one", "pw")
        fresh.check_out("fresh.one", "pw")
    good.close()


def test_closed_client_raises_connection_lost(daemon: Daemon) -> None:
    client = daemon.client()
    client.close()
    with pytest.raises(ConnectionLost):
        client.create_box("x.y", "pw")


def test_a_connection_that_failed_stays_failed(daemon: Daemon) -> None:
    """h11's rule: after ConnectionLost every call raises ConnectionLost, never a
    protocol-state complaint about the step the failure interrupted."""
    client = box(daemon, "lost.one")
    client.send("lost.one", b"kept")
    client.abort()
    with pytest.raises(ConnectionLost) as first:
        client.empty()
    for call in (
        client.empty,
        lambda: client.send("lost.one", b"x"),
        lambda: list(client.get_mail(0)),
        lambda: client.check_out("lost.one", "pw"),
        client.remove,
        client.return_box,
    ):
        with pytest.raises(ConnectionLost, match="lost") as later:
            call()
        assert str(first.value) in str(later.value)
    client.close()  # closing a failed client is quiet
    with daemon.client() as fresh:  # the daemon returned the box and kept its letter
        fresh.check_out("lost.one", "pw")
        assert [x.payload for x in fresh.get_mail(0)] == [b"kept"]


def test_negative_getmail_timeout_counts_as_zero(daemon: Daemon) -> None:
    box(daemon, "neg.t").close()
    raw = daemon.raw()
    try:
        raw.exchange(b"\x00", b"\x01")
        raw.exchange(b"\x00\x05neg.t", b"\x01")
        raw.exchange(password_digest("pw"), b"\x00")
        raw.exchange(b"\x05", b"\x01")
        raw.exchange(b"\xff\xff\xff\xff", b"\x05")  # -1 ms, nothing waiting: MAILTIMEOUT
    finally:
        raw.close()


def test_a_full_group_member_is_skipped_and_reported(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(max_letters_per_box=1, when_full="refuse")
    a, b = box(daemon, "crowd.a"), box(daemon, "crowd.b")
    a.send("crowd.b", b"fills b")
    a.send("crowd", b"to all")  # b is full: a still gets it
    assert [x.payload for x in a.get_mail(0)] == [b"to all"]
    assert [x.payload for x in b.get_mail(0)] == [b"fills b"]
    refused = [e for e in daemon.events if e.kind == "postoffice.letter_refused"]
    assert [e.name for e in refused] == ["crowd.b"]
    a.close()
    b.close()


def test_large_letters_cross_in_many_partial_reads(daemon: Daemon) -> None:
    client = box(daemon, "big.box")
    payload = random.Random(7).randbytes(5 * 1024 * 1024)
    client.send("big.box", payload)
    letters = list(client.get_mail(0))
    assert len(letters) == 1 and letters[0].payload == payload
    client.close()


def test_failure_records_are_forgotten_when_quiet_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bookkeeping alone (no loop needed): times are given.
    office = PostOffice(daemon_config(tmp_path, auth_forget_s=60.0))
    assert office.gate.failed("10.0.0.1", 0.0).count == 1
    assert office.gate.failed("10.0.0.1", 59.0).count == 2  # within the window
    assert office.gate.failed("10.0.0.1", 119.5).count == 1  # quiet for 60 s: forgotten
    # A host with connections still waiting out a back-off is never forgotten.
    office.gate.failures["10.0.0.1"].waiting = 1
    assert office.gate.failed("10.0.0.1", 500.0).count == 2
    office.gate.failures["10.0.0.1"].waiting = 0
    # Quiet hosts are dropped as others fail; at most MAX_FAILING_PEERS are kept,
    # the most recent ones.
    monkeypatch.setattr(auth_module, "MAX_FAILING_PEERS", 3)
    for n in range(6):
        office.gate.failed(f"10.0.1.{n}", 501.0 + n)
    assert list(office.gate.failures) == ["10.0.1.3", "10.0.1.4", "10.0.1.5"]
    office.gate.failed("10.0.2.1", 700.0)  # the others have been quiet for long
    assert list(office.gate.failures) == ["10.0.2.1"]
