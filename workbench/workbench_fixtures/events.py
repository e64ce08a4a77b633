"""Fixed, deterministic data for snapshots, screenshots and tests: trace events as the
demo would produce them, at fixed times, and wait sets that do not move.

Nothing here runs the engine: the same input gives the same screens."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mailbus import headers as H
from mailbus.trace import Kind, TraceEvent

from workbench_fixtures.clock import T0, FrozenClock, ns
from workbench_fixtures.participants import participant_events

if TYPE_CHECKING:
    from mailbus_workbench.app import WorkbenchApp
    from mailbus_workbench.model.state import WorkbenchModel

GID_PUB = "7f3c9a1e2b4d4c6f8a0b1c2d3e4f5a6b"
GID_CLIENT = "c1c1c1c1d2d2d2d2e3e3e3e3f4f4f4f4"
GID_SERVER = "5e5e5e5e6f6f6f6f7a7a7a7a8b8b8b8b"


def message_event(topic: str, body: str, t: float, n: int, gid: str = GID_PUB) -> TraceEvent:
    return TraceEvent(
        Kind.RECEIVED.value,
        ns(t),
        name=topic,
        source_gid=gid,
        message_id=f"<{n:032x}@localhost>",
        source_timestamp_ns=ns(t) - 150_000,
        reception_timestamp_ns=ns(t),
        body=body,
        size=len(body),
        headers={H.SOURCE_TIMESTAMP: str(ns(t) - 150_000), H.PUBLISHER_GID: gid},
        detail="message",
    )


def request_event(service: str, body: str, t: float, seq: int, mid: str) -> TraceEvent:
    return _call_event(service, body, t, seq, mid, GID_CLIENT, "", "request")


def response_event(
    service: str, body: str, t: float, seq: int, mid: str, in_reply_to: str
) -> TraceEvent:
    return _call_event(service, body, t, seq, mid, GID_SERVER, in_reply_to, "response")


def _call_event(
    service: str,
    body: str,
    t: float,
    seq: int,
    mid: str,
    source: str,
    in_reply_to: str,
    detail: str,
) -> TraceEvent:
    """A request (from the client) or a response (from the server) as the workbench's
    own context receives it."""
    headers = {
        H.SOURCE_TIMESTAMP: str(ns(t)),
        H.CLIENT_GID: GID_CLIENT,
        H.REQUEST_SEQUENCE_NUMBER: str(seq),
    }
    if source == GID_SERVER:
        headers[H.SERVER_GID] = GID_SERVER
    return TraceEvent(
        Kind.RECEIVED.value,
        ns(t),
        name=service,
        source_gid=source,
        sequence_number=seq,
        message_id=mid,
        in_reply_to=in_reply_to,
        source_timestamp_ns=ns(t),
        reception_timestamp_ns=ns(t),
        body=body,
        size=len(body),
        headers=headers,
        detail=detail,
    )


def discarded_event(service: str, t: float, seq: int, mid: str, in_reply_to: str) -> TraceEvent:
    """The client's `response.discarded`: the response came after it had given up."""
    return TraceEvent(
        Kind.DISCARDED.value,
        ns(t),
        name=service,
        source_gid=GID_SERVER,
        sequence_number=seq,
        message_id=mid,
        in_reply_to=in_reply_to,
        detail="duplicate or unknown sequence number",
    )


