"""Workbench benchmark: the TUI headless (Textual's pilot) while the demo system is
driven at 10,000 messages/s in the same process.

Figures (last stdout line, JSON):
- input_msgs_per_s: messages folded into the model per second during the flood;
- repaints_per_s: screen updates (compositor frames) per second during the flood;
- key_latency_p95_ms: from a key press (next/previous topic, a switch to every view in
  turn) to the first frame painted once the state it changes changed (for a switch: with
  the view on the screen), 95th percentile (the pause key is reported apart: pausing
  loads the whole history kept into the list);
- key_latency_max_ms: the worst of any of those keys (the pause key included), with the
  worst per key in key_latency_max_ms_by_key;
- key_latency_*_plain (key_latency_p95_ms_plain, ...): the same keys with the speed
  tricks off (`speed-tricks = false`, mailbus_workbench.speed: a view filled before it
  is shown, a key's frame at the 60 Hz timer's next slot, the usual GIL switch interval
  during a key, the collector walking every object), alternated with them on round by
  round;
- key_ui_cpu_*: the UI thread's own CPU time from a press to its frame (what the
  workbench spent, whoever else held the CPU meanwhile: steadier on a loaded machine);
- full_gc_cpu_max_ms: the longest full collection (CPU of the thread that ran it), per
  mode; fold_slices, fold_slice_max_ms: folds of a backlog made between refreshes;
- key_to_state_max_ms: the worst from a key to its state change (the frame left out);
- queue_entries: the entries of the outbox the Queues view lists while it is shown.
Keys slower than 50 ms are logged on stderr with what the UI thread did meanwhile
(refreshes, layouts, paints, collections, fold slices).
- rss_mb_after_1m_msgs: resident memory once a million messages went through the app;
- key_latency_p95_ms_10k_topics (and _p50, _max, key_ui_cpu_p95_ms_10k_topics): the
  tree's keys, the filter typed and the switches to Services and Participants while
  10,000 topics, 500 services and 200 participants flow (bench/workbench_names.py),
  against the same keys with the few topics before (key_latency_p95_ms_few_topics).
Baselines measured in the same run: the model alone folding the same events
(baseline_model_msgs_per_s) and the idle repaint rate. The memory bound is stated in
`memory_bound`: history_cap x topics x message size + the feed's capacity.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import pstats
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.storage import Destination, Metadata, Schedule
from mailbus.trace import Kind, TraceEvent
from mailbus_workbench import textual_internals
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.model.state import WorkbenchModel
from mailbus_workbench.speed import heap
from mailbus_workbench.views.topics import TopicsView
from textual import events
from textual.binding import Binding
from textual.widgets import Input, TextArea

from bench.workbench_names import run_names, settle

TARGET_RATE = 10_000
QUEUE_ENTRIES = 500  # in the outbox the Queues view lists (once a second while shown)
FLOOD_TOPICS = ("bench/pose", "bench/imu", "bench/lidar", "bench/status")


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Flood:
    """Publishes on FLOOD_TOPICS at `rate` msgs/s in 5 ms batches (on top of the demo)."""

    def __init__(self, engine: EngineHost, rate: int) -> None:
        self.engine = engine
        self.rate = rate
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-flood", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        publishers = [self.engine.context.publisher(t) for t in FLOOD_TOPICS]
        started = time.perf_counter()
        n = 0
        while not self._stop.is_set():
            due = int((time.perf_counter() - started) * self.rate)
            while n < due:
                publishers[n % len(publishers)].publish(
                    f'{{"seq": {n}, "x": 1.25, "y": -0.5, "ok": true}}'
                )
                n += 1
            self.sent = n
            self._stop.wait(0.005)  # pacing of the generator


def make_outbox(directory: Path, n: int) -> Path:
    """An outbox of `n` queued entries, for the Queues view to list while it is shown."""
    storage = FsStorage(directory)
    for i in range(n):
        data = f"Message-ID: <q{i}@bench>\r\nSubject: job {i}\r\n\r\nbody {i}\r\n".encode()
        enqueuer = storage.enqueue()
        enqueuer.write(data)
        meta = Metadata(f"<q{i}@bench>", "s@x.org", (f"r{i}@y.org",), f"job {i}", len(data), 1)
        enqueuer.commit([Destination(meta, Schedule(0, 2**62, 0, ""))])
    return directory


def synthetic(n: int, start: int) -> list[TraceEvent]:
    body = '{"seq": 0, "x": 1.25, "y": -0.5, "ok": true}'
    now = time.time_ns()
    return [
        TraceEvent(
            Kind.RECEIVED.value,
            now,
            name=FLOOD_TOPICS[i % 4],
            message_id=f"<{i}@b>",
            reception_timestamp_ns=now,
            body=body,
            size=len(body),
            detail="message",
        )
        for i in range(start, start + n)
    ]


def baseline_model(n: int) -> float:
    model = WorkbenchModel()
    events = synthetic(n, 0)
    started = time.perf_counter()
    model.feed_events(events)
    model.pump()
    return n / (time.perf_counter() - started)


class Timeline:
    """What took the UI thread's time (refreshes, layouts, paints, collections), kept to
    say why a slow key was slow."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float, str]] = []  # start, end, what
        self.mode = ""
        self.full_gc_cpu_ms: dict[str, list[float]] = {}

    def timed(self, what: str, call: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.spans.append((started, time.perf_counter(), what))

        return wrapper

    def gc_callback(self, phase: str, info: dict[str, int]) -> None:
        # A collection runs on the thread that triggered it, holding the GIL throughout.
        if phase == "start":
            self._gc_started = time.perf_counter(), time.thread_time()
        else:
            started, cpu = self._gc_started
            self.spans.append((started, time.perf_counter(), f"gc{info['generation']}"))
            if info["generation"] == 2:
                self.full_gc_cpu_ms.setdefault(self.mode, []).append(
                    (time.thread_time() - cpu) * 1000
                )

    def within(self, start: float, end: float, longer_than_ms: float = 2.0) -> str:
        return ", ".join(
            f"{what} {(e - s) * 1000:.0f} ms @{(s - start) * 1000:+.0f}"
            for s, e, what in self.spans
            if e >= start and s <= end and (e - s) * 1000 >= longer_than_ms
        )

    def longest(self, prefix: str, since: float) -> float:
        return max(
            ((e - s) * 1000 for s, e, w in self.spans if w.startswith(prefix) and s >= since),
            default=0.0,
        )


def quantile95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=20, method="inclusive")[18]


