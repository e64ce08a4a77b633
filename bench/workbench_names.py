"""The many-names part of `bench.workbench`: 10,000 topics, 500 services and 200
participants flowing into the same app, and the keys that browse them timed to their
frame, against the same keys with the few topics the app had before (same run).

Keys: down, up, page down, page up, end, home, space (open or close the group under the
cursor, twice), a filter typed letter by letter and taken back, a switch to Services,
Participants and back to Topics.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.presence import Announcement, EntityInfo, encode
from mailbus.trace import Kind, TraceEvent
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.textual_internals import FrameScreen
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual import events
from textual.widgets import Input
from workbench_fixtures.events import request_event, response_event

TOPICS = 10_000  # 10 sites x 100 robots x 10 sensors
SERVICES = 500
PARTICIPANTS = 200
MESSAGES_PER_S = 2_000  # over every topic in turn
CALLS_PER_S = 200
ANNOUNCE_PERIOD_S = 2.0
FILTER = "lidar"  # narrows letter by letter to the lidars (no digit: digits switch views)
SENSORS = ("accel", "battery", "camera", "gyro", "imu", "lidar", "odom", "pose", "sonar", "temp")


def topic_names() -> list[str]:
    return [
        f"site{s}/robot{r:02d}/{sensor}"
        for s in range(10)
        for r in range(100)
        for sensor in SENSORS
    ][:TOPICS]


def message(topic: str, n: int, now_ns: int) -> TraceEvent:
    body = f'{{"seq": {n}, "value": 1.5}}'
    return TraceEvent(
        Kind.RECEIVED.value,
        now_ns,
        name=topic,
        message_id=f"<n{n}@b>",
        reception_timestamp_ns=now_ns,
        body=body,
        size=len(body),
        detail="message",
    )


def announcement(i: int, sequence: int, now_ns: int) -> TraceEvent:
    gid = f"{i + 1:032x}"
    body = encode(
        Announcement(
            gid=gid,
            name=f"node{i:03d}",
            host=f"host{i % 20}",
            pid=1000 + i,
            transport="inprocess",
            period_s=ANNOUNCE_PERIOD_S,
            sequence=sequence,
            entities=(
                EntityInfo("publisher", f"site{i % 10}/robot{i % 100:02d}/pose"),
                EntityInfo("server", f"svc/call{i % SERVICES:03d}"),
            ),
        )
    )
    return TraceEvent(
        Kind.RECEIVED.value,
        now_ns,
        name=PARTICIPANTS_TOPIC,
        source_gid=gid,
        message_id=f"<a{i}.{sequence}@b>",
        body=body,
        size=len(body),
        detail="message",
    )


class NamesFeed:
    """Every topic, service and participant once, then messages over all topics in turn,
    calls over all services in turn and each participant announcing every period."""

    def __init__(self, app: WorkbenchApp) -> None:
        self.model = app.model
        self.topics = topic_names()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-names", daemon=True)
        self.sent = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _calls(self, first: int, count: int, t: float) -> list[TraceEvent]:
        out = []
        for k in range(first, first + count):
            service, mid = f"svc/call{k % SERVICES:03d}", f"<c{k}@b>"
            out.append(request_event(service, "{}", t, k, mid))
            out.append(response_event(service, "{}", t + 0.002, k, f"<r{k}@b>", mid))
        return out

    def _run(self) -> None:
        feed = self.model.feed_events
        now_ns = time.time_ns()
        for start in range(0, len(self.topics), 1000):
            feed(message(t, start + i, now_ns) for i, t in enumerate(self.topics[start:][:1000]))
        feed(self._calls(0, SERVICES, time.time()))
        sequence = 1
        feed(announcement(i, sequence, now_ns) for i in range(PARTICIPANTS))
        n, calls, started = len(self.topics), SERVICES, time.perf_counter()
        announced = started
        while not self._stop.wait(0.01):
            elapsed = time.perf_counter() - started
            now_ns = time.time_ns()
            due = len(self.topics) + int(elapsed * MESSAGES_PER_S)
            feed(message(self.topics[k % len(self.topics)], k, now_ns) for k in range(n, due))
            n = due
            due_calls = SERVICES + int(elapsed * CALLS_PER_S)
            feed(self._calls(calls, due_calls - calls, time.time()))
            calls = due_calls
            if time.perf_counter() - announced >= ANNOUNCE_PERIOD_S:
                sequence += 1
                announced = time.perf_counter()
                feed(announcement(i, sequence, now_ns) for i in range(PARTICIPANTS))
            self.sent = n


Probe = tuple[str, Callable[[], Any], str | None]  # key, the state it changes, its view


def probes(app: WorkbenchApp) -> list[Probe]:
    tree = app.query_one(TopicTree)

    def cursor() -> int:
        return tree.cursor_line

    def opened() -> tuple[int, bool]:
        node = tree.cursor_node
        return tree.cursor_line, node is not None and node.is_expanded

    def applied() -> str:  # the filter the tree shows
        return tree.filter_text

    typed = [(ch, applied, None) for ch in FILTER]
    erased = [("backspace", applied, None) for _ in FILTER]
    return [
        ("down", cursor, None),
        ("down", cursor, None),
        ("up", cursor, None),
        ("pagedown", cursor, None),
        ("pageup", cursor, None),
        ("end", cursor, None),
        ("home", cursor, None),
        ("space", opened, None),
        ("space", opened, None),
        ("slash", lambda: app.focused, None),
        *typed,
        *erased,
        ("2", lambda: app.active_view_id, "services"),
        ("N", lambda: app.active_view_id, "participants"),
        ("1", lambda: app.active_view_id, "topics"),
    ]


def settle(app: WorkbenchApp, pending: dict[str, Any]) -> None:
    """Answer the press being timed once its state has changed and the screen has nothing
    left to paint: what is on screen is then already its answer. (A filter letter that
    leaves the tree as it was needs no frame; without this, it was timed to whatever
    frame came next, up to the 100 ms refresh later.)"""
    if "painted" in pending or not pending:
        return
    screen = app.screen
    if not isinstance(screen, FrameScreen) or screen.changes_to_paint():
        return
    shown = pending["view"] is None or app.view(pending["view"]).region.area > 0
    if shown and pending["state"]() != pending["before"]:
        pending["painted"] = time.perf_counter()
        pending["cpu"] = time.thread_time()
        if pending.get("profiler"):
            pending["profiler"].disable()


async def time_keys(
    app: WorkbenchApp,
    pending: dict[str, Any],
    rounds: int,
    log: Callable[..., None],
    by_key: dict[str, list[float]],
    within: Callable[[float, float], str],
) -> tuple[list[float], list[float]]:
    """Each probe's key, `rounds` times, from its event to the first frame painted once
    its state changed (with its view on the screen); and the UI thread's CPU time meanwhile."""
    took: list[float] = []
    cpu: list[float] = []
    tree = app.query_one(TopicTree)
    for _ in range(rounds):
        tree.focus()
        app.post_message(events.Key("home", None))  # each round from the top (untimed)
        for key, state, view in probes(app):
            await asyncio.sleep(0.1)
            if key in ("down", "slash", "2") and isinstance(app.focused, Input):
                app.post_message(events.Key("escape", None))  # out of the filter (untimed)
                await asyncio.sleep(0.1)
            if key in ("down", "slash") and app.focused is not tree:
                tree.focus()
                await asyncio.sleep(0.05)
            before_state = state()
            pending.clear()
            pending.update(state=state, before=before_state, view=view)
            before, cpu_before = time.perf_counter(), time.thread_time()
            app.post_message(events.Key(key, key if len(key) == 1 else None))
            deadline = before + 5.0
            while "painted" not in pending and time.perf_counter() < deadline:
                settle(app, pending)
                await asyncio.sleep(0.001)
            painted, cpu_after = pending.get("painted"), pending.get("cpu", 0.0)
            pending.clear()
            if painted is None:
                log(f"10k topics {key}: no answer within 5 s")
                continue
            took.append((painted - before) * 1000)
            cpu.append((cpu_after - cpu_before) * 1000)
            by_key.setdefault(key if len(key) > 1 or not key.islower() else "letter", []).append(
                took[-1]
            )
            if took[-1] > 50:
                topics = len(app.model.topics.stats)
                log(
                    f"{topics} topics {key}: {took[-1]:.0f} ms ({cpu[-1]:.0f} ms CPU): "
                    + within(before, painted)
                )
    return took, cpu


