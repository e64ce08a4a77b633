"""Every participant in view: the announcements received on the participants topic
(mailbus.presence), folded into one entry per participant. A goodbye drops it at once; a
participant that stops announcing (it died) is dropped once MISSED_PERIODS of its
periods (plus GRACE_S for delivery) pass without one. A body that is not a readable
announcement becomes a `participant.invalid` notice for the Log; nothing else changes.

Pure: the caller passes the time, from the model's clock."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from mailbus.presence import (
    TOPIC,
    Announcement,
    BrokerInfo,
    PresenceError,
    PresenceState,
    WaitSetInfo,
    decode,
)
from mailbus.trace import Kind, TraceEvent

from mailbus_workbench.model.waitsets import TIMELINE, EntityRow, WaitSetRow

MISSED_PERIODS = 3
GRACE_S = 1.0
CAPACITY = 1000  # participants kept at most (the oldest-seen goes first)
GONE_KEPT = 1000  # goodbyes remembered, so that a late announcement does not revive one


@dataclass(slots=True)
class Participant:
    announcement: Announcement
    first_seen: float
    last_seen: float
    sender: str = ""  # the From address of its last announcement
    announcements: int = 1
    wait_set_rows: list[WaitSetRow] = field(default_factory=list)

    @property
    def gid(self) -> str:
        return self.announcement.gid

    @property
    def name(self) -> str:
        return self.announcement.name

    @property
    def label(self) -> str:
        """How other views name its process: `name (host:pid)`."""
        a = self.announcement
        return f"{a.name} ({a.host}:{a.pid})"

    @property
    def expires_at(self) -> float:
        return self.last_seen + MISSED_PERIODS * self.announcement.period_s + GRACE_S


def _state(before: WaitSetInfo | None, now: WaitSetInfo) -> str:
    """The timeline letter of a wait set between two announcements (as in
    model.waitsets: t a time-out, w waiting, r completed waits, . idle)."""
    if before is not None and now.timeouts > before.timeouts:
        return "t"
    if now.waiting:
        return "w"
    if before is not None and now.waits > before.waits:
        return "r"
    return "."


def _wait_set_rows(
    participant: Participant, previous: Announcement | None, now: Announcement
) -> list[WaitSetRow]:
    """Rows for the Wait sets view, their timelines carried on from the previous rows
    (wait sets are matched by name and position)."""
    old_rows = {row.key: row for row in participant.wait_set_rows}
    old_infos = {
        f"{now.gid}:{i}:{w.name}": w for i, w in enumerate(previous.wait_sets if previous else ())
    }
    rows = []
    for i, info in enumerate(now.wait_sets):
        key = f"{now.gid}:{i}:{info.name}"
        old = old_rows.get(key)
        timeline: deque[str] = old.timeline if old is not None else deque(maxlen=TIMELINE)
        timeline.append(_state(old_infos.get(key), info))
        rows.append(
            WaitSetRow(
                key=key,
                name=info.name or f"wait set {i + 1}",
                entities=tuple(EntityRow(e.kind, e.name, e.ready) for e in info.entities),
                waiting=info.waiting,
                current_timeout=info.timeout_s,
                waits=info.waits,
                timeouts=info.timeouts,
                last_ready=info.last_ready,
                timeline=timeline,
                process=participant.label,
            )
        )
    return rows


class ParticipantDirectory:
    def __init__(self) -> None:
        self.participants: dict[str, Participant] = {}
        self.own_gid = ""  # the workbench's own context (its wait sets show live)
        self.invalid = 0
        self.dropped = 0  # participants dropped after missing their periods
        self._gone: OrderedDict[str, int] = OrderedDict()  # gid -> goodbye's sequence

    def add(self, event: TraceEvent, now: float) -> TraceEvent | None:
        """Fold in a received email of the participants topic; return a
        `participant.invalid` notice for one that cannot be read, else None."""
        sender = str(event.extra.get("from", "")) if event.extra else ""
        try:
            announcement = decode(event.body or "")
            if event.source_gid and event.source_gid != announcement.gid:
                raise PresenceError(
                    f"gid {announcement.gid} of the body is not the sender's "
                    f"Publisher-GID {event.source_gid}"
                )
        except PresenceError as exc:
            self.invalid += 1
            return TraceEvent(
                Kind.ANNOUNCEMENT_INVALID.value,
                event.time_ns,
                name=TOPIC,
                source_gid=event.source_gid,
                message_id=event.message_id,
                detail=f"from {sender or 'an unknown sender'}: {exc}",
                extra={"from": sender},
            )
        gid = announcement.gid
        gone = self._gone.get(gid)
        if gone is not None and announcement.sequence <= gone:
            return None  # late, from before its goodbye
        known = self.participants.get(gid)
        if known is not None and announcement.sequence <= known.announcement.sequence:
            return None  # a duplicate or out of order: the newer one stands
        if announcement.state is PresenceState.GOODBYE:
            self.participants.pop(gid, None)
            self._gone[gid] = announcement.sequence
            while len(self._gone) > GONE_KEPT:
                self._gone.popitem(last=False)
            return None
        if known is None:
            known = Participant(announcement, now, now, sender, announcements=0)
            self.participants[gid] = known
            if len(self.participants) > CAPACITY:
                oldest = min(self.participants.values(), key=lambda p: p.last_seen)
                del self.participants[oldest.gid]
        previous = known.announcement if known.announcements else None
        known.announcement = announcement
        known.last_seen = now
        known.sender = sender or known.sender
        known.announcements += 1
        known.wait_set_rows = _wait_set_rows(known, previous, announcement)
        return None

    def expire(self, now: float) -> list[Participant]:
        """Drop the participants that missed MISSED_PERIODS announcements."""
        dead = [p for p in self.participants.values() if now > p.expires_at]
        for participant in dead:
            del self.participants[participant.gid]
        self.dropped += len(dead)
        return dead

    def ordered(self) -> list[Participant]:
        return sorted(self.participants.values(), key=lambda p: (p.name, p.gid))

    def remote(self) -> list[Participant]:
        return [p for p in self.ordered() if p.gid != self.own_gid]

    def remote_wait_sets(self) -> list[WaitSetRow]:
        return [row for p in self.remote() for row in p.wait_set_rows]

    def remote_brokers(self) -> list[tuple[str, BrokerInfo]]:
        return [(p.label, b) for p in self.remote() for b in p.announcement.brokers]

    def clear(self) -> None:
        self.participants.clear()
