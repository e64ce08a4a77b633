"""The scheduler on a real FsStorage with a fake clock: due times, back-off, dead
letters, recovery, storage failures."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mailbus.errors import ConfigError, EmailFormatError, TransportError
from mailbus.outbox import fs_storage
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.retry import RetryPolicy, is_permanent
from mailbus.outbox.scheduler import NS, Scheduler
from mailbus.outbox.storage import Destination, Entry, Metadata, RetryLaterError, Schedule


class Clock:
    def __init__(self) -> None:
        self.now = 1_000 * NS

    def __call__(self) -> int:
        return self.now


class Deliveries:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.errors: list[Exception] = []

    def __call__(self, entry: Entry, data: bytes) -> None:
        if self.errors:
            raise self.errors.pop(0)
        self.sent.append(data)


def enqueue(storage: FsStorage, data: bytes, when_ns: int, created_ns: int = 0) -> Entry:
    enq = storage.enqueue()
    enq.write(data)
    meta = Metadata("<m@x>", "s@x.org", ("r@y.org",), "s", len(data), created_ns)
    (entry,) = enq.commit([Destination(meta, Schedule(0, when_ns, 0, ""))])
    return entry


def make(tmp_path: Path, policy: RetryPolicy | None = None):  # type: ignore[no-untyped-def]
    storage = FsStorage(tmp_path / "outbox")
    clock = Clock()
    deliveries = Deliveries()
    scheduler = Scheduler(
        storage,
        deliveries,
        policy=policy or RetryPolicy(jitter=0.0),
        clock=clock,
        rand=lambda: 0.5,
    )
    return storage, clock, deliveries, scheduler


def test_only_due_mail_is_sent_in_due_order(tmp_path: Path) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path)
    late = enqueue(storage, b"late", clock.now + 10 * NS)
    early = enqueue(storage, b"early", clock.now)
    scheduler.add([late, early])
    assert scheduler.run_due() == 1
    assert deliveries.sent == [b"early"]
    assert scheduler.next_due_ns() == clock.now + 10 * NS
    clock.now += 10 * NS
    assert scheduler.run_due() == 1
    assert deliveries.sent == [b"early", b"late"]
    assert os.listdir(storage.data) == []


def test_failures_back_off_exponentially_then_dead_letter(tmp_path: Path) -> None:
    policy = RetryPolicy(first_delay_s=5, factor=2, max_delay_s=15, max_attempts=4, jitter=0)
    storage, clock, deliveries, scheduler = make(tmp_path, policy)
    scheduler.add([enqueue(storage, b"x", clock.now, created_ns=clock.now)])
    delays = []
    for _ in range(3):
        deliveries.errors.append(TransportError("down"))
        assert scheduler.run_due() == 1
        (entry,) = storage.list_queue().entries
        assert entry.schedule.last_error == "TransportError: down"
        assert entry.schedule.last_attempt_ns == clock.now
        delays.append((entry.schedule.next_attempt_ns - clock.now) / NS)
        assert scheduler.run_due() == 0  # not due yet
        clock.now = entry.schedule.next_attempt_ns
    assert delays == [5.0, 10.0, 15.0]  # doubling, capped at max_delay_s
    deliveries.errors.append(TransportError("still down"))
    scheduler.run_due()
    assert storage.list_queue().entries == ()
    (dead,) = storage.list_dead().entries
    assert dead.schedule.attempts == 4
    assert scheduler.counts["dead_lettered"] == 1


def test_mail_older_than_max_age_is_given_up_at_its_next_failure(tmp_path: Path) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path, RetryPolicy(max_age_s=60, jitter=0))
    scheduler.add([enqueue(storage, b"x", clock.now, created_ns=clock.now - 61 * NS)])
    deliveries.errors.append(TransportError("down"))
    scheduler.run_due()
    assert len(storage.list_dead().entries) == 1


def test_a_permanent_error_dead_letters_at_once(tmp_path: Path) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path)
    scheduler.add([enqueue(storage, b"x", clock.now)])
    rejected = TransportError("550 no such user")
    rejected.permanent = True  # type: ignore[attr-defined]
    deliveries.errors.append(rejected)
    scheduler.run_due()
    (dead,) = storage.list_dead().entries
    assert dead.schedule.attempts == 1 and "550" in dead.schedule.last_error


def test_is_permanent() -> None:
    assert is_permanent(EmailFormatError("bad"))
    assert not is_permanent(TransportError("timeout"))
    assert not is_permanent(OSError("reset"))


def test_recovery_finishes_cleanups_requeues_inflight_and_removes_uncommitted(
    tmp_path: Path,
) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path)
    done = enqueue(storage, b"done", clock.now)
    storage.send_done(storage.send_start(done))  # died before cleanup
    inflight = storage.send_start(enqueue(storage, b"inflight", clock.now))  # died sending
    queued = enqueue(storage, b"queued", clock.now)
    storage.enqueue().write(b"never committed")
    report = scheduler.recover()
    assert (report.cleanups_finished, report.inflight_requeued, report.uncommitted_removed) == (
        1,
        1,
        1,
    )
    assert report.queued == 2
    assert sorted(e.id for e in storage.list_queue().entries) == sorted([inflight.id, queued.id])
    assert scheduler.run_due() == 2
    assert sorted(deliveries.sent) == [b"inflight", b"queued"]
    assert os.listdir(storage.data) == []


def test_a_storage_failure_after_sending_is_retried_without_sending_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path)
    scheduler.add([enqueue(storage, b"x", clock.now)])
    real_rename = os.rename

    def failing_rename(src: object, dst: object) -> None:
        if "cleanup" in str(dst):
            raise OSError(errno.EIO, "injected", str(dst))
        real_rename(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(fs_storage.os, "rename", failing_rename)
    scheduler.run_due()
    assert deliveries.sent == [b"x"]
    assert scheduler.counts["storage_errors"] == 1
    assert len(storage.find_inflight().entries) == 1
    assert scheduler.pending() == 1
    monkeypatch.setattr(fs_storage.os, "rename", real_rename)
    scheduler.run_due()
    assert deliveries.sent == [b"x"]  # recorded as done, not sent again
    assert os.listdir(storage.data) == []


def test_a_failed_requeue_after_a_failed_send_is_retried_without_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path)
    scheduler.add([enqueue(storage, b"x", clock.now)])
    real_cancel = storage.send_cancel
    failures = [RetryLaterError("disk busy")]

    def cancel_failing_once(entry: Entry) -> Entry:
        if failures:
            raise failures.pop()
        return real_cancel(entry)

    monkeypatch.setattr(storage, "send_cancel", cancel_failing_once)
    deliveries.errors.append(TransportError("down"))
    scheduler.run_due()  # the send fails, and so does putting it back in the queue
    assert scheduler.counts["storage_errors"] == 1
    assert len(storage.find_inflight().entries) == 1 and scheduler.pending() == 1
    scheduler.run_due()  # the storage works again: back in the queue, due later
    assert storage.find_inflight().entries == () and len(storage.list_queue().entries) == 1
    clock.now = storage.list_queue().entries[0].schedule.next_attempt_ns
    scheduler.run_due()
    assert deliveries.sent == [b"x"] and os.listdir(storage.data) == []


def test_retry_now_makes_named_entries_due(tmp_path: Path) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path)
    a = enqueue(storage, b"a", clock.now + 100 * NS)
    b = enqueue(storage, b"b", clock.now + 100 * NS)
    scheduler.add([a, b])
    assert scheduler.retry_now([b.id]) == 1
    scheduler.run_due()
    assert deliveries.sent == [b"b"]


@given(
    attempts=st.integers(min_value=1, max_value=200),
    rand=st.floats(min_value=0, max_value=0.999),
)
def test_delays_stay_within_bounds(attempts: int, rand: float) -> None:
    policy = RetryPolicy()
    delay = policy.delay_s(attempts, rand)
    assert policy.first_delay_s * 0.9 <= delay <= policy.max_delay_s * 1.1
    assert policy.delay_s(attempts + 1, 0.5) >= policy.delay_s(attempts, 0.5)


def test_policy_from_options_and_its_errors() -> None:
    policy = RetryPolicy.from_mapping({"first-delay-s": 1, "max-attempts": 3})
    assert (policy.first_delay_s, policy.max_attempts) == (1.0, 3)
    with pytest.raises(ConfigError, match=r"outbox\.max-attempts"):
        RetryPolicy.from_mapping({"max-attempts": 2.5})
    with pytest.raises(ConfigError, match=r"outbox\.factor"):
        RetryPolicy.from_mapping({"factor": "fast"})
    with pytest.raises(ConfigError, match=r"outbox\.jitter"):
        RetryPolicy(jitter=1.5)


def test_an_outage_costs_one_back_off_not_one_attempt_per_entry(tmp_path: Path) -> None:
    policy = RetryPolicy(first_delay_s=5, factor=2, max_delay_s=60, jitter=0)
    storage, clock, deliveries, scheduler = make(tmp_path, policy)
    scheduler.add([enqueue(storage, b"m%d" % i, clock.now, clock.now) for i in range(100)])
    deliveries.errors.append(TransportError("connection refused"))
    assert scheduler.run_due() == 1  # one probe failed: the other 99 wait with it
    assert scheduler.in_outage and scheduler.pending() == 100 and deliveries.sent == []
    assert scheduler.next_due_ns() == clock.now + 5 * NS
    assert scheduler.run_due() == 0
    clock.now += 5 * NS
    deliveries.errors.append(TransportError("still refused"))
    assert scheduler.run_due() == 1  # one probe again, then a longer hold
    assert scheduler.next_due_ns() == clock.now + 10 * NS
    clock.now += 10 * NS
    assert scheduler.run_due() == 100  # the probe got through: everything goes
    assert len(deliveries.sent) == 100 and not scheduler.in_outage
    assert scheduler.counts["rescheduled"] == 2  # 2 failed attempts for 100 messages


def test_a_retry_by_hand_is_attempted_during_an_outage_hold(tmp_path: Path) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path, RetryPolicy(first_delay_s=600))
    entries = [enqueue(storage, b"m%d" % i, clock.now, clock.now) for i in range(3)]
    scheduler.add(entries)
    deliveries.errors.append(TransportError("down"))
    assert scheduler.run_due() == 1 and scheduler.in_outage
    assert scheduler.run_due() == 0  # m1 is held with the outage
    assert scheduler.retry_now([entries[2].id]) == 1
    # The one asked for goes at once; it got through, so the outage is over and m1 follows.
    # m0, the failed probe, keeps its own back-off.
    assert scheduler.run_due() == 2
    assert deliveries.sent == [b"m2", b"m1"] and not scheduler.in_outage


def test_a_permanent_refusal_is_no_outage(tmp_path: Path) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path)
    scheduler.add([enqueue(storage, b"m%d" % i, clock.now, clock.now) for i in range(3)])
    rejected = TransportError("550 no such user")
    rejected.permanent = True  # type: ignore[attr-defined]
    deliveries.errors.append(rejected)
    assert scheduler.run_due() == 3  # the others go at once
    assert not scheduler.in_outage and len(deliveries.sent) == 2


def test_every_entry_retried_by_hand_is_attempted_even_if_the_first_fails(
    tmp_path: Path,
) -> None:
    storage, clock, deliveries, scheduler = make(tmp_path, RetryPolicy(first_delay_s=600))
    scheduler.add([enqueue(storage, b"m%d" % i, clock.now, clock.now) for i in range(3)])
    deliveries.errors.append(TransportError("down"))
    assert scheduler.run_due() == 1 and scheduler.in_outage
    assert scheduler.retry_now() == 3
    deliveries.errors.append(TransportError("still down"))
    assert scheduler.run_due() == 3  # one failed, and the two others were still tried
    assert len(deliveries.sent) == 2 and scheduler.pending() == 1
    assert scheduler.run_due() == 0  # the one that failed again waits out its back-off
