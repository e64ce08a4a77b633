"""GIDs: version-4 UUIDs as 32 hex digits, never repeated, across pool refills and
threads."""

from __future__ import annotations

import threading
import uuid

from mailbus.gid import new_gid


def test_gids_are_version_4_uuids_and_never_repeat_across_refills_and_threads() -> None:
    gids: list[str] = []
    lock = threading.Lock()

    def draw() -> None:
        mine = [new_gid() for _ in range(3_000)]  # many pool refills in each thread
        with lock:
            gids.extend(mine)

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(gids) == 12_000
    assert len(set(gids)) == len(gids)
    for gid in gids[:500]:
        assert len(gid) == 32 and int(gid, 16) >= 0
        parsed = uuid.UUID(hex=gid)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
