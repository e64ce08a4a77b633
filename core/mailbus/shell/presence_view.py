"""Participants as their announcements describe them (mailbus.presence), gathered from
the traffic a shell tool watches."""

from __future__ import annotations

from mailbus import presence
from mailbus.presence import Announcement, PresenceError, PresenceState
from mailbus.trace import TraceEvent


class Presence:
    def __init__(self) -> None:
        self.participants: dict[str, Announcement] = {}
        self.malformed = 0

    def take(self, event: TraceEvent) -> bool:
        """Keep `event` if it is an announcement; True when it was one."""
        if event.name != presence.TOPIC:
            return False
        try:
            announcement = presence.decode(event.body or "")
        except PresenceError:
            self.malformed += 1
            return True
        if announcement.state is PresenceState.GOODBYE:
            self.participants.pop(announcement.gid, None)
        else:
            self.participants[announcement.gid] = announcement
        return True

    def topics(self) -> set[str]:
        return {
            e.name
            for a in self.participants.values()
            for e in a.entities
            if e.kind in ("publisher", "subscription")
        }

    def services(self) -> set[str]:
        return {
            e.name
            for a in self.participants.values()
            for e in a.entities
            if e.kind in ("server", "client")
        }

    def holders(self, kind: str, name: str) -> list[str]:
        """`name (host pid)` of each participant with an entity of `kind` named `name`."""
        return sorted(
            label(a)
            for a in self.participants.values()
            if any(e.kind == kind and e.name == name for e in a.entities)
        )

    def find(self, key: str) -> Announcement | None:
        """A participant by GID (or its start) or by name."""
        for announcement in self.participants.values():
            if announcement.gid.startswith(key) or announcement.name == key:
                return announcement
        return None


def label(announcement: Announcement) -> str:
    return f"{announcement.name} ({announcement.host} pid {announcement.pid})"
