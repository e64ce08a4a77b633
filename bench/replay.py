"""Replay at any size: the index, the streaming player and its memory.

    python -m bench.replay [--quick] [--sizes 1m,10m,100m] [--work DIR]
    python -m bench.replay --sessions DIR [--sizes 10m,100m] [--no-open]

For each size (1 M, 10 M and 100 M events; `--quick`: 1 M), a synthetic session is
written part by part in bounded memory (bench/synthetic_sorted.py: time-sorted parts of
1 M rows in row groups of 16 Ki rows, as the recorder writes them), without an index.
Then, each measured in a fresh process (peak RSS is its own):

- `index_build_s`: building the index of the unindexed session (with its peak RSS),
  beside `analyze_s`: `mailbus analyze` on the same session, same run;
- `first_email_s`: a player made for one second from a random position (the index
  on disk), from the constructor to its first email sent (median of 5 positions, the
  worst beside it);
- `player_seek_p95_ms`: a paused player seeks to a random position and steps, until that
  email is sent (20 seeks);
- `replay_peak_rss_mb`: the peak RSS of the process that did the above and then
  replayed at full speed to the in-process transport for `--stretch` seconds;
- `index_density_s`: loading the index and drawing a 200-column density per name (the
  timeline's data);
- `open_timeline_s` and `seek_p95_ms`: the workbench started on the session as
  `mailbus open` starts it (Textual's headless pilot), until its timeline is drawn; then
  seeks by keys on the timeline (→, shift+→, End, Home), each until the player stands at
  the new place with its email read (bench/replay_open.py);
- at 1 M (or 100 k, the smoke size): `replay_ratio_to_read`: emails/s of a full-speed
  replay of the whole session to the in-process transport, against reading the same
  rows with pyarrow (row group by row group) and publishing each email row in a plain
  loop: the two alternately, 3 rounds in one process, the best of each (load that
  comes and goes falls on both; `replay_ratio_to_read_median` is the median of the
  rounds' ratios); and `matches_replay_events_1m`: the streaming player's emails equal the global
  `replay_events`' (order, IDs, links, raw bytes).

With `--sessions DIR`, the sessions already made and indexed in DIR (`DIR/s10m`,
`DIR/s100m`, ...: bench/synthetic_sorted.py's, as `--work` leaves none) are measured
instead, read only: nothing is written there, and the index build and `mailbus
analyze` (which need an unindexed session) are not run (null). `--no-open` leaves out
the workbench's figures.

Last stdout line: one JSON object (keys in shared/BENCH.md).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.sessions import peak_rss_mb
from bench.synthetic_sorted import write_synthetic

SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000, "100m": 100_000_000}
PER_SIZE = (
    "first_email_s",
    "first_email_max_s",
    "replay_peak_rss_mb",
    "index_build_s",
    "index_build_peak_rss_mb",
    "analyze_s",
    "open_timeline_s",
    "index_density_s",
    "seek_p95_ms",
    "player_seek_p95_ms",
    "replay_emails_per_s",
)
# Rounds of the replay-vs-read comparison (each replays the whole session).
RATIO_ROUNDS = 3


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def child(mode: str, *args: str) -> dict[str, Any]:
    """Run `python -m bench.replay --child MODE ARGS` and return its JSON line."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.replay", "--child", mode, *args],
        capture_output=True,
        text=True,
        timeout=7200,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"child {mode} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- children ------------------------------------------------------------------------------
def child_index(path: str) -> dict[str, Any]:
    from mailbus.sessions.index import load_index

    started = time.perf_counter()
    index = load_index(path)
    return {
        "seconds": time.perf_counter() - started,
        "peak_rss_mb": peak_rss_mb(),
        "rows": index.rows,
        "notes": list(index.notes),
    }


def child_analyze(path: str) -> dict[str, Any]:
    from mailbus.cli import main

    started = time.perf_counter()
    out = Path(tempfile.mkdtemp(prefix="mailbus-bench-analyze-"))
    try:
        code = main(["analyze", path, "--format", "parquet", "--output", str(out)])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"seconds": time.perf_counter() - started, "code": code, "peak_rss_mb": peak_rss_mb()}


