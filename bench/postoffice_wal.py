"""How big the PostOffice store's WAL gets under steady traffic that never stops.

    python -m bench.postoffice_wal [--letters N] [--sync normal|full|both]

8 sender processes push small letters to 2 receiver processes (4 senders each) through
a `mailbus postoffice serve` daemon, without a pause, until N letters (100,000 by
default) have gone all the way; a thread samples the size of `<store>-wal` every 20 ms.
SQLite recycles its WAL only after a checkpoint that copied all of it while nothing
was written, which steady traffic never allows by itself: the daemon's committer holds
its commits for one RESTART checkpoint once the WAL passes store.WAL_RESTART_BYTES.

Keys of the last stdout line (JSON): `wal_peak_mb` (the largest of the modes run; the
bar is 32), `wal_peak_mb_<mode>`, `store_mb_<mode>` (database + WAL at the end, before
the daemon stops), `letters_per_s_<mode>`, `daemon_cpu_us_per_letter_<mode>` (the
daemon's user + system CPU time over the letters: steadier than letters/s on a shared
machine), `letters`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.postoffice import log, po_prepare, po_receiver, po_sender, start_postoffice, stop

SENDERS = 8
RECEIVERS = 2
MB = 1024 * 1024


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (less swayed by the machine's load
    than letters per second)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(sync: str, letters: int) -> dict[str, float]:
    per_sender = letters // SENDERS
    with tempfile.TemporaryDirectory(prefix="po-wal-") as tmp:
        store = Path(tmp) / "po.db"
        wal = Path(str(store) + "-wal")
        proc, port = start_postoffice(store, sync)
        try:
            names = [f"bench.r{i}" for i in range(RECEIVERS)]
            po_prepare(port)(names)
            ctx = mp.get_context("fork")
            go = ctx.Event()
            out: Any = ctx.Queue()
            per_receiver = per_sender * SENDERS // RECEIVERS
            procs = [
                ctx.Process(target=po_receiver, args=(port, n, per_receiver, go, out))
                for n in names
            ]
            procs += [
                ctx.Process(
                    target=po_sender, args=(port, i, names[i % RECEIVERS], per_sender, go, out)
                )
                for i in range(SENDERS)
            ]
            for p in procs:
                p.start()
            peak = 0
            stop_sampling = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not stop_sampling.wait(0.02):
                    with contextlib.suppress(OSError):
                        peak = max(peak, wal.stat().st_size)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            time.sleep(1.0)  # let every worker connect and check out before the clock starts
            started = time.monotonic()
            go.set()
            finished = []
            last_report = started
            for _ in range(SENDERS + RECEIVERS):
                what, value = out.get(timeout=1200)
                if what == "done":
                    finished.append(value)
                now = time.monotonic()
                if now - last_report > 5:
                    log(f"  {sync}: {now - started:.0f} s, WAL peak {peak / MB:.1f} MB")
                    last_report = now
            for p in procs:
                p.join(60)
            stop_sampling.set()
            sampler.join()
            size = store.stat().st_size + wal.stat().st_size
            cpu_s = _cpu_seconds(proc.pid)
        finally:
            stop(proc)
    rate = per_sender * SENDERS / (max(finished) - started)
    log(f"{sync}: {rate:.0f} letters/s, WAL peak {peak / MB:.1f} MB, store {size / MB:.1f} MB")
    cpu_us = cpu_s * 1e6 / (per_sender * SENDERS)
    log(f"{sync}: the daemon used {cpu_us:.0f} us of CPU per letter")
    return {
        f"daemon_cpu_us_per_letter_{sync}": round(cpu_us),
        f"wal_peak_mb_{sync}": round(peak / MB, 2),
        f"store_mb_{sync}": round(size / MB, 2),
        f"letters_per_s_{sync}": round(rate),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--letters", type=int, default=100_000)
    parser.add_argument("--sync", choices=("normal", "full", "both"), default="both")
    args = parser.parse_args()
    modes = ("normal", "full") if args.sync == "both" else (args.sync,)
    figures: dict[str, float] = {"letters": args.letters}
    for sync in modes:
        log(f"{sync}: {args.letters} letters, {SENDERS} senders, {RECEIVERS} receivers")
        figures.update(run(sync, args.letters))
    figures["wal_peak_mb"] = max(figures[f"wal_peak_mb_{m}"] for m in modes)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