def sample_events(seconds: float = 12.0, seed: int = 7, t0: float = T0) -> list[TraceEvent]:
    """About `seconds` of demo-like traffic ending at t0 + seconds, in time order: four
    topics and a service whose traces cover every status (answered, pending, timed out,
    orphaned, duplicate)."""
    rng = random.Random(seed)
    events: list[TraceEvent] = []
    n = 0
    t = 0.0
    while t < seconds:
        n += 1
        reading = round(21 + 2 * math.sin(t / 5) + rng.gauss(0, 0.1), 3)
        events.append(
            message_event(
                "sensors/temperature",
                json.dumps({"sensor": "t1", "celsius": reading, "t": round(t, 1)}),
                t0 + t,
                n,
            )
        )
        t += 0.25
    t = 0.0
    while t < seconds:
        n += 1
        pose = {
            "x": round(math.cos(t), 4),
            "y": round(math.sin(t), 4),
            "theta": round(t % (2 * math.pi), 4),
        }
        events.append(message_event("robot/pose", json.dumps(pose), t0 + t + 0.01, n))
        t += 0.1
    for burst in range(int(seconds // 2)):
        for k in range(rng.randint(3, 8)):
            n += 1
            level = rng.choice(("INFO", "INFO", "WARN", "ERROR"))
            events.append(
                message_event("robot/log", f"{level} event {n}", t0 + burst * 2 + 0.3 + k * 0.01, n)
            )
    for beat in range(int(seconds)):
        n += 1
        events.append(message_event("system/heartbeat", f"alive {beat + 1}", t0 + beat + 0.5, n))
    seq = 0
    t = 0.4
    while t < seconds - 0.5:
        seq += 1
        numbers = [rng.randint(0, 99) for _ in range(3)]
        mid = f"<req{seq:04d}@localhost>"
        events.append(request_event("demo/add", json.dumps(numbers), t0 + t, seq, mid))
        latency = rng.uniform(0.0005, 0.004) if seq % 7 else rng.uniform(0.2, 0.6)
        if seq % 11 != 5:  # every eleventh request gets no answer: timed out
            events.append(
                response_event(
                    "demo/add",
                    json.dumps({"sum": sum(numbers)}),
                    t0 + t + latency,
                    seq,
                    f"<rsp{seq:04d}@localhost>",
                    mid,
                )
            )
        if seq == 7:  # slow, and the client had given up by then: late
            events.append(
                discarded_event(
                    "demo/add", t0 + t + latency + 0.001, seq, f"<rsp{seq:04d}@localhost>", mid
                )
            )
        if seq == 3:  # a second server answers too: duplicate
            events.append(
                response_event(
                    "demo/add",
                    json.dumps({"sum": sum(numbers)}),
                    t0 + t + latency + 0.002,
                    seq,
                    f"<dup{seq:04d}@localhost>",
                    mid,
                )
            )
        t += 0.5
    events.append(
        response_event(
            "demo/add", '{"sum": 0}', t0 + 6.2, 99, "<orphan@localhost>", "<never-sent@localhost>"
        )
    )
    # One request still pending at the end.
    seq += 1
    events.append(
        request_event("demo/add", "[1, 2, 3]", t0 + seconds - 0.2, seq, f"<req{seq:04d}@localhost>")
    )
    # What the Log view lists: a foreign email skipped, and a Stem message with no cell.
    events.append(
        TraceEvent(
            Kind.SKIPPED.value,
            ns(t0 + 3.2),
            name="Weekly news",
            message_id="<news-42@example.org>",
            detail="not a Mailbus email (no Source-Timestamp header)",
            body="Subject: Weekly news\nFrom: news@example.org\n\nHello!",
            extra={"origin": "imap", "reason": "foreign"},
        )
    )
    events.append(
        TraceEvent(
            "stem.addressing_error",
            ns(t0 + 7.7),
            name="arm",
            detail="no cell 'arm' on hub 'lab'",
            body='{"to": "arm", "from": "lab:planner", "type": "cmd", "cmd": "move"}',
            extra={"hub": "lab"},
        )
    )
    events.sort(key=lambda e: e.time_ns)
    return events


# -- fixed wait sets --------------------------------------------------------------------
@dataclass
class FixedStats:
    waits: int = 0
    timeouts: int = 0
    waiting: bool = False
    current_timeout: float | None = None
    wait_started_ns: int = 0
    last_ready: tuple[str, ...] = ()


@dataclass
class FixedEntity:
    kind: str
    label: str
    ready: bool = False

    @property
    def topic(self) -> str | None:
        return self.label if self.kind == "subscription" else None

    @property
    def service(self) -> str | None:
        return self.label if self.kind in ("client", "server") else None

    @property
    def name(self) -> str:
        return self.label

    def is_ready(self) -> bool:
        return self.ready


@dataclass
class FixedWaitSet:
    name: str
    stats: FixedStats
    items: list[FixedEntity] = field(default_factory=list)

    @property
    def entities(self) -> tuple[object, ...]:
        return tuple(self.items)


def sample_wait_sets(t0: float = T0) -> list[FixedWaitSet]:
    return [
        FixedWaitSet(
            "demo/server",
            FixedStats(412, 37, True, 0.2, ns(t0 + 11.95), ("demo/add",)),
            [FixedEntity("server", "demo/add")],
        ),
        FixedWaitSet(
            "controller",
            FixedStats(1290, 3, False, None, 0, ("robot/pose",)),
            [
                FixedEntity("subscription", "robot/pose", True),
                FixedEntity("subscription", "sensors/temperature"),
                FixedEntity("client", "demo/add"),
                FixedEntity("guard", "stop"),
            ],
        ),
    ]


RAW_DATE = "Fri, 15 Jan 2027 08:00:12 GMT"


def fixed_model(
    clock: FrozenClock | None = None, seconds: float = 12.0, *, announcements: bool = True
) -> WorkbenchModel:
    """A model holding `sample_events`, with fixed wait sets, pumped at a frozen clock;
    `announcements`: with the fixed participants' announcements too."""
    from mailbus_workbench.model.state import WorkbenchModel

    clock = clock or FrozenClock(T0 + seconds)
    wait_sets = sample_wait_sets(T0)
    model = WorkbenchModel(clock=clock, wait_sets=lambda: wait_sets)
    # Walk the clock through the data so that rates, sparklines and timelines fill in.
    events = sorted(
        [*sample_events(seconds), *(participant_events(seconds) if announcements else ())],
        key=lambda e: e.time_ns,
    )
    end = clock.now
    clock.now = T0
    i = 0
    step = 0
    while clock.now < end:
        clock.advance(0.25)
        step += 1
        limit = clock.now * 1e9
        batch = []
        while i < len(events) and events[i].time_ns <= limit:
            batch.append(events[i])
            i += 1
        model.feed_events(batch)
        # Fixed wait sets move a little so their timelines show every state.
        wait_sets[0].stats.waits += 1
        if step % 5 == 0:
            wait_sets[0].stats.timeouts += 1
        if step % 3 == 0:
            wait_sets[1].stats.waits += 1
        model.pump()
    model.feed_events(events[i:])
    model.pump()
    return model


NO_KEYMAP = "/nonexistent/mailbus-workbench/keymap.toml"


def fixed_app(**kwargs: Any) -> WorkbenchApp:
    """The workbench on fixed data: no engine, no timer, a frozen clock."""
    import tempfile
    from pathlib import Path

    from mailbus_workbench.app import WorkbenchApp
    from mailbus_workbench.model.settings import Settings

    # Templates (and the recent sessions saved beside them) in a directory of the app's
    # own: one shared /nonexistent/... directory was created as root, and one test's
    # recent sessions were the next one's. The key map stays a fixed path that does not
    # exist: the Help screen shows it (snapshots), and nothing writes it unasked.
    scratch = tempfile.TemporaryDirectory(prefix="mailbus-workbench-fixture-")
    model = kwargs.pop("model", None) or fixed_model()
    settings = kwargs.pop("settings", None) or Settings(
        keymap_file=kwargs.pop("keymap_file", None) or Path(NO_KEYMAP),
        templates_file=kwargs.pop("templates_file", None) or Path(scratch.name) / "templates.toml",
    )
    app = WorkbenchApp(model=model, settings=settings, live=False, raw_date=RAW_DATE, **kwargs)
    app.animation_level = "none"  # tab underlines would be caught mid-slide
    app._fixture_config = scratch  # type: ignore[attr-defined]  # removed with the app
    return app


def imap_bytes(event: TraceEvent) -> bytes:
    """The bytes of a fixture message as Dovecot hands them over after Postfix delivered
    it: the server's lines in front of what the sender wrote (a fixed Date)."""
    from mailbus.email_message import to_bytes
    from mailbus_workbench.model.inspect import to_email

    email = to_email(event)
    received = (
        f"Return-Path: <{email.sender}>\r\n"
        f"Delivered-To: lab@mailbus.test\r\n"
        "Received: from mx.mailbus.test (localhost [127.0.0.1])\r\n"
        "\tby imap.mailbus.test with LMTP id 8Gq1Ly2Aa2fXBwAAe7jWsA\r\n"
        f"\tfor <lab@mailbus.test>; {RAW_DATE}\r\n"
    )
    return received.encode() + to_bytes(email, date=RAW_DATE)
