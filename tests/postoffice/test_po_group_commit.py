"""--sync full with real concurrent clients: the commits of letters sent while an fsync
runs share the next fsync (group commit), and no client hears REQGRANTED for a letter
before an fsync that started after that letter's commit has returned.

The store's fsync is held at its first call until every sender's letter is committed,
so the grouping does not depend on how fast this machine's disk is."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import pytest
from mailbus.postoffice import store as st

from .conftest import Daemon, wait_until

SENDERS = 8


def test_concurrent_letters_share_one_fsync_and_each_is_granted_after_it(
    make_daemon: Callable[..., Daemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = make_daemon(sync="full")
    office = daemon.office
    store, committer = office.store, office.committer
    lock = threading.Lock()
    in_batch: list[bytes] = []
    committed: dict[bytes, int] = {}  # letter -> the batch (store.batches) it committed in
    durable = [0]  # every batch up to this one has been fsynced
    armed = threading.Event()  # set once the boxes exist: hold the next fsync
    hold = threading.Event()
    held = threading.Event()
    group_sync = committer.group_sync
    real_op, real_run, real_sync = st.op_add_letter, store.run_batch, group_sync.sync

    def op_add_letter(box_ids: list[int], sender: str, payload: bytes) -> Any:
        operation = real_op(box_ids, sender, payload)

        def run(conn: sqlite3.Connection) -> Any:
            in_batch.append(payload)
            return operation(conn)

        return run

    def run_batch(operations: list[Any]) -> list[Any]:  # on the daemon's loop
        in_batch.clear()
        results = real_run(operations)
        with lock:
            for payload in in_batch:
                committed[payload] = store.batches
        return results

    def sync_wal() -> None:  # on the committer's executor, for acknowledgments only
        covers = store.batches  # committed before this fsync starts: it covers them
        if armed.is_set() and not held.is_set():
            held.set()
            assert hold.wait(30), "the test never released the first fsync"
        real_sync()
        with lock:
            durable[0] = max(durable[0], covers)

    monkeypatch.setattr(st, "op_add_letter", op_add_letter)
    monkeypatch.setattr(store, "run_batch", run_batch)
    monkeypatch.setattr(group_sync, "sync", sync_wal)

    receiver = daemon.client()
    receiver.create_box("gc.inbox", "pw")
    clients = []
    for i in range(SENDERS):
        client = daemon.client()
        client.create_box(f"gc.s{i}", "pw")
        client.check_out(f"gc.s{i}", "pw")
        clients.append(client)
    rounds_before = daemon.thread.call(lambda: group_sync.rounds)
    granted: dict[bytes, tuple[int, int]] = {}  # letter -> (its batch, durable at grant)
    errors: list[BaseException] = []

    def send(i: int) -> None:
        payload = f"letter {i}".encode()
        try:
            clients[i].send("gc.inbox", payload)  # returns on REQGRANTED
            with lock:
                granted[payload] = (committed[payload], durable[0])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(SENDERS)]
    armed.set()
    first, others = threads[0], threads[1:]
    try:
        # The first letter's fsync starts and is held before the others are sent (sent
        # together, all of them could commit before that fsync starts, under load, and
        # share it: one fsync, not the two this test is about).
        first.start()
        wait_until(held.is_set, 20.0)
        for thread in others:
            thread.start()
        # Every other letter commits meanwhile, and nobody is answered yet.
        wait_until(lambda: len(committed) == SENDERS, 20.0)
        assert granted == {}
    finally:
        hold.set()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert len(granted) == SENDERS
    for payload, (batch, synced) in granted.items():
        assert batch <= synced, f"{payload!r} granted before the fsync covering it"
    # Two fsyncs for eight letters: the held one and the one all the others shared.
    rounds = daemon.thread.call(lambda: group_sync.rounds) - rounds_before
    assert rounds == 2
    receiver.check_out("gc.inbox", "pw")
    got = sorted(letter.payload for letter in receiver.get_mail(0))
    assert got == sorted(f"letter {i}".encode() for i in range(SENDERS))
    for client in [*clients, receiver]:
        client.close()