async def run_names(
    app: WorkbenchApp,
    pending: dict[str, Any],
    rounds: int,
    quantile95: Callable[[list[float]], float],
    log: Callable[..., None],
    within: Callable[[float, float], str],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    app.action_show("topics")
    await asyncio.sleep(0.5)
    log(f"the tree's keys with {len(app.model.topics.stats)} topics (same-run baseline) ...")
    few, few_cpu = await time_keys(app, pending, rounds, log, {}, within)
    log(f"{TOPICS} topics, {SERVICES} services, {PARTICIPANTS} participants flowing ...")
    feed = NamesFeed(app)
    feed.start()
    deadline = time.perf_counter() + 60
    model = app.model
    while time.perf_counter() < deadline and (
        len(model.topics.stats) < TOPICS or len(model.participants.participants) < PARTICIPANTS
    ):
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    t0, m0 = time.perf_counter(), model.topics.total
    by_key: dict[str, list[float]] = {}
    many, many_cpu = await time_keys(app, pending, rounds, log, by_key, within)
    out["names_msgs_per_s"] = (model.topics.total - m0) / (time.perf_counter() - t0)
    feed.stop()
    out["names_topics"] = len(model.topics.stats)
    out["names_services"] = len({t.service for t in model.services.traces()})
    out["names_participants"] = len(model.participants.participants)
    out["key_latency_p50_ms_10k_topics"] = statistics.median(many)
    out["key_latency_p95_ms_10k_topics"] = quantile95(many)
    out["key_latency_max_ms_10k_topics"] = max(many)
    out["key_ui_cpu_p95_ms_10k_topics"] = quantile95(many_cpu)
    out["key_latency_max_ms_by_key_10k_topics"] = {k: round(max(v), 1) for k, v in by_key.items()}
    out["key_latency_p95_ms_few_topics"] = quantile95(few)
    out["key_ui_cpu_p95_ms_few_topics"] = quantile95(few_cpu)
    out["key_latency_max_ms_few_topics"] = max(few)
    out["names_ratio_p95_to_few_topics"] = quantile95(many) / quantile95(few)
    return out
