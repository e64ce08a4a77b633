"""Password floods stay cheap for the daemon and invisible to other clients: attempts in
back-off are not hashed, scrypt runs on its own bounded pool, and the store's fsync on
threads of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest
from mailbus.postoffice import store as st
from mailbus.postoffice.client import Letter, NotAuthorized, PostOfficeClient
from mailbus.postoffice.protocol import ResponseCode
from mailbus.postoffice.store import password_digest

from .conftest import Daemon, Raw, wait_until


class CountingVerifier:
    """Stands in for store.verify_digest: counts calls and can hold them on an event."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()
        self.hold = False
        self.release = threading.Event()
        self.real = st.verify_digest

    def __call__(self, digest: bytes, stored: str) -> bool:
        with self.lock:
            self.calls += 1
        if self.hold:
            self.release.wait(30)
        return self.real(digest, stored)


@pytest.fixture
def verifier(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingVerifier]:
    counting = CountingVerifier()
    monkeypatch.setattr(st, "verify_digest", counting)
    yield counting
    counting.release.set()  # never leave a daemon thread held


def attempt(daemon: Daemon, name: str, password: str) -> Raw:
    """A REQBOX sent up to its password; the answer is left for the test to read."""
    raw = daemon.raw()
    raw.exchange(b"\x00", b"\x01")
    encoded = name.encode()
    raw.exchange(len(encoded).to_bytes(2, "big") + encoded, b"\x01")
    raw.send(password_digest(password))
    return raw


def waiting(daemon: Daemon) -> int:
    record = daemon.office.gate.failures.get("127.0.0.1")
    return 0 if record is None else int(record.waiting)


def test_attempts_while_the_host_is_in_back_off_are_not_hashed(
    make_daemon: Callable[..., Daemon], verifier: CountingVerifier
) -> None:
    daemon = make_daemon(auth_delay_s=5.0, auth_delay_max_s=5.0, auth_max_waiting=2)
    with daemon.client() as setup:
        setup.create_box("safe", "Right-Pa55")
    raws = [attempt(daemon, "safe", "Wrong-Pa55")]
    try:
        daemon.wait_for(lambda: waiting(daemon) == 1)  # hashed, wrong: a 5 s back-off
        assert verifier.calls == 1
        raws.append(attempt(daemon, "safe", "Wrong-Pa55"))
        daemon.wait_for(lambda: waiting(daemon) == 2)  # waits for the back-off to end
        for _ in range(5):  # the host is crowded: refused and closed, never hashed
            raw = attempt(daemon, "safe", "Wrong-Pa55")
            raws.append(raw)
            assert raw.recv_exactly(1) == bytes((ResponseCode.NOAUTH,))
            assert raw.at_eof()
        assert verifier.calls == 1
        refused = [e for e in daemon.events if e.kind == "postoffice.auth_refused"]
        assert len(refused) == 5 and all("Pa55" not in repr(e) for e in refused)
        # The owner, whose password the daemon has seen, is granted without hashing.
        with PostOfficeClient("127.0.0.1", daemon.port, timeout=3.0) as owner:
            owner.check_out("safe", "Right-Pa55")
        assert verifier.calls == 1
    finally:
        for raw in raws:
            raw.close()


def test_an_owner_not_seen_yet_is_checked_after_the_back_off(
    make_daemon: Callable[..., Daemon], verifier: CountingVerifier
) -> None:
    daemon = make_daemon(auth_delay_s=0.5, auth_delay_max_s=0.5)
    with daemon.client() as setup:
        setup.create_box("fresh", "Right-Pa55")

    def forget() -> None:  # as after a restart: the password was never checked
        daemon.office.boxes["fresh"].known = b""

    daemon.thread.call(forget)
    with daemon.client() as attacker, pytest.raises(NotAuthorized):
        attacker.check_out("fresh", "Wrong-Pa55")
    with PostOfficeClient("127.0.0.1", daemon.port, timeout=10.0) as owner:
        owner.check_out("fresh", "Right-Pa55")
        assert owner.box == "fresh"
    assert verifier.calls == 2  # both were hashed: the attacker's and the owner's


def test_sends_are_acknowledged_while_password_checks_are_stuck(
    make_daemon: Callable[..., Daemon], verifier: CountingVerifier
) -> None:
    daemon = make_daemon(hash_workers=1, hash_queue=1, sync="full")
    with daemon.client() as setup:
        setup.create_box("busy.box", "Right-Pa55")
    sender = daemon.client()
    sender.create_box("calm.sender", "pw")
    sender.check_out("calm.sender", "pw")
    loop_release = threading.Event()
    raws: list[Raw] = []
    try:
        # Every scrypt check now hangs, and the loop's default executor is full of
        # blocked jobs too: the store's fsync must need neither.
        verifier.hold = True

        def fill_default_executor() -> None:
            loop = asyncio.get_running_loop()
            for _ in range(64):
                loop.run_in_executor(None, loop_release.wait, 30)

        daemon.thread.call(fill_default_executor)
        raws = [attempt(daemon, "busy.box", f"Wrong-{n}") for n in range(2)]
        daemon.wait_for(lambda: daemon.office.gate.hasher.in_hand == 2)  # running + queued
        wait_until(lambda: verifier.calls == 1)
        # Beyond the pool's queue: refused at once, not queued, not hashed.
        extra = attempt(daemon, "busy.box", "Wrong-x")
        raws.append(extra)
        assert extra.recv_exactly(1) == bytes((ResponseCode.NOAUTH,))
        assert daemon.thread.call(lambda: daemon.office.gate.hasher.refused) == 1
        # A well-behaved client is served meanwhile: acknowledged (fsynced) sends.
        for n in range(3):
            sender.send("calm.sender", f"letter {n}".encode())
        assert list(sender.get_mail(0)) == [
            Letter("calm.sender", f"letter {n}".encode()) for n in range(3)
        ]
        assert verifier.calls == 1
        verifier.release.set()
        for raw in raws[:2]:  # the held checks finish in the end
            assert raw.recv_exactly(1) == bytes((ResponseCode.NOAUTH,))
    finally:
        verifier.release.set()
        loop_release.set()
        for raw in raws:
            raw.close()
        sender.close()


def test_createbox_while_hashing_is_saturated_is_refused_as_errata_allows(
    make_daemon: Callable[..., Daemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real = st.hash_digest

    def held(digest: bytes, params: st.HashParams) -> str:
        release.wait(30)
        return real(digest, params)

    monkeypatch.setattr(st, "hash_digest", held)
    daemon = make_daemon(hash_workers=1, hash_queue=0)
    first = daemon.raw()
    second = daemon.raw()
    try:
        first.exchange(b"\x02", b"\x01")
        first.exchange(b"\x00\x05a.one", b"\x01")
        first.send(password_digest("pw"))  # its hash holds the only thread
        daemon.wait_for(lambda: daemon.office.gate.hasher.in_hand == 1)
        second.exchange(b"\x02", b"\x01")
        second.exchange(b"\x00\x05a.two", b"\x01")
        second.exchange(password_digest("pw"), bytes((ResponseCode.BOXEXISTS,)))
        refused = [e for e in daemon.events if e.kind == "postoffice.box_refused"]
        assert [(e.name, e.detail) for e in refused] == [("a.two", "password hashing busy")]
        release.set()
        assert first.recv_exactly(1) == bytes((ResponseCode.REQGRANTED,))
    finally:
        release.set()
        first.close()
        second.close()
    assert daemon.thread.call(lambda: sorted(daemon.office.boxes)) == ["a.one"]