def child_replay(path: str, stretch_s: str, seed: str) -> dict[str, Any]:
    import mailbus
    from mailbus.sessions.index import load_index
    from mailbus.sessions.player import Player

    rng = random.Random(int(seed))
    result: dict[str, Any] = {}
    started = time.perf_counter()
    index = load_index(path, build=False)
    for name in index.names:
        index.density(200, name)
    index.density(200)
    result["index_density_s"] = time.perf_counter() - started
    duration = index.duration_ns / 1e9
    firsts = []
    with mailbus.Context() as ctx:
        for _ in range(5):
            position = rng.uniform(0.1, 0.9) * duration
            sent = threading.Event()
            began = time.perf_counter()
            player = Player(
                path,
                ctx,
                start_s=position,
                stop_s=position + 1,
                on_sent=lambda p, e, sent=sent: sent.set(),  # type: ignore[misc]
            )
            player.start()
            assert sent.wait(60), "no email within 60 s"
            firsts.append(time.perf_counter() - began)
            player.stop()
        result["first_email_s"] = statistics.median(firsts)
        result["first_email_max_s"] = max(firsts)
        arrived = threading.Semaphore(0)
        player = Player(path, ctx, on_sent=lambda p, e: arrived.release(), index=index)
        player.start(paused=True)
        seeks = []
        for _ in range(20):
            began = time.perf_counter()
            player.seek(rng.uniform(0, 0.99) * duration)
            player.step()
            assert arrived.acquire(timeout=60), "a seek sent nothing within 60 s"
            seeks.append((time.perf_counter() - began) * 1000)
        player.stop()
        result["player_seek_p95_ms"] = sorted(seeks)[int(0.95 * (len(seeks) - 1))]
        result["player_seek_max_ms"] = max(seeks)
        # Full speed from a random position for `stretch_s` seconds of wall time.
        player = Player(path, ctx, rate=1e9, start_s=rng.uniform(0, 0.5) * duration)
        player.start()
        began = time.perf_counter()
        player.wait(float(stretch_s))
        elapsed = time.perf_counter() - began
        player.stop()
        result["replay_emails_per_s"] = player.sent / elapsed
        result["read_ahead_high_water"] = player.read_ahead_high_water
        result["pending_rows_high_water"] = player.reader.pending_high_water
    result["replay_peak_rss_mb"] = peak_rss_mb()
    return result


def child_ratio(path: str, rounds: str = str(RATIO_ROUNDS)) -> dict[str, Any]:
    """Full-speed replay of the whole session vs pyarrow rows published in a loop, the
    two halves alternately for `rounds` rounds (the first half alternating too), so
    that load that comes and goes on a shared machine falls on both: best and median of
    each."""
    from mailbus.sessions.index import load_index

    index = load_index(path, build=False)
    replays: list[float] = []
    reads: list[float] = []
    sent = published = 0
    for round_ in range(int(rounds)):
        halves = [_ratio_replay, _ratio_read]
        for half in halves if round_ % 2 == 0 else halves[::-1]:
            count, rate = half(path, index)
            if half is _ratio_replay:
                sent = count
                replays.append(rate)
            else:
                published = count
                reads.append(rate)
        log(f"  round {round_ + 1}: replay {replays[-1]:,.0f}/s, plain {reads[-1]:,.0f}/s")
    return {
        "replay_emails_per_s": max(replays),
        "read_publish_rows_per_s": max(reads),
        "replay_emails_per_s_median": statistics.median(replays),
        "read_publish_rows_per_s_median": statistics.median(reads),
        "ratio_median": statistics.median(a / b for a, b in zip(replays, reads, strict=True)),
        "rounds": len(replays),
        "replay_sent": sent,
        "read_published": published,
    }


def _ratio_replay(path: str, index: Any) -> tuple[int, float]:
    import mailbus
    from mailbus.sessions.player import Player

    with mailbus.Context() as ctx:
        player = Player(path, ctx, rate=1e9, index=index)
        started = time.perf_counter()
        player.run()
        return player.sent, player.sent / (time.perf_counter() - started)


