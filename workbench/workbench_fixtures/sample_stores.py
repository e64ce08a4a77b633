"""Stores the screenshot scenes read, written by the real code with fixed ids and at
the frozen clock's times: an outbox, a PostOffice store, a broker."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailbus.broker import Broker


def fixed_ids(seed: int = 0x5EED) -> Callable[[], str]:
    """A stand-in for the outbox's uuid4 ids: the same sequence of valid ids each run."""
    rng = random.Random(seed)
    return lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))


def sample_outbox(directory: Path) -> Path:
    """An outbox with a queued, a retried and a dead mail, at the fixed clock's times and
    with fixed ids (the real storage code writes it; only its id source is replaced)."""
    from unittest import mock

    from mailbus.outbox.fs_storage import FsStorage
    from mailbus.outbox.storage import Destination, Metadata, Schedule

    from workbench_fixtures.clock import T0

    with mock.patch("mailbus.outbox.fs_storage.new_id", fixed_ids()):
        storage = FsStorage(directory)
        rows = [
            ("sensors/temperature", "ops@example.org", 0, 0, ""),
            ("demo/add", "lab@example.org", 3, 45, "SMTP 451 try again later"),
            ("robot/log", "archive@example.net", 30, 0, "SMTP 550 mailbox unavailable"),
        ]
        entries = []
        for n, (subject, to, attempts, due_s, error) in enumerate(rows):
            data = f"Message-ID: <out{n}@localhost>\r\nSubject: {subject}\r\n\r\nbody\r\n".encode()
            enqueuer = storage.enqueue()
            enqueuer.write(data)
            created = int((T0 - 3600 * n - 42) * 1e9)
            meta = Metadata(
                f"<out{n}@localhost>", "mailbus@localhost", (to,), subject, len(data), created
            )
            due = int((T0 + 12 + due_s) * 1e9)
            (entry,) = enqueuer.commit([Destination(meta, Schedule(attempts, due, 0, error))])
            entries.append(entry)
        storage.dead_letter(storage.send_start(entries[2]))
    return directory


# Mailbox name, (created, seconds before T0), letters (sender, payload).
SAMPLE_MAILBOXES: list[tuple[str, float, list[tuple[str, bytes]]]] = [
    ("lab", 86_400 * 3 + 125, [("planner", b'{"cmd": "move", "to": [1, 2]}')] * 4),
    ("ops", 86_400 * 12 + 3_600, [("sensors", b"temperature high: 31.5 C" * 40)] * 17),
    ("archive", 3_600 * 5 + 17, []),
    ("robot-arm", 600, [("lab", b"x" * 70_000), ("planner", b"stop")]),
]


def sample_postoffice(path: Path) -> Path:
    """A PostOffice store written by the real store code: four mailboxes (one empty),
    created and filled at fixed times before the frozen clock's start."""
    from mailbus.postoffice.store import (
        HashParams,
        Store,
        hash_digest,
        op_add_letter,
        op_create_box,
        password_digest,
    )

    from workbench_fixtures.clock import T0

    store = Store(path, sync="normal")
    try:
        # Never checked here: the cheapest scrypt cost keeps set-up fast.
        secret = hash_digest(password_digest("sample"), HashParams(log2_n=2))
        ids = store.run_batch([op_create_box(name, secret) for name, _, _ in SAMPLE_MAILBOXES])
        store.run_batch(
            [
                op_add_letter([box_id], sender, payload)
                for box_id, (_, _, letters) in zip(ids, SAMPLE_MAILBOXES, strict=True)
                for sender, payload in letters
            ]
        )

        # The store stamps the wall clock; the picture needs the fixed one.
        def stamp(conn: Any) -> None:
            for box_id, (_, before, _) in zip(ids, SAMPLE_MAILBOXES, strict=True):
                created = round((T0 - before) * 1e9)
                conn.execute("UPDATE boxes SET created_ns = ? WHERE id = ?", (created, box_id))
                conn.execute(
                    "UPDATE letters SET received_ns = ? WHERE box_id = ?", (created, box_id)
                )

        store.run_batch([stamp])
    finally:
        store.close()
    return path


def sample_broker() -> tuple[Broker, Any]:
    """A broker whose slow sink holds its queue, so that depths show; returned once
    every count is still (the held sink keeps the rest queued)."""
    import threading

    from mailbus.broker import Broker, BrokerMessage

    class Held:
        def __init__(self) -> None:
            self.release = threading.Event()
            self.entered = threading.Event()

        def receive(self, message: BrokerMessage) -> None:
            self.entered.set()
            self.release.wait(60)

        def destroy(self) -> None:
            self.release.set()

    class Quiet:
        def receive(self, message: BrokerMessage) -> None:
            pass

        def destroy(self) -> None:
            pass

    published = 38
    broker = Broker.create()
    sensor, held = Quiet(), Held()
    broker.add_module("from robot/pose", sensor)
    broker.add_module("archive", held, capacity=100)
    broker.add_module("tally", Quiet(), capacity=1000)
    broker.add_link("*", "tally")
    broker.add_link("from robot/pose", "archive")
    for i in range(published):
        broker.publish(sensor, BrokerMessage(f"pose {i}"))
        if i == 0:
            held.entered.wait(10)
    # The tally's worker drains its queue on its own thread: wait until it has, so
    # that no count moves while the picture is taken. Bounded.
    deadline = time.monotonic() + 10
    while True:
        stats = {m.name: m for m in broker.snapshot().modules}
        tally, archive = stats["tally"], stats["archive"]
        if (
            tally.delivered == published
            and tally.queue_depth == 0
            and archive.queue_depth == published - 1
        ):
            break
        if time.monotonic() > deadline:
            close_broker(broker, held)
            raise TimeoutError(f"the sample broker did not settle: {stats}")
        time.sleep(0.005)  # polling the worker's counters, not waiting for a time
    return broker, held


def close_broker(broker: Broker, held: Any) -> None:
    held.release.set()
    for name in ("from robot/pose", "archive", "tally"):
        broker.remove_module(name, timeout=5)
    broker.dec_ref()
