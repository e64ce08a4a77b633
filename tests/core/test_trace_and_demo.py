import subprocess
import sys
import threading

import mailbus
import pytest
from mailbus import Kind, Tracer
from mailbus.trace import TraceEvent
from waiting import eventually


def test_tracer_is_inactive_without_listeners() -> None:
    tracer = Tracer()
    assert not tracer.active
    remove = tracer.add_listener(lambda e: None)
    assert tracer.active
    remove()
    assert not tracer.active


def test_publish_and_receive_events_carry_fields(
    ctx: mailbus.Context, events: list[TraceEvent]
) -> None:
    ctx.subscription("t")
    pub = ctx.publisher("t")
    message_id = pub.publish("body")
    published = next(e for e in events if e.kind == Kind.PUBLISHED)
    received = next(e for e in events if e.kind == Kind.RECEIVED)
    assert published.message_id == received.message_id == message_id
    assert published.gid == pub.gid and received.source_gid == pub.gid
    assert received.body == "body" and received.size == 4
    assert received.reception_timestamp_ns >= published.source_timestamp_ns
    # Who sent it and to whom, for observers that show the email as it came.
    assert received.extra["from"] == ctx.address
    assert received.extra["to"] == ctx.recipients.to and received.extra["cc"] == ()


@pytest.mark.slow
def test_demo_runs_headless_and_prints_a_summary() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mailbus", "demo", "--seconds", "2.2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = out.stdout.strip().splitlines()
    assert len(lines) >= 2
    received = [int(line.split("received")[1].split()[0]) for line in lines]
    assert received[-1] > 0 and received == sorted(received)


def test_demo_system_drives_every_kind_of_traffic(ctx: mailbus.Context) -> None:
    from mailbus.demo import DemoSystem

    topics: set[str] = set()
    kinds: set[str] = set()

    traced = threading.Event()

    def listen(event: TraceEvent) -> None:
        kinds.add(event.kind)
        if event.kind == Kind.PUBLISHED:
            topics.add(event.name)
        traced.set()

    ctx.tracer.add_listener(listen)
    demo = DemoSystem(ctx, speed=10.0, seed=1)
    demo.start()
    expected = {"sensors/temperature", "robot/pose", "robot/log", "system/heartbeat"}
    try:
        eventually(
            lambda: Kind.RESPONSE_MATCHED in kinds and expected <= topics,
            30,
            "every kind of traffic",
            wake=traced,
        )
    finally:
        demo.stop()
    assert expected <= topics
    assert Kind.RESPONSE_MATCHED in kinds
