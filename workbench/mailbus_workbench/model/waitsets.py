"""Wait-set status: sampled from `WaitSet.stats` at each refresh into a state timeline."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

TIMELINE = 120  # samples kept per wait set


class _Stats(Protocol):
    # Read-only members: a frozen dataclass or a plain object both satisfy them.
    @property
    def waits(self) -> int: ...
    @property
    def timeouts(self) -> int: ...
    @property
    def waiting(self) -> bool: ...
    @property
    def current_timeout(self) -> float | None: ...
    @property
    def wait_started_ns(self) -> int: ...
    @property
    def last_ready(self) -> tuple[str, ...]: ...


class WaitSetLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def stats(self) -> _Stats: ...

    @property
    def entities(self) -> tuple[object, ...]: ...


@dataclass(frozen=True, slots=True)
class EntityRow:
    kind: str  # subscription, client, server, guard
    name: str
    ready: bool


@dataclass(slots=True)
class WaitSetRow:
    key: int | str  # id() of a local wait set; gid:index:name of an announced one
    name: str
    entities: tuple[EntityRow, ...] = ()
    waiting: bool = False
    current_timeout: float | None = None
    waiting_for_s: float = 0.0
    waits: int = 0
    timeouts: int = 0
    last_ready: tuple[str, ...] = ()
    timeline: deque[str] = field(default_factory=lambda: deque(maxlen=TIMELINE))
    process: str = ""  # "" for this process; another participant's `name (host:pid)`


def describe_entity(entity: object) -> EntityRow:
    own_kind = getattr(entity, "kind", None)
    kind = type(entity).__name__
    kinds = {
        "Subscription": "subscription",
        "ServiceClient": "client",
        "ServiceServer": "server",
        "GuardCondition": "guard",
    }
    name = (
        getattr(entity, "topic", None)
        or getattr(entity, "service", None)
        or getattr(entity, "name", "")
        or ""
    )
    is_ready = getattr(entity, "is_ready", None)
    ready = bool(is_ready()) if callable(is_ready) else False
    label = own_kind if isinstance(own_kind, str) else kinds.get(kind, kind.lower())
    return EntityRow(label, str(name), ready)


class WaitSetMonitor:
    """Rows for the wait sets `source()` returns, keyed by object identity."""

    def __init__(self, source: Callable[[], Iterable[WaitSetLike]]) -> None:
        self._source = source
        self.rows: dict[int, WaitSetRow] = {}

    def sample(self, now_ns: int) -> None:
        seen = set()
        for wait_set in self._source():
            key = id(wait_set)
            seen.add(key)
            stats = wait_set.stats
            row = self.rows.get(key)
            if row is None:
                row = self.rows[key] = WaitSetRow(
                    key,
                    wait_set.name or f"wait set {len(self.rows) + 1}",
                    waits=stats.waits,
                    timeouts=stats.timeouts,
                )
            # A state letter per sample: w waiting, r completed waits, t a time-out, . idle.
            if stats.timeouts > row.timeouts:
                state = "t"
            elif stats.waiting:
                state = "w"
            elif stats.waits > row.waits:
                state = "r"
            else:
                state = "."
            row.timeline.append(state)
            row.entities = tuple(describe_entity(e) for e in wait_set.entities)
            row.waiting = stats.waiting
            row.current_timeout = stats.current_timeout
            row.waiting_for_s = (
                max(0.0, (now_ns - stats.wait_started_ns) / 1e9) if stats.waiting else 0.0
            )
            row.waits = stats.waits
            row.timeouts = stats.timeouts
            row.last_ready = tuple(stats.last_ready)
        for key in list(self.rows):
            if key not in seen:
                del self.rows[key]

    def ordered(self) -> list[WaitSetRow]:
        return sorted(self.rows.values(), key=lambda r: (r.name, r.key))
