"""Load: 50 clients exchanging letters through a daemon process; every letter delivered
exactly once, in order per sender.

The full size is 20,000 letters. MAILBUS_PO_LOAD_LETTERS sets another total (the test
scales the letters per client; the client count stays 50).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from .conftest import DaemonProcess

CLIENTS = 50
LETTERS = int(os.environ.get("MAILBUS_PO_LOAD_LETTERS", "20000"))


@pytest.mark.slow
def test_fifty_clients_every_letter_once_in_order(
    spawn_daemon: Callable[..., DaemonProcess],
) -> None:
    daemon = spawn_daemon()
    per_client = LETTERS // CLIENTS
    rng = random.Random(5)
    names = [f"load.c{i:02d}" for i in range(CLIENTS)]
    plans = [[rng.randrange(CLIENTS) for _ in range(per_client)] for _ in range(CLIENTS)]
    expected = [0] * CLIENTS
    for plan in plans:
        for target in plan:
            expected[target] += 1
    received: list[list[tuple[int, int]]] = [[] for _ in range(CLIENTS)]
    errors: list[BaseException] = []
    ready = threading.Barrier(CLIENTS, timeout=60)

    def run(index: int) -> None:
        try:
            client = daemon.client()
            client.create_box(names[index], "pw")
            client.check_out(names[index], "pw")
            ready.wait()
            mine = received[index]

            def drain(wait: float) -> None:
                for letter in client.get_mail(wait):
                    sender, seq = letter.payload.split(b":")
                    assert letter.sender == names[int(sender)]
                    mine.append((int(sender), int(seq)))
                    if wait and len(mine) >= expected[index]:
                        break

            for seq, target in enumerate(plans[index]):
                client.send(names[target], f"{index}:{seq}".encode())
                if seq % 25 == 24:
                    drain(0)
            deadline = time.monotonic() + 120
            while len(mine) < expected[index] and time.monotonic() < deadline:
                drain(1.0)
            client.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert not errors, errors[:3]
    assert not any(t.is_alive() for t in threads)
    total = 0
    for index, letters in enumerate(received):
        assert len(letters) == expected[index]
        assert len(set(letters)) == len(letters)  # once each
        by_sender: dict[int, list[int]] = defaultdict(list)
        for sender, seq in letters:
            by_sender[sender].append(seq)
        for sender, seqs in by_sender.items():
            assert seqs == sorted(seqs), f"{names[index]} got {names[sender]}'s out of order"
            assert seqs == [s for s, t in enumerate(plans[sender]) if t == index]
        total += len(letters)
    assert total == per_client * CLIENTS