def _ratio_read(path: str, index: Any) -> tuple[int, float]:
    import mailbus
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    email_kinds = pa.array(["message.published", "request.sent", "response.sent", "email.received"])
    columns = ["kind", "name", "body", "message_id"]
    with mailbus.Context() as ctx:
        publishers: dict[str, Any] = {}
        published = 0
        started = time.perf_counter()
        for part in index.parts:
            parquet = pq.ParquetFile(Path(path) / part.file)
            for group in range(parquet.metadata.num_row_groups):
                table = parquet.read_row_group(group, columns=columns)
                table = table.filter(pc.is_in(table.column("kind"), value_set=email_kinds))
                for name, body in zip(
                    table.column("name").to_pylist(), table.column("body").to_pylist(), strict=True
                ):
                    publisher = publishers.get(name)
                    if publisher is None:
                        publisher = publishers[name] = ctx.publisher(name)
                    publisher.publish(body.decode() if body else "")
                    published += 1
        return published, published / (time.perf_counter() - started)


def child_compare(path: str) -> dict[str, Any]:
    import mailbus
    from mailbus.sessions.player import Player, replay_events

    started = time.perf_counter()
    old = replay_events(path)
    old_s = time.perf_counter() - started
    with mailbus.Context() as ctx:
        player = Player(path, ctx)
        started = time.perf_counter()
        same = list(player.stream(player.origin_ns)) == old
        new_s = time.perf_counter() - started
    return {"same": same, "emails": len(old), "replay_events_s": old_s, "stream_s": new_s}


def child_open(path: str) -> dict[str, Any]:
    from bench.replay_open import measure_open

    return measure_open(Path(path))


CHILDREN = {
    "open": child_open,
    "index": child_index,
    "analyze": child_analyze,
    "replay": child_replay,
    "ratio": child_ratio,
    "compare": child_compare,
}


