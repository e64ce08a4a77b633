"""Plain, immutable pictures of a broker for the workbench and for tests."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ModuleState(StrEnum):
    """A module's worker: running; stopping once its removal began; stopped when the
    worker ended; failed when the worker died while the module was still attached."""

    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ModuleStats:
    name: str
    kind: str  # the module's class name
    state: ModuleState
    started: bool  # start() has run
    queue_depth: int
    capacity: int
    backpressure: str  # e.g. "block 10s", "drop_oldest"
    published: int  # messages this module published as a source
    delivered: int  # receive() returned
    failed: int  # receive() raised (the message was handed over, the module failed)
    dropped: int  # discarded by a drop policy or a removal without drain
    refused: int  # a blocking publish timed out before there was room
    blocked_publishers: int  # publishers waiting for room right now


@dataclass(frozen=True, slots=True)
class LinkInfo:
    source: str  # a module name, or "*" for every other module
    sink: str
    backpressure: str  # "" when the link uses the sink's own policy


@dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    time_ns: int
    refcount: int
    destroyed: bool
    modules: tuple[ModuleStats, ...]
    links: tuple[LinkInfo, ...]

    def module(self, name: str) -> ModuleStats:
        for stats in self.modules:
            if stats.name == name:
                return stats
        raise KeyError(name)
