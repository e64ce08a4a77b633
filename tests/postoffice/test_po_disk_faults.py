"""The daemon (a real process) when its disk misbehaves or its traffic never stops: the
store's WAL stays bounded under steady traffic; a small tmpfs that fills up is refused
early, with a reserve, and recovers by itself once letters are taken; a store made
read-only by ext4's own error path gets a one-line error at start-up. Mounting needs
root and a loop device: those tests skip with the reason otherwise."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from disk_faults import Ext4, ext4, tmpfs
from mailbus.postoffice.admin import store_info
from mailbus.postoffice.client import BoxExists, DeliveryFailed, PostOfficeClient
from mailbus.postoffice.store import StoreError
from waiting import eventually

from .conftest import REPO, TEST_HASH, Daemon, DaemonProcess

MB = 1024 * 1024


def _wal_peak_while(store: Path, work: Callable[[], None]) -> int:
    """The largest size of the store's WAL, sampled every 10 ms while `work` runs."""
    wal = Path(str(store) + "-wal")
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.01):
            with contextlib.suppress(OSError):
                peak = max(peak, wal.stat().st_size)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        work()
    finally:
        done.set()
        sampler.join()
    return peak


@pytest.mark.slow
def test_the_wal_stays_bounded_under_steady_traffic(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    """8 senders and 2 receivers that never pause: without a checkpoint that can
    finish, every commit would stay in the WAL (30 to 60 MB here)."""
    store = tmp_path / "steady" / "po.db"
    daemon = spawn_daemon("--sync", "normal", store=store)
    per_sender, senders, receivers = 2000, 8, 2
    with daemon.client() as admin:
        for i in range(receivers):
            admin.create_box(f"steady.r{i}", "pw")
        for i in range(senders):
            admin.create_box(f"steady.s{i}", "pw")
    errors: list[BaseException] = []

    def send(i: int) -> None:
        try:
            with daemon.client() as client:
                client.check_out(f"steady.s{i}", "pw")
                for _ in range(per_sender):
                    client.send(f"steady.r{i % receivers}", b"x" * 100)
        except BaseException as exc:
            errors.append(exc)

    def receive(i: int) -> None:
        expected = per_sender * senders // receivers
        got = 0
        try:
            with daemon.client() as client:
                client.check_out(f"steady.r{i}", "pw")
                while got < expected:
                    for _ in client.get_mail(30.0):
                        got += 1
                        if got == expected:
                            break
        except BaseException as exc:
            errors.append(exc)

    def traffic() -> None:
        threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
        threads += [threading.Thread(target=receive, args=(i,)) for i in range(receivers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert not any(t.is_alive() for t in threads), "traffic did not finish"

    peak = _wal_peak_while(store, traffic)
    assert errors == []
    assert peak < 16 * MB, f"the WAL grew to {peak / MB:.1f} MB"
    assert daemon.terminate() == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "small", "40m") as mounted:
        yield mounted


def _fill(client: PostOfficeClient, to: str, payload: bytes) -> int:
    """Send until the daemon refuses (DELFAIL); how many letters it took."""
    for accepted in range(2000):  # 40 MB hold about 600 of 64 KB
        if not _sent(client, to, payload):
            return accepted
    raise AssertionError("2000 letters of 64 KB taken on a 40 MB disk")


def _sent(client: PostOfficeClient, to: str, payload: bytes) -> bool:
    try:
        client.send(to, payload)
    except DeliveryFailed:
        return False
    return True


def _free(path: Path) -> int:
    disk = os.statvfs(path)
    return disk.f_bavail * disk.f_frsize


def test_a_full_disk_is_refused_early_and_recovers_once_letters_are_taken(
    small_disk: Path, spawn_daemon: Callable[..., DaemonProcess]
) -> None:
    store = small_disk / "po.db"
    daemon = spawn_daemon("--reserve-mb", "8", store=store)
    payload = b"y" * (64 * 1024)
    sender, receiver = daemon.client(), daemon.client()
    sender.create_box("full.s", "pw")
    sender.create_box("full.r", "pw")
    sender.check_out("full.s", "pw")
    receiver.check_out("full.r", "pw")
    accepted = _fill(sender, "full.r", payload)
    assert accepted > 100
    # Refused with room to spare: what deletes and checkpoints need.
    assert _free(small_disk) > 4 * MB
    # A new box is refused with the protocol's answer, not a dropped connection. (A
    # checkpoint that ends meanwhile may give back room: then fill again.)
    for attempt in range(20):
        try:
            sender.create_box(f"full.more{attempt}", "pw")
        except BoxExists:
            break
        accepted += _fill(sender, "full.r", payload)
    else:
        raise AssertionError("CREATEBOX was never refused on a full disk")
    with pytest.raises(DeliveryFailed):  # the connection is still usable
        sender.send("full.r", payload)

    taken = 0
    for _letter in receiver.get_mail(0):
        taken += 1
    assert taken == accepted
    # Space comes back by itself (the deletes commit within FORGET_DELAY_S): letters
    # are taken again, on the same connections.
    eventually(lambda: _sent(sender, "full.r", payload), 10, "a letter taken again")
    for _ in range(19):
        sender.send("full.r", payload)
    assert len(list(receiver.get_mail(0))) == 20
    sender.close()
    receiver.close()
    assert daemon.terminate() == 0
    assert daemon.proc.stderr is not None
    stderr = daemon.proc.stderr.read().decode()
    assert "Traceback" not in stderr
    assert "down to the reserve" in stderr


def test_boxes_reports_the_size_of_the_store(
    spawn_daemon: Callable[..., DaemonProcess], tmp_path: Path
) -> None:
    store = tmp_path / "sized" / "po.db"
    daemon = spawn_daemon(store=store)
    with daemon.client() as client:
        client.create_box("sized.box", "pw")
        client.check_out("sized.box", "pw")
        for _ in range(50):
            client.send("sized.box", b"z" * 20_000)
    listed = _mailbus("postoffice", "boxes", "--store", str(store))
    assert listed.returncode == 0, listed.stderr
    line = [row for row in listed.stdout.splitlines() if row.startswith("store: ")]
    assert len(line) == 1, listed.stdout
    on_disk = float(line[0].split()[1])  # "store: 1.2 MB on disk (...)"
    assert on_disk >= 0.9  # 50 letters of 20 KB, in the database or the WAL
    # The admin view: the same sizes, and the running daemon says it takes letters.
    info = store_info(store)
    assert info.database_bytes + info.wal_bytes >= 0.9 * MB
    assert info.full is False
    assert daemon.terminate() == 0


def _mailbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailbus", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[Ext4]:
    with ext4(tmp_path) as mounted:
        yield mounted


def test_a_read_only_store_gets_a_one_line_error_at_start_up(
    fs: Ext4, spawn_daemon: Callable[..., DaemonProcess]
) -> None:
    # fs first: it is unmounted after spawn_daemon has stopped the daemon.
    store = fs.mount_point / "po" / "po.db"
    daemon = spawn_daemon("--reserve-mb", "1", store=store)  # a 32 MB file system
    with daemon.client() as client:
        client.create_box("ro.box", "pw")
    assert daemon.terminate() == 0
    fs.trigger_error()
    hash_cost = str(TEST_HASH.log2_n)
    started = _mailbus(
        "postoffice", "serve", "--port", "0", "--store", str(store), "--hash-cost", hash_cost
    )
    assert started.returncode == 1
    lines = started.stderr.strip().splitlines()
    assert len(lines) == 1, started.stderr
    assert lines[0].startswith("error: ")
    assert "read-only" in lines[0] and str(store) in lines[0] and "remount" in lines[0]
    assert "cannot listen" not in lines[0]


def test_a_client_sees_the_store_full_and_its_box_survives(
    small_disk: Path, spawn_daemon: Callable[..., DaemonProcess]
) -> None:
    """After the daemon stops on a full disk, it starts again on the same store and
    every letter acknowledged before is there."""
    store = small_disk / "po.db"
    daemon = spawn_daemon("--reserve-mb", "8", store=store)
    payload = b"w" * (64 * 1024)
    with daemon.client() as client:
        client.create_box("keep.box", "pw")
        client.check_out("keep.box", "pw")
        accepted = _fill(client, "keep.box", payload)
    assert daemon.terminate() == 0
    again = spawn_daemon("--reserve-mb", "8", store=store)
    with PostOfficeClient("127.0.0.1", again.port, timeout=30.0) as client:
        client.check_out("keep.box", "pw")
        assert len(list(client.get_mail(0))) == accepted
    assert again.terminate() == 0


def test_a_disk_filled_by_another_program_gets_protocol_answers(
    small_disk: Path, spawn_daemon: Callable[..., DaemonProcess]
) -> None:
    """No reserve, and another file takes every free byte: CREATEBOX and SENDLETTER
    are answered (BOXEXISTS, DELFAIL) on a connection that stays usable, one log line
    each and no traceback; once that file is gone, letters are taken again."""
    store = small_disk / "po.db"
    daemon = spawn_daemon("--reserve-mb", "0", store=store)
    client = daemon.client()
    client.create_box("other.box", "pw")
    client.check_out("other.box", "pw")
    client.send("other.box", b"before")
    filler = small_disk / "filler"
    with filler.open("wb") as f:
        chunk = b"\0" * (1024 * 1024)
        with contextlib.suppress(OSError):  # ENOSPC: the disk is full
            while True:
                f.write(chunk)
                f.flush()
    payload = b"v" * (256 * 1024)  # more than any page SQLite has spare
    for attempt in range(3):
        with pytest.raises(BoxExists):
            client.create_box(f"other.more{attempt}", "pw")
        with pytest.raises(DeliveryFailed):
            client.send("other.box", payload)
    filler.unlink()
    eventually(lambda: _sent(client, "other.box", payload), 10, "a letter taken again")
    assert [letter.payload for letter in client.get_mail(0)] == [b"before", payload]
    client.close()
    assert daemon.terminate() == 0
    assert daemon.proc.stderr is not None
    assert "Traceback" not in daemon.proc.stderr.read().decode()


def test_a_letter_whose_fsync_failed_is_not_granted(
    make_daemon: Callable[..., Daemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--sync full: when the fsync meant to make a letter durable fails (EIO from a
    failing disk: injected here, a loop device cannot fail on demand), the sender hears
    DELFAIL, not REQGRANTED. The letter was committed, so it is still delivered: a
    sender that tries again makes a duplicate, never a loss."""
    daemon = make_daemon(sync="full")
    group_sync = daemon.office.committer.group_sync
    real_sync = group_sync.sync
    failures = [1]

    def failing_sync() -> None:
        if failures[0] > 0:
            failures[0] -= 1
            raise StoreError("cannot fsync postoffice.db-wal: [Errno 5] Input/output error")
        real_sync()

    client = daemon.client()
    client.create_box("eio.box", "pw")
    client.check_out("eio.box", "pw")
    monkeypatch.setattr(group_sync, "sync", failing_sync)
    with pytest.raises(DeliveryFailed):
        client.send("eio.box", b"not durable")
    client.send("eio.box", b"durable")  # the next fsync works: granted
    assert [letter.payload for letter in client.get_mail(0)] == [b"not durable", b"durable"]
    client.close()