# -- the run -------------------------------------------------------------------------------
def measure_size(
    work: Path,
    label: str,
    events: int,
    stretch: float,
    seed: int,
    *,
    made: Path | None = None,
    open_: bool = True,
) -> dict[str, Any]:
    """The figures of one size, on a session written here in `work` (then removed) or
    on the indexed session `made` (only read)."""
    path = made or work / f"s{label}"
    out: dict[str, Any] = {}
    if made is None:
        log(f"[{label}] writing {events:,} events part by part")
        started = time.perf_counter()
        write_synthetic(path, events)
        log(f"  {time.perf_counter() - started:.1f} s")
    size_mb = sum(p.stat().st_size for p in path.iterdir()) / 2**20
    out[f"session_mb_{label}"] = round(size_mb, 1)
    log(f"[{label}] {path}: {size_mb:,.0f} MB on disk")
    if made is None:
        log(f"[{label}] building the index (fresh process)")
        built = child("index", str(path))
        out[f"index_build_s_{label}"] = round(built["seconds"], 2)
        out[f"index_build_peak_rss_mb_{label}"] = round(built["peak_rss_mb"], 1)
        log(f"  {built['seconds']:.1f} s, peak RSS {built['peak_rss_mb']:.0f} MB, {built['notes']}")
        log(f"[{label}] mailbus analyze (fresh process)")
        analyzed = child("analyze", str(path))
        out[f"analyze_s_{label}"] = round(analyzed["seconds"], 2)
        log(f"  {analyzed['seconds']:.1f} s, peak RSS {analyzed['peak_rss_mb']:.0f} MB")
    log(f"[{label}] first email, seeks, {stretch:g} s at full speed (fresh process)")
    played = child("replay", str(path), str(stretch), str(seed))
    out[f"first_email_s_{label}"] = round(played["first_email_s"], 3)
    out[f"first_email_max_s_{label}"] = round(played["first_email_max_s"], 3)
    out[f"player_seek_p95_ms_{label}"] = round(played["player_seek_p95_ms"], 1)
    out[f"replay_peak_rss_mb_{label}"] = round(played["replay_peak_rss_mb"], 1)
    out[f"index_density_s_{label}"] = round(played["index_density_s"], 3)
    out[f"replay_emails_per_s_{label}"] = round(played["replay_emails_per_s"])
    out[f"player_seek_max_ms_{label}"] = round(played["player_seek_max_ms"], 1)
    if open_:
        log(f"[{label}] the workbench: timeline drawn, seeks by keys (fresh process)")
        opened = child("open", str(path))
        out[f"open_timeline_s_{label}"] = opened["open_timeline_s"]
        out[f"seek_p95_ms_{label}"] = opened["seek_p95_ms"]
        out[f"seek_max_ms_{label}"] = opened["seek_max_ms"]
        log(
            f"  timeline after {opened['open_timeline_s']:.2f} s, {opened['seeks']} seeks by"
            f" keys: p95 {opened['seek_p95_ms']:.1f} ms, max {opened['seek_max_ms']:.1f} ms"
        )
    log(
        f"  first email {played['first_email_s']:.3f} s (worst {played['first_email_max_s']:.3f}),"
        f" seek p95 {played['player_seek_p95_ms']:.1f} ms"
        f" (max {played['player_seek_max_ms']:.1f}), peak RSS"
        f" {played['replay_peak_rss_mb']:.0f} MB, {played['replay_emails_per_s']:,.0f} emails/s,"
        f" read-ahead high water {played['read_ahead_high_water']},"
        f" rows pending {played['pending_rows_high_water']}"
    )
    if label in ("100k", "1m"):  # the whole session replayed: the smaller sizes only
        log(f"[{label}] full-speed replay vs pyarrow rows published in a plain loop")
        ratio = child("ratio", str(path))
        out["replay_ratio_to_read"] = round(
            ratio["replay_emails_per_s"] / ratio["read_publish_rows_per_s"], 3
        )
        out["replay_ratio_to_read_median"] = round(ratio["ratio_median"], 3)
        out[f"replay_full_emails_per_s_{label}"] = round(ratio["replay_emails_per_s"])
        out[f"read_publish_rows_per_s_{label}"] = round(ratio["read_publish_rows_per_s"])
        log(
            f"  best of {ratio['rounds']} alternate rounds: replay"
            f" {ratio['replay_emails_per_s']:,.0f} emails/s, plain loop"
            f" {ratio['read_publish_rows_per_s']:,.0f} rows/s: ratio {out['replay_ratio_to_read']}"
            f" (median of the rounds' ratios {out['replay_ratio_to_read_median']})"
        )
        log(f"[{label}] the player's emails against the global replay_events")
        compared = child("compare", str(path))
        out[f"matches_replay_events_{label}"] = compared["same"]
        out[f"replay_events_s_{label}"] = round(compared["replay_events_s"], 1)
        out[f"player_stream_s_{label}"] = round(compared["stream_s"], 1)
        log(
            f"  same: {compared['same']} ({compared['emails']:,} emails; replay_events"
            f" {compared['replay_events_s']:.1f} s, stream {compared['stream_s']:.1f} s)"
        )
    if made is None:
        shutil.rmtree(path, ignore_errors=True)
    return out


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(CHILDREN[sys.argv[2]](*sys.argv[3:])))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1 M events only")
    parser.add_argument("--sizes", default=None, help="e.g. 1m,10m (default 1m,10m,100m)")
    parser.add_argument("--stretch", type=float, default=10.0, help="full-speed seconds")
    parser.add_argument("--work", default=None, help="directory for the sessions (a temp dir)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--sessions", default=None, help="measure the indexed sessions DIR/s<size> (read only)"
    )
    parser.add_argument("--no-open", action="store_true", help="leave out the workbench")
    args = parser.parse_args()
    labels = ["1m"] if args.quick else ["1m", "10m", "100m"]
    if args.sizes:
        labels = [x.strip() for x in args.sizes.split(",")]
    made: dict[str, Path] = {}
    if args.sessions:
        for label in labels:
            path = Path(args.sessions) / f"s{label}"
            if not (path / "index.json").is_file():
                parser.error(f"{path} is not an indexed session (no index.json)")
            made[label] = path
    work = Path(tempfile.mkdtemp(prefix="mailbus-bench-replay-", dir=args.work))
    result: dict[str, Any] = {"quick": args.quick, "sizes": labels}
    for label in ("1m", "10m", "100m"):
        for key in PER_SIZE:
            result[f"{key}_{label}"] = None
    result["replay_ratio_to_read"] = None
    try:
        for label in labels:
            result.update(
                measure_size(
                    work,
                    label,
                    SIZES[label],
                    args.stretch,
                    args.seed,
                    made=made.get(label),
                    open_=not args.no_open,
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
