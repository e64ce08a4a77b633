"""The participant directory (model/participants.py) inside the workbench model: who is
listed, when they go (goodbye, missed periods), and what a bad announcement does."""

from __future__ import annotations

from dataclasses import replace

from mailbus.presence import TOPIC, PresenceState
from mailbus.trace import Kind
from mailbus_workbench.model.participants import GRACE_S, MISSED_PERIODS
from mailbus_workbench.model.state import WorkbenchModel
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.participants import (
    GID_ARM,
    GID_GATEWAY,
    announcement_event,
    sample_announcements,
)


def model_at(t: float = T0) -> tuple[WorkbenchModel, FrozenClock]:
    clock = FrozenClock(t)
    return WorkbenchModel(clock=clock), clock


def announce(model: WorkbenchModel, step: int, t: float, *, skip: str = "") -> None:
    model.feed_events(announcement_event(a, t) for a in sample_announcements(step) if a.gid != skip)
    model.pump()


def test_announcements_list_participants_and_stay_out_of_topics() -> None:
    model, _ = model_at()
    announce(model, 0, T0)
    assert [p.name for p in model.participants.ordered()] == ["gateway", "planner", "robot-arm"]
    assert TOPIC not in model.topics.stats
    arm = model.participants.participants[GID_ARM]
    assert arm.label == "robot-arm (lab-pc-2:4242)"
    assert arm.announcement.outbox_depth == 4
    assert arm.sender == "arm@lab.example"


def test_goodbye_drops_at_once_and_a_late_announcement_does_not_revive() -> None:
    model, _ = model_at()
    announce(model, 0, T0)
    arm = sample_announcements(1)[0]
    model.feed_events([announcement_event(replace(arm, state=PresenceState.GOODBYE), T0 + 1)])
    model.pump()
    assert GID_ARM not in model.participants.participants
    # An alive one sent before the goodbye, arriving after it.
    model.feed_events([announcement_event(sample_announcements(0)[0], T0 + 1.5)])
    model.pump()
    assert GID_ARM not in model.participants.participants


def test_a_silent_participant_goes_after_missed_periods() -> None:
    model, clock = model_at()
    announce(model, 0, T0)
    period = sample_announcements(0)[0].period_s
    # The others go on announcing; robot-arm has died.
    for step in range(1, MISSED_PERIODS + 2):
        clock.now = T0 + step * period
        announce(model, step, clock.now, skip=GID_ARM)
        if clock.now <= T0 + MISSED_PERIODS * period + GRACE_S:
            assert GID_ARM in model.participants.participants, step
    assert GID_ARM not in model.participants.participants
    assert GID_GATEWAY in model.participants.participants
    assert model.participants.dropped == 1


def test_an_older_or_repeated_announcement_changes_nothing() -> None:
    model, _ = model_at()
    announce(model, 3, T0)
    announce(model, 1, T0 + 1)
    arm = model.participants.participants[GID_ARM]
    assert (arm.announcement.sequence, arm.announcements) == (4, 1)


def test_remote_wait_sets_get_a_timeline_and_own_process_is_left_out() -> None:
    model, _ = model_at()
    for step in range(4):
        announce(model, step, T0 + 2 * step)
    rows = {row.process: row for row in model.wait_set_rows()}
    arm = rows["robot-arm (lab-pc-2:4242)"]
    assert arm.name == "arm/control"
    # 0: waiting; 1: idle after more waits; 2: a time-out (3 -> 4); 3: waiting again.
    assert "".join(arm.timeline) == "wrtw"
    assert [e.kind for e in arm.entities] == ["subscription", "server", "guard"]
    assert "".join(rows["planner (lab-pc-2:4301)"].timeline) == ".rrr"
    model.participants.own_gid = GID_ARM
    assert "robot-arm (lab-pc-2:4242)" not in {r.process for r in model.wait_set_rows()}
    assert [label for label, _ in model.participants.remote_brokers()] == ["gateway (edge-1:77)"]


def test_malformed_or_foreign_announcements_become_notices() -> None:
    model, _ = model_at()
    good = announcement_event(sample_announcements(0)[0], T0)
    bad = [
        replace(good, body="not json at all"),
        replace(good, body='{"format": "someone-else/3"}'),
        replace(good, source_gid="f" * 32),  # the body claims another participant's gid
        replace(good, body=None),
    ]
    model.feed_events(bad)
    model.pump()
    assert model.participants.participants == {}
    notices = [n for n in model.notices if n.kind == Kind.ANNOUNCEMENT_INVALID]
    assert len(notices) == len(bad) == model.participants.invalid
    assert "not JSON" in notices[0].detail and "arm@lab.example" in notices[0].detail
    assert "not a participant announcement" in notices[1].detail
    assert "not the sender's Publisher-GID" in notices[2].detail
    # And the next good one is taken as usual.
    model.feed_events([good])
    model.pump()
    assert GID_ARM in model.participants.participants