async def run(
    seconds: float, total: int, rounds: int, outbox: Path, profile: Path | None = None
) -> dict[str, Any]:
    settings = Settings(
        keymap_file=Path("/nonexistent/k.toml"), templates_file=Path("/nonexistent/t.toml")
    )
    engine = EngineHost(seed=1)
    # As the `mailbus` command runs it: its own process, every trick allowed.
    app = WorkbenchApp(engine=engine, settings=settings, outbox_dir=outbox, owns_process=True)
    frames = 0
    # The press being timed: it is answered at the first frame painted once its state
    # changed (for a view switch, once the view has a place on the screen).
    pending: dict[str, Any] = {}

    def counting(original: textual_internals.Display, screen: Any, renderable: Any) -> None:
        nonlocal frames
        if renderable is not None:
            frames += 1
        original(screen, renderable)
        if renderable is not None and pending and "painted" not in pending:
            shown = pending["view"] is None or app.view(pending["view"]).region.area > 0
            if shown and pending["state"]() != pending["before"]:
                pending["painted"] = time.perf_counter()
                pending["cpu"] = time.thread_time()
                if pending.get("profiler"):  # what follows the frame is not the key's
                    pending["profiler"].disable()

    textual_internals.wrap_display(app, counting)
    timeline = Timeline()
    tick_ms: list[float] = []
    original_refresh = app.refresh_now

    def timed_refresh() -> None:
        started = time.perf_counter()
        original_refresh()
        ended = time.perf_counter()
        tick_ms.append((ended - started) * 1000)
        timeline.spans.append((started, ended, "refresh"))

    app.refresh_now = timed_refresh  # type: ignore[method-assign]
    handled: list[float] = []
    view_action = TopicsView.action_pause

    def timed_pause(self: TopicsView) -> None:
        handled.append(time.perf_counter())
        view_action(self)

    TopicsView.action_pause = timed_pause  # type: ignore[method-assign]
    out: dict[str, Any] = {"rss_mb_start": rss_mb()}
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.main_screen
        textual_internals.wrap_screen_steps(screen, timeline.timed)
        gc.callbacks.append(timeline.gc_callback)
        folder = app.folder
        folder._slice = timeline.timed("fold", folder._slice)  # type: ignore[method-assign]
        await pilot.pause(1.0)
        log("idle repaint rate ...")
        f0, t0 = frames, time.perf_counter()
        await pilot.pause(2.0)
        out["baseline_idle_repaints_per_s"] = (frames - f0) / (time.perf_counter() - t0)

        log(f"flood at {TARGET_RATE} msg/s for {seconds} s ...")
        flood = Flood(engine, TARGET_RATE)
        flood.start()
        await pilot.pause(1.0)  # warm up
        m0, f0, t0 = app.model.topics.total, frames, time.perf_counter()
        # Two modes, alternated each round of keys so that both see the same load: the
        # app as it is and "plain", its speed tricks off (see set_mode).
        modes = ("", "_plain")
        latencies: dict[str, list[float]] = {m: [] for m in modes}
        state_latencies: dict[str, list[float]] = {m: [] for m in modes}
        by_key: dict[str, dict[str, list[float]]] = {m: {} for m in modes}
        pause_latencies: dict[str, list[float]] = {m: [] for m in modes}
        unanswered: dict[str, int] = {m: 0 for m in modes}
        # The UI thread's own CPU time from a press to its frame: what the workbench
        # spent, apart from the time other threads and processes held the CPU.
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        profiles: list[tuple[str, cProfile.Profile]] = []
        tick_ms.clear()
        timeline.spans.clear()
        timeline.full_gc_cpu_ms = {m: [] for m in modes}
        tree = app.query_one("#topic-tree")
        tree.focus()
        # Browsing keys (next/previous topic, a switch to every view: keys 2..9, 0, N,
        # then back to 1), each timed from the key event to the first frame painted
        # after the state it changes; and the pause key, timed to its action's frame.
        switches = [str(n % 10) for n in range(2, min(len(app.VIEWS), 10) + 1)] + ["N", "1"]
        targets = {
            b.key: b.action[len("show('") : -2]
            for b in app.BINDINGS
            if isinstance(b, Binding) and b.action.startswith("show(")
        }
        probes = [
            ("down", lambda: tree.cursor_line),
            ("up", lambda: tree.cursor_line),
            *((key, lambda: app.active_view_id) for key in switches),
            ("p", lambda: len(handled)),
        ]
        # A first round, untimed, shows every view once: a view's first showing mounts
        # and lays it out for the first time, which neither mode should be charged with.
        n = -len(probes)
        previous_mode = ""

        def set_mode(new: bool) -> None:
            # The app as the `mailbus` command runs it, or with `speed-tricks = false`:
            # a view filled before it is shown, a key's frame at the 60 Hz timer's next
            # slot, the GIL's usual switch interval while a key is answered, no objects
            # frozen out of the collector's passes (mailbus_workbench.speed).
            app.speed.enabled = new
            if not new:
                app.key_turn.release()
            if new:
                heap.freeze()
            else:
                heap.thaw()

        least = 2 * rounds * len(probes)  # `rounds` of each mode at least, whole pairs
        while time.perf_counter() - t0 < seconds or n % (2 * len(probes)) or n < least:
            mode = "warm-up" if n < 0 else list(modes)[n // len(probes) % len(modes)]
            if mode != previous_mode:
                timeline.mode = mode
                set_mode(mode != "_plain")
                previous_mode = mode
            await asyncio.sleep(0.2)
            key, state = probes[n % len(probes)]
            n += 1
            if key in ("down", "up", "p"):
                tree.focus()
            elif isinstance(app.focused, Input | TextArea):
                # Digits are typed in a text field: escape first, as a user does (untimed).
                app.post_message(events.Key("escape", None))
                deadline = time.perf_counter() + 5.0
                while isinstance(app.focused, Input | TextArea):
                    if time.perf_counter() > deadline:
                        break
                    await asyncio.sleep(0.001)
            before_state = state()
            pending.clear()
            pending.update(state=state, before=before_state, view=targets.get(key))
            # The UI thread (this one) profiled from the press to its frame, app mode only.
            profiler = cProfile.Profile() if profile and mode == "" else None
            pending["profiler"] = profiler
            if profiler:
                profiler.enable()
            before, cpu_before = time.perf_counter(), time.thread_time()
            app.post_message(events.Key(key, key if len(key) == 1 else None))
            deadline = before + 5.0
            changed = None
            while "painted" not in pending and time.perf_counter() < deadline:
                if changed is None and state() != before_state:
                    changed = time.perf_counter()
                settle(app, pending)
                await asyncio.sleep(0.001)
            painted, cpu_after = pending.get("painted"), pending.get("cpu", 0.0)
            pending.clear()
            if profiler:
                profiler.disable()
                profiles.append((key, profiler))
            if mode not in modes:
                continue
            if painted is None:
                unanswered[mode] += 1
                log(f"{mode or 'app'} {key}: no answer within 5 s")
                continue
            took = (painted - before) * 1000
            cpu[mode].append((cpu_after - cpu_before) * 1000)
            state_latencies[mode].append(((changed or painted) - before) * 1000)
            (pause_latencies if key == "p" else latencies)[mode].append(took)
            by_key[mode].setdefault(key, []).append(took)
            if took > 50:
                spent = cpu[mode][-1]
                log(
                    f"{mode or 'app'} {key}: {took:.0f} ms ({spent:.0f} ms CPU): "
                    + timeline.within(before, painted)
                )
        set_mode(True)
        gc.callbacks.remove(timeline.gc_callback)
        if profile and profiles:
            # One file for the switches, one for the other keys (down, up, pause).
            for kind, chosen in (
                ("switch", [p for k, p in profiles if k in targets]),
                ("other", [p for k, p in profiles if k not in targets]),
            ):
                stats = pstats.Stats(chosen[0])
                for more in chosen[1:]:
                    stats.add(more)
                path = profile.with_name(f"{profile.stem}-{kind}{profile.suffix}")
                stats.dump_stats(path)
                log(f"profile of the app's keys ({kind}): {path}")
        elapsed = time.perf_counter() - t0
        out["refresh_p50_ms"] = statistics.median(tick_ms)
        out["refresh_max_ms"] = max(tick_ms)
        out["refreshes_per_s"] = len(tick_ms) / elapsed
        out["layout_max_ms"] = timeline.longest("refresh_layout", t0)
        out["paint_max_ms"] = timeline.longest("compositor_refresh", t0)
        out["gc_max_ms"] = timeline.longest("gc", t0)
        out["fold_slice_max_ms"] = timeline.longest("fold", t0)
        out["fold_slices"] = sum(1 for _, _, w in timeline.spans if w == "fold")
        out["input_msgs_per_s"] = (app.model.topics.total - m0) / elapsed
        out["repaints_per_s"] = (frames - f0) / elapsed
        out["published_msgs_per_s"] = flood.sent / (elapsed + 1.0)
        for mode in modes:
            keys, pauses = latencies[mode], pause_latencies[mode]
            out[f"key_presses{mode}"] = len(keys) + len(pauses)
            out[f"key_unanswered{mode}"] = unanswered[mode]
            out[f"key_latency_p50_ms{mode}"] = statistics.median(keys)
            out[f"key_latency_p95_ms{mode}"] = quantile95(keys)
            out[f"key_latency_max_ms{mode}"] = max([*keys, *pauses])
            out[f"key_latency_max_ms_by_key{mode}"] = {
                k: round(max(v), 1) for k, v in by_key[mode].items()
            }
            out[f"key_latency_p95_ms_by_key{mode}"] = {
                k: round(quantile95(v), 1) for k, v in by_key[mode].items()
            }
            out[f"key_latency_p95_ms_all_keys{mode}"] = quantile95([*keys, *pauses])
            out[f"key_to_state_max_ms{mode}"] = max(state_latencies[mode])
            out[f"key_ui_cpu_p50_ms{mode}"] = statistics.median(cpu[mode])
            out[f"key_ui_cpu_p95_ms{mode}"] = quantile95(cpu[mode])
            out[f"key_ui_cpu_max_ms{mode}"] = max(cpu[mode])
            out[f"pause_key_latency_max_ms{mode}"] = max(pauses, default=None)
            full = timeline.full_gc_cpu_ms.get(mode, [])
            out[f"full_gc_count{mode}"] = len(full)
            out[f"full_gc_cpu_max_ms{mode}"] = max(full, default=None)
        flood.stop()
        app.model.set_paused(False)

        log(f"pushing the total to {total} messages ...")
        seen = app.model.topics.total
        i = 0
        while app.model.topics.total + len(app.model.feed) < total:
            batch = min(20_000, total - app.model.topics.total - len(app.model.feed))
            app.model.feed_events(synthetic(batch, 10_000_000 + i))
            i += batch
            await pilot.pause(0.05)
        while len(app.model.feed):
            await pilot.pause(0.05)
        out["messages_total"] = app.model.topics.total
        out["messages_from_engine"] = seen
        out["rss_mb_after_1m_msgs"] = rss_mb()
        out["history_held"] = app.model.topics.held()
        out["feed_dropped"] = app.model.feed.dropped
        topics = len(app.model.topics.stats)
        cap = app.model.topics.history_cap
        out["memory_bound"] = (
            f"history {cap} msgs x {topics} topics (max {app.model.topics.max_topics}) + "
            f"feed {app.model.feed.capacity} events + {app.model.services.max_traces} traces"
        )
        gc.callbacks.append(timeline.gc_callback)
        out.update(await run_names(app, pending, rounds, quantile95, log, timeline.within))
        gc.callbacks.remove(timeline.gc_callback)
    TopicsView.action_pause = view_action  # type: ignore[method-assign]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter run (fewer messages)")
    parser.add_argument(
        "--rounds", type=int, help="rounds of keys per mode at least (default 3, quick 2)"
    )
    parser.add_argument(
        "--profile", type=Path, help="cProfile the UI thread on the app's keys into this file"
    )
    args = parser.parse_args()
    seconds, total = (5.0, 200_000) if args.quick else (20.0, 1_000_000)
    rounds = args.rounds or (2 if args.quick else 3)
    log("baseline: the model alone ...")
    baseline = baseline_model(200_000)
    with tempfile.TemporaryDirectory() as scratch:
        log(f"an outbox of {QUEUE_ENTRIES} entries for the Queues view ...")
        outbox = make_outbox(Path(scratch) / "outbox", QUEUE_ENTRIES)
        result = asyncio.run(run(seconds, total, rounds, outbox, args.profile))
    result["queue_entries"] = QUEUE_ENTRIES
    result["baseline_model_msgs_per_s"] = baseline
    result["input_ratio_to_model"] = result["input_msgs_per_s"] / baseline
    result["quick"] = args.quick
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
