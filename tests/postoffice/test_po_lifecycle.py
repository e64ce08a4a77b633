"""A mailbox's life: the rules as pure functions, then the daemon applying them (a small
cap, idle expiry driven by a clock the test moves)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from mailbus.postoffice import lifecycle
from mailbus.postoffice.client import DeliveryFailed
from mailbus.postoffice.lifecycle import Room, make_room

from .conftest import Daemon, wait_until


# -- the rules ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("waiting", "pending", "cap", "when_full", "in_flight", "room"),
    [
        (0, 0, 3, "drop-oldest", False, Room(True, 0)),
        (2, 0, 3, "drop-oldest", False, Room(True, 0)),
        (3, 0, 3, "drop-oldest", False, Room(True, 1)),
        (3, 0, 3, "refuse", False, Room(False, 0)),
        (2, 1, 3, "drop-oldest", False, Room(True, 1)),  # pending counts towards the cap
        (5, 0, 3, "drop-oldest", False, Room(True, 3)),  # a cap lowered at restart
        (1, 0, 1, "drop-oldest", True, Room(False, 0)),  # the letter in hand stays
        (2, 0, 2, "drop-oldest", True, Room(True, 1)),
        (0, 2, 2, "drop-oldest", False, Room(False, 0)),  # nothing stored to drop yet
    ],
)
def test_make_room(
    waiting: int,
    pending: int,
    cap: int,
    when_full: lifecycle.WhenFull,
    in_flight: bool,
    room: Room,
) -> None:
    assert make_room(waiting, pending, cap, when_full, in_flight) == room


def test_make_room_needs_a_positive_cap() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        make_room(0, 0, 0, "drop-oldest")


@pytest.mark.parametrize(
    ("since", "now", "limit", "expired"),
    [
        (None, 1e9, 10.0, False),  # checked out: never idle
        (100.0, 109.9, 10.0, False),
        (100.0, 110.0, 10.0, True),
        (100.0, 1e9, 0.0, False),  # expiry off
    ],
)
def test_is_expired(since: float | None, now: float, limit: float, expired: bool) -> None:
    assert lifecycle.is_expired(since, now, limit) is expired


def test_expired_names_and_sweep_interval() -> None:
    boxes = [("a", 0.0), ("b", None), ("c", 95.0), ("d", 50.0)]
    assert lifecycle.expired(boxes, 100.0, 50.0) == ["a", "d"]
    assert lifecycle.sweep_interval(86400.0) == 60.0
    assert lifecycle.sweep_interval(30.0) == 3.0
    assert lifecycle.sweep_interval(0.5) == 1.0
    assert lifecycle.idle_seconds(None, 5.0) is None
    assert lifecycle.idle_seconds(2.0, 5.0) == 3.0


# -- the daemon ---------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_full_box_drops_its_oldest_letters_counted_and_traced(
    make_daemon: Callable[..., Daemon],
) -> None:
    daemon = make_daemon(max_letters_per_box=3)  # drop-oldest is the default
    with daemon.client() as sender, daemon.client() as reader:
        sender.create_box("cap.sender", "pw")
        sender.create_box("cap.box", "pw")
        sender.check_out("cap.sender", "pw")
        for i in range(5):
            sender.send("cap.box", f"letter {i}".encode())  # never refused
        reader.check_out("cap.box", "pw")
        assert [x.payload for x in reader.get_mail(0)] == [b"letter 2", b"letter 3", b"letter 4"]
        status = {s.name: s for s in daemon.thread.call(daemon.office.status)}
        assert status["cap.box"].dropped == 2
        drops = [e for e in daemon.events if e.kind == "postoffice.letters_dropped"]
        assert [(e.name, e.extra["count"], e.extra["dropped"]) for e in drops] == [
            ("cap.box", 1, 1),
            ("cap.box", 1, 2),
        ]


def test_the_letter_in_a_readers_hands_is_not_dropped(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(max_letters_per_box=2)
    with daemon.client() as sender, daemon.client() as reader:
        sender.create_box("hand.sender", "pw")
        sender.create_box("hand.box", "pw")
        sender.check_out("hand.sender", "pw")
        sender.send("hand.box", b"first")
        sender.send("hand.box", b"second")
        reader.check_out("hand.box", "pw")
        letters = reader.get_mail(5.0)
        assert next(letters).payload == b"first"  # in the reader's hands, not taken yet
        sender.send("hand.box", b"third")  # drops "second", not "first"
        assert next(letters).payload == b"third"
        letters.close()  # SATIATED


def test_refuse_when_full_is_still_available(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(max_letters_per_box=1, when_full="refuse")
    with daemon.client() as sender:
        sender.create_box("full.sender", "pw")
        sender.create_box("full.box", "pw")
        sender.check_out("full.sender", "pw")
        sender.send("full.box", b"one")
        with pytest.raises(DeliveryFailed):
            sender.send("full.box", b"two")
    assert "postoffice.letters_dropped" not in daemon.kinds()


def test_idle_boxes_expire_by_the_daemons_clock(make_daemon: Callable[..., Daemon]) -> None:
    clock = Clock()
    daemon = make_daemon(clock=clock, expire_idle_s=100.0)
    sweep = daemon.office.housekeeper.sweep
    with daemon.client() as holder, daemon.client() as other:
        for name in ("idle.held", "idle.returned", "idle.never"):
            holder.create_box(name, "pw")
        holder.check_out("idle.held", "pw")  # held throughout: never idle
        holder.send("idle.never", b"a letter goes with its box")
        clock.now += 50
        other.check_out("idle.returned", "pw")
        assert daemon.thread.call(sweep) == []
        clock.now += 10
        other.return_box()  # idle from now (1060)
        clock.now = 1100.0
        assert daemon.thread.call(sweep) == ["idle.never"]
        status = {s.name: s.idle_s for s in daemon.thread.call(daemon.office.status)}
        assert status == {"idle.held": None, "idle.returned": 40.0}
        clock.now = 1160.0
        assert daemon.thread.call(sweep) == ["idle.returned"]
        clock.now = 10_000.0
        assert daemon.thread.call(sweep) == []
        holder.send("idle.held", b"still there")  # the held box works on
    removed = [e for e in daemon.events if e.kind == "postoffice.box_removed"]
    assert [(e.name, e.extra["letters"]) for e in removed] == [
        ("idle.never", 1),
        ("idle.returned", 0),
    ]
    assert all("expired: idle" in e.detail for e in removed)
    # Gone from the store too: a restart does not bring them back.
    daemon.thread.stop()
    from mailbus.postoffice.store import list_mailboxes

    assert [b.name for b in list_mailboxes(daemon.config.store_path)] == ["idle.held"]


def test_the_daemon_sweeps_on_its_own(make_daemon: Callable[..., Daemon]) -> None:
    clock = Clock()
    daemon = make_daemon(clock=clock, expire_idle_s=1.0)  # sweeps once a second
    with daemon.client() as client:
        client.create_box("sweep.me", "pw")
    clock.now += 5.0
    daemon.wait_for(lambda: "sweep.me" not in daemon.office.boxes, timeout=10.0)
    wait_until(lambda: "postoffice.box_removed" in daemon.kinds())
