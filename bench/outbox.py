"""Outbox benchmark: enqueue-to-done cycles per second, with every fsync, beside a floor
measured in the same run: writing, fsyncing and deleting the same three files
(contents, metadata, schedule) with no queue logic.

One cycle = enqueue a mail (contents + one destination), commit, then the scheduler
sends it (send_start, read, a no-op deliver, send_done, cleanup). Queue and floor run
in short alternating rounds so that the machine's noise hits both alike; the rates are
total cycles over total time, and `ratio` is the median of the rounds' paired ratios.

    python -m bench.outbox [--quick] [--dir DIR]

The last stdout line is JSON: cycles_per_s, floor_cycles_per_s, ratio (BENCH.md), plus
ratio_of_totals and the fsyncs per cycle of each. The queue's fsyncs are counted over
2 x CHECKPOINT_RECORDS cycles and a close, so the journal's checkpoints are included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mailbus.email_message import Email, to_bytes
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.journaled import CHECKPOINT_RECORDS
from mailbus.outbox.scheduler import Scheduler
from mailbus.outbox.storage import Destination, Entry, Metadata, Schedule

CONTENTS = to_bytes(
    Email(
        subject="sensors/temperature",
        body='{"sensor": "t1", "celsius": 21.503, "t": 12.5}',
        sender="robot@example.org",
        to=("observer@example.org",),
        headers={"Source-Timestamp": "1700000000000000000", "Publisher-GID": "ab" * 12},
    )
)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def queue_cycles(directory: Path, cycles: int, *, close: bool = False) -> float:
    storage = FsStorage(directory)
    delivered: list[int] = []

    def deliver(entry: Entry, data: bytes) -> None:
        delivered.append(len(data))

    scheduler = Scheduler(storage, deliver)
    start = time.perf_counter()
    for i in range(cycles):
        now = time.time_ns()
        metadata = Metadata(
            f"<bench{i}@x>", "robot@example.org", ("observer@example.org",), "s", len(CONTENTS), now
        )
        enqueuer = storage.enqueue()
        enqueuer.write(CONTENTS)
        scheduler.add(enqueuer.commit([Destination(metadata, Schedule(0, now, 0, ""))]))
        scheduler.run_due()
    if close:
        storage.checkpoint()
    elapsed = time.perf_counter() - start
    if len(delivered) != cycles or os.listdir(storage.data):
        raise RuntimeError("queue run did not deliver and clean up every mail")
    return cycles / elapsed


def floor_cycles(directory: Path, cycles: int) -> float:
    directory.mkdir(parents=True, exist_ok=True)
    now = time.time_ns()
    metadata = Metadata(
        "<bench@x>", "robot@example.org", ("observer@example.org",), "s", len(CONTENTS), now
    ).to_json()
    schedule = Schedule(0, now, 0, "").to_json()
    files = (("contents", CONTENTS), ("metadata", metadata), ("schedule", schedule))
    start = time.perf_counter()
    for _ in range(cycles):
        for name, data in files:
            fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
        for name, _ in files:
            os.unlink(directory / name)
    elapsed = time.perf_counter() - start
    return cycles / elapsed


def fsyncs_per_cycle(directory: Path) -> float:
    """Count fsync and fdatasync calls (of any module) over enough queue cycles to include
    the journal's checkpoints, and the checkpoint a close does."""
    real_fsync, real_fdatasync = os.fsync, os.fdatasync
    count = 0

    def counting(real: Callable[[int], None]) -> Callable[[int], None]:
        def call(fd: int) -> None:
            nonlocal count
            count += 1
            real(fd)

        return call

    cycles = 2 * CHECKPOINT_RECORDS  # two records (enqueued, gone) a cycle
    os.fsync, os.fdatasync = counting(real_fsync), counting(real_fdatasync)
    try:
        queue_cycles(directory, cycles, close=True)
    finally:
        os.fsync, os.fdatasync = real_fsync, real_fdatasync
    return count / cycles


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer cycles (a few seconds)")
    parser.add_argument("--dir", help="where to run (default: a temporary directory)")
    args = parser.parse_args()
    cycles, rounds = (50, 8) if args.quick else (50, 40)
    base = Path(tempfile.mkdtemp(prefix="bench-outbox-", dir=args.dir))
    try:
        progress(f"outbox benchmark in {base}: {rounds} rounds of {cycles} cycles each")
        queue_cycles(base / "warm-queue", 20)
        floor_cycles(base / "warm-floor", 20)
        queue_rates: list[float] = []
        floor_rates: list[float] = []
        for r in range(rounds):
            # Short alternating rounds: each pair sees about the same disk load.
            queue_rates.append(queue_cycles(base / f"queue{r}", cycles))
            floor_rates.append(floor_cycles(base / f"floor{r}", cycles))
            if r % 5 == 4 or r == rounds - 1:
                progress(
                    f"round {r + 1}: queue {queue_rates[-1]:.0f} cycles/s, "
                    f"floor {floor_rates[-1]:.0f} cycles/s"
                )
        queue_fsyncs = fsyncs_per_cycle(base / "count")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    pair_ratios = [q / f for q, f in zip(queue_rates, floor_rates, strict=True)]
    # Harmonic means: total cycles over total time.
    cycles_per_s = statistics.harmonic_mean(queue_rates)
    floor_per_s = statistics.harmonic_mean(floor_rates)
    result = {
        "cycles_per_s": round(cycles_per_s, 1),
        "floor_cycles_per_s": round(floor_per_s, 1),
        # The median of the paired rounds' ratios: robust to the load drifting.
        "ratio": round(statistics.median(pair_ratios), 3),
        "ratio_of_totals": round(cycles_per_s / floor_per_s, 3),
        "queue_fsyncs_per_cycle": queue_fsyncs,
        "floor_fsyncs_per_cycle": 3,
        "contents_bytes": len(CONTENTS),
        "cycles_per_round": cycles,
        "rounds": rounds,
    }
    progress(f"ratio {result['ratio']} (target >= 0.5)")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
