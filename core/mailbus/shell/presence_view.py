"""Participants as their announcements describe them (mailbus.presence), gathered from
the traffic a shell tool watches."""

from __future__ import annotations

import argparse
from typing import Any

from mailbus import presence
from mailbus.presence import Announcement, PresenceError, PresenceState
from mailbus.shell.exit_codes import ExitCode
from mailbus.shell.output import Output
from mailbus.shell.session import deadline_after, listen, open_system, run, traffic_of
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


def gather(args: argparse.Namespace, summary: dict[str, Any]) -> Presence:
    """The participants that announce themselves within `args.seconds` (or until
    Ctrl-C, which `summary` then says)."""
    found = Presence()
    with open_system(args, listen=True) as ctx:
        listen(traffic_of(ctx), deadline_after(args.seconds), found.take, summary)
    return found


def entity_info(args: argparse.Namespace, what: str, name: str, kinds: tuple[str, str]) -> int:
    """`topic info` / `service info`: who holds each of the two `kinds` of entity named
    `name` (publishers and subscriptions, or servers and clients)."""

    def work(out: Output, summary: dict[str, Any]) -> ExitCode:
        found = gather(args, summary)
        first, second = (found.holders(kind, name) for kind in kinds)
        keys = {
            "publisher": "publishers",
            "subscription": "subscribers",
            "server": "servers",
            "client": "clients",
        }
        summary.update({keys[kinds[0]]: len(first), keys[kinds[1]]: len(second)})
        out.emit(
            f"{what.capitalize()}: {name}\n{kinds[0].capitalize()} count: {len(first)}\n"
            + "".join(f"  {h}\n" for h in first)
            + f"{kinds[1].capitalize()} count: {len(second)}"
            + "".join(f"\n  {h}" for h in second),
            {what: name, keys[kinds[0]]: first, keys[kinds[1]]: second},
        )
        return ExitCode.OK

    return run(args, work)
