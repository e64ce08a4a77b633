"""The periodic announcer: a thread that describes its context (`mailbus.presence`) and
sends the announcement on the participants topic every `announce-period-s`, and a
goodbye when the context shuts down. A failed send is traced and retried at the next
period; it never stops the thread or the context."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from mailbus.names import check_name
from mailbus.presence import (
    Announcement,
    BrokerInfo,
    EntityInfo,
    ModuleInfo,
    PresenceState,
    WaitEntityInfo,
    WaitSetInfo,
    encode,
    safe_label,
)
from mailbus.publisher import Publisher
from mailbus.service import ServiceClient, ServiceServer
from mailbus.subscription import Subscription
from mailbus.trace import Kind, Tracer
from mailbus.waitset import WaitSet

log = logging.getLogger(__name__)

FOLLOW_UP_S = 1.0  # the second announcement, at most this long after the first
DESCRIBE_ATTEMPTS = 3


class _ModuleStats(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def queue_depth(self) -> int: ...
    @property
    def capacity(self) -> int: ...


class _BrokerSnapshot(Protocol):
    @property
    def modules(self) -> Sequence[_ModuleStats]: ...


class BrokerLike(Protocol):
    """What the announcer reads of a broker (mailbus.broker.Broker)."""

    def snapshot(self) -> _BrokerSnapshot: ...


class ParticipantSource(Protocol):
    """What the announcer reads of its context."""

    @property
    def participant_gid(self) -> str: ...
    @property
    def participant_name(self) -> str: ...
    @property
    def transport_name(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def announced_publishers(self) -> Iterable[Publisher]: ...
    @property
    def subscriptions(self) -> list[Subscription]: ...
    @property
    def servers(self) -> list[ServiceServer]: ...
    @property
    def clients(self) -> list[ServiceClient]: ...
    @property
    def wait_sets(self) -> list[WaitSet]: ...
    @property
    def brokers(self) -> Mapping[str, BrokerLike]: ...
    def outbox_depth(self) -> int | None: ...


def default_name() -> str:
    """`program-pid`: the script's name without suffix (`python` when there is none
    usable), so that two runs of one program tell apart."""
    program = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else ""
    if not program or program.startswith("-"):
        program = "python"
    return safe_label(f"{program}-{os.getpid()}", f"python-{os.getpid()}")


def _entities(source: ParticipantSource) -> tuple[EntityInfo, ...]:
    found = [EntityInfo("publisher", p.topic) for p in source.announced_publishers]
    found += [EntityInfo("subscription", s.topic, len(s)) for s in source.subscriptions]
    found += [EntityInfo("server", s.service, s.queued) for s in source.servers]
    found += [EntityInfo("client", c.service, c.pending) for c in source.clients]
    return tuple(sorted(found, key=lambda e: (e.kind, e.name)))


def _wait_set(wait_set: WaitSet) -> WaitSetInfo:
    stats = wait_set.stats
    entities = []
    for entity in wait_set.entities:
        if isinstance(entity, Subscription):
            kind, name = "subscription", entity.topic
        elif isinstance(entity, ServiceClient):
            kind, name = "client", entity.service
        elif isinstance(entity, ServiceServer):
            kind, name = "server", entity.service
        else:
            kind, name = "guard", str(getattr(entity, "name", ""))
        entities.append(WaitEntityInfo(kind, safe_label(name, ""), entity.is_ready()))
    return WaitSetInfo(
        name=safe_label(wait_set.name, ""),
        waiting=stats.waiting,
        timeout_s=stats.current_timeout if stats.waiting else None,
        waits=stats.waits,
        timeouts=stats.timeouts,
        last_ready=tuple(safe_label(r, "") for r in stats.last_ready),
        entities=tuple(entities),
    )


def _broker(name: str, broker: BrokerLike) -> BrokerInfo:
    modules = tuple(
        ModuleInfo(
            safe_label(m.name),
            safe_label(m.kind),
            safe_label(str(m.state)),
            m.queue_depth,
            m.capacity,
        )
        for m in broker.snapshot().modules
    )
    return BrokerInfo(safe_label(name), modules)


def describe(
    source: ParticipantSource,
    *,
    period_s: float,
    state: PresenceState = PresenceState.ALIVE,
    sequence: int = 0,
) -> Announcement:
    """What `source` announces now."""
    timeout_cap = 86_400.0  # a wait of hours is shown as that; the codec's upper bound
    wait_sets = []
    for wait_set in sorted(source.wait_sets, key=lambda w: w.name):
        info = _wait_set(wait_set)
        if info.timeout_s is not None and info.timeout_s > timeout_cap:
            info = replace(info, timeout_s=None)
        wait_sets.append(info)
    return Announcement(
        gid=source.participant_gid,
        name=source.participant_name,
        host=safe_label(socket.gethostname(), "localhost"),
        pid=os.getpid(),
        transport=source.transport_name,
        period_s=period_s,
        state=state,
        sequence=sequence,
        address=safe_label(source.address, ""),
        entities=_entities(source),
        wait_sets=tuple(wait_sets),
        brokers=tuple(_broker(n, b) for n, b in sorted(source.brokers.items())),
        outbox_depth=source.outbox_depth(),
    )


class Announcer:
    """Announces `source` every `period_s` seconds through `send(body, sequence)`."""

    def __init__(
        self,
        source: ParticipantSource,
        send: Callable[[str, int], None],
        period_s: float,
        tracer: Tracer,
    ) -> None:
        if not period_s > 0:
            raise ValueError(f"announce period must be above 0 seconds, got {period_s}")
        check_name(source.participant_name, "participant")
        self.source = source
        self.period_s = period_s
        self.sent = 0
        self.failures = 0
        self._send = send
        self._tracer = tracer
        self._sequence = 0
        self._lock = threading.Lock()  # one announcement at a time, in sequence order
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mailbus-announcer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # At once, so that viewers list it; again soon, with the entities made just after
        # init; then every period (which paces them; stop() ends the wait at once).
        self.announce()
        wait = min(self.period_s, FOLLOW_UP_S)
        while not self._stop.wait(wait):
            self.announce()
            wait = self.period_s

    def announce(self, state: PresenceState = PresenceState.ALIVE) -> bool:
        """Send one announcement now; False (traced as an error) if it failed."""
        with self._lock:
            self._sequence += 1
            sequence = self._sequence
            try:
                body = encode(self._describe(state, sequence))
                self._send(body, sequence)
            except Exception as exc:
                self.failures += 1
                if self.failures == 1 or self.failures % 100 == 0:
                    log.warning("announcement failed (%d so far): %s", self.failures, exc)
                self._tracer.event(
                    Kind.ERROR,
                    name=self.source.participant_name,
                    detail=f"participant announcement failed: {exc}",
                )
                return False
            self.sent += 1
        tracer = self._tracer
        if tracer.active:
            tracer.event(
                Kind.ANNOUNCED,
                name=self.source.participant_name,
                gid=self.source.participant_gid,
                sequence_number=sequence,
                size=len(body),
                detail=state.value,
            )
        return True

    def _describe(self, state: PresenceState, sequence: int) -> Announcement:
        # Entities are held in weak sets that other threads change: a copy taken during
        # a change raises RuntimeError ("changed size during iteration"); take it again.
        for _ in range(DESCRIBE_ATTEMPTS - 1):
            try:
                return describe(self.source, period_s=self.period_s, state=state, sequence=sequence)
            except RuntimeError:
                continue
        return describe(self.source, period_s=self.period_s, state=state, sequence=sequence)

    def stop(self, goodbye: bool = True, timeout: float = 5.0) -> None:
        """Stop announcing; `goodbye`: say so, so that viewers drop this participant
        at once instead of after missed periods."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if goodbye:
            self.announce(PresenceState.GOODBYE)
