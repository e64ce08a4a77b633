"""Fixed participant announcements (three processes) for tests, snapshots and screenshots."""

from __future__ import annotations

from mailbus import headers as H
from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.presence import (
    Announcement,
    BrokerInfo,
    EntityInfo,
    ModuleInfo,
    WaitEntityInfo,
    WaitSetInfo,
    encode,
)
from mailbus.trace import Kind, TraceEvent

from workbench_fixtures.clock import T0, ns

# -- fixed participants (announcements of three other processes) -------------------------
GID_ARM = "a1a1a1a1b2b2b2b2c3c3c3c3d4d4d4d4"


GID_GATEWAY = "9a9a9a9a8b8b8b8b7c7c7c7c6d6d6d6d"


GID_PLANNER = "3e3e3e3e4f4f4f4f5a5a5a5a6b6b6b6b"


def sample_announcements(step: int) -> list[Announcement]:
    """The announcements of the fixed participants at their `step`-th period: counters
    grow, so that the wait-set timelines of other processes show their states."""
    arm_waiting = step % 3 != 1
    return [
        Announcement(
            gid=GID_ARM,
            name="robot-arm",
            host="lab-pc-2",
            pid=4242,
            transport="postoffice",
            period_s=2.0,
            sequence=step + 1,
            address="arm@lab.example",
            entities=(
                EntityInfo("publisher", "robot/pose"),
                EntityInfo("server", "arm/move", step % 2),
                EntityInfo("subscription", "sensors/temperature", 2),
            ),
            wait_sets=(
                WaitSetInfo(
                    "arm/control",
                    arm_waiting,
                    0.5 if arm_waiting else None,
                    120 + 7 * step,
                    3 + step // 2,
                    ("sensors/temperature",),
                    (
                        WaitEntityInfo("subscription", "sensors/temperature", True),
                        WaitEntityInfo("server", "arm/move", False),
                        WaitEntityInfo("guard", "stop", False),
                    ),
                ),
            ),
            outbox_depth=4,
        ),
        Announcement(
            gid=GID_GATEWAY,
            name="gateway",
            host="edge-1",
            pid=77,
            transport="postoffice",
            period_s=2.0,
            sequence=step + 1,
            address="gateway@lab.example",
            entities=(EntityInfo("subscription", "robot/pose"),),
            brokers=(
                BrokerInfo(
                    "broker 1",
                    (
                        ModuleInfo("from robot/pose", "FromTopic", "running", 0, 1000),
                        ModuleInfo("archive", "Archive", "running", 730 + step, 1000),
                    ),
                ),
            ),
        ),
        Announcement(
            gid=GID_PLANNER,
            name="planner",
            host="lab-pc-2",
            pid=4301,
            transport="postoffice",
            period_s=2.0,
            sequence=step + 1,
            address="planner@lab.example",
            entities=(EntityInfo("client", "arm/move", 1),),
            wait_sets=(
                WaitSetInfo(
                    "planner/main",
                    False,
                    None,
                    40 + step,
                    0,
                    ("arm/move",),
                    (WaitEntityInfo("client", "arm/move", False),),
                ),
            ),
        ),
    ]


def announcement_event(announcement: Announcement, t: float) -> TraceEvent:
    """`announcement` as the workbench receives it on the participants topic."""
    body = encode(announcement)
    return TraceEvent(
        Kind.RECEIVED.value,
        ns(t),
        name=PARTICIPANTS_TOPIC,
        source_gid=announcement.gid,
        sequence_number=announcement.sequence,
        message_id=f"<{announcement.sequence:08x}{announcement.gid[:24]}@localhost>",
        source_timestamp_ns=ns(t) - 150_000,
        reception_timestamp_ns=ns(t),
        body=body,
        size=len(body),
        headers={H.SOURCE_TIMESTAMP: str(ns(t) - 150_000), H.PUBLISHER_GID: announcement.gid},
        detail="message",
        extra={"from": announcement.address},
    )


def participant_events(seconds: float = 12.0, t0: float = T0) -> list[TraceEvent]:
    """Announcements of the fixed participants every 2 s, each a little apart."""
    events = []
    for step in range(int(seconds // 2)):
        for offset, announcement in enumerate(sample_announcements(step)):
            events.append(announcement_event(announcement, t0 + 2 * step + 0.3 + 0.1 * offset))
    return events
