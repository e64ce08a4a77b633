"""Wait sets: block until any of a set of subscriptions, clients, servers and guard
conditions is ready, for a bounded time or for ever. Waiting blocks on a condition
variable that the entities notify; it never spins."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import TypeVar

from mailbus.envelope import Message, Request, Response
from mailbus.errors import WaitSetError
from mailbus.guard_condition import GuardCondition
from mailbus.host import EntityHost
from mailbus.service import ServiceClient, ServiceServer
from mailbus.subscription import Subscription
from mailbus.trace import Kind
from mailbus.waitable import Waitable

W = TypeVar("W", bound=Waitable)


@dataclass(frozen=True, slots=True)
class WaitResult:
    subscriptions: tuple[Subscription, ...] = ()
    clients: tuple[ServiceClient, ...] = ()
    servers: tuple[ServiceServer, ...] = ()
    guard_conditions: tuple[GuardCondition, ...] = ()

    @property
    def timed_out(self) -> bool:
        return not self

    def __bool__(self) -> bool:
        return bool(self.subscriptions or self.clients or self.servers or self.guard_conditions)


@dataclass(slots=True)
class WaitStats:
    """What the workbench shows of a wait set."""

    waits: int = 0
    timeouts: int = 0
    waiting: bool = False
    current_timeout: float | None = None
    wait_started_ns: int = 0
    last_ready: tuple[str, ...] = field(default_factory=tuple)


class WaitSet:
    def __init__(self, context: EntityHost | None = None, name: str = "") -> None:
        self.name = name
        self.stats = WaitStats()
        self._condition = threading.Condition(threading.Lock())
        self._subscriptions: list[Subscription] = []
        self._clients: list[ServiceClient] = []
        self._servers: list[ServiceServer] = []
        self._guards: list[GuardCondition] = []
        self._context = context
        if context is not None:
            context.register(self)

    def __repr__(self) -> str:
        return (
            f"WaitSet({self.name!r}, subscriptions={len(self._subscriptions)}, "
            f"clients={len(self._clients)}, servers={len(self._servers)}, "
            f"guard_conditions={len(self._guards)})"
        )

    def _add(self, items: list[W], item: W) -> W:
        if any(x is item for x in items):
            return item
        items.append(item)
        item.attach(self._condition)
        return item

    def add_subscription(self, subscription: Subscription) -> Subscription:
        return self._add(self._subscriptions, subscription)

    def add_client(self, client: ServiceClient) -> ServiceClient:
        return self._add(self._clients, client)

    def add_server(self, server: ServiceServer) -> ServiceServer:
        return self._add(self._servers, server)

    def add_guard_condition(self, guard: GuardCondition) -> GuardCondition:
        guard._claim(self)
        return self._add(self._guards, guard)

    @property
    def entities(self) -> tuple[Waitable, ...]:
        return (*self._subscriptions, *self._clients, *self._servers, *self._guards)

    def clear(self) -> None:
        """Remove every entity, so that the wait set can be reused for others."""
        for item in self.entities:
            item.detach(self._condition)
        for guard in self._guards:
            guard.release(self)
        self._subscriptions.clear()
        self._clients.clear()
        self._servers.clear()
        self._guards.clear()

    def close(self) -> None:
        self.clear()
        if self._context is not None:
            self._context.unregister(self)

    def _collect(self) -> WaitResult:
        subscriptions = tuple(s for s in self._subscriptions if s.is_ready())
        clients = tuple(c for c in self._clients if c.is_ready())
        servers = tuple(s for s in self._servers if s.is_ready())
        # Guards last: taking a trigger clears it, so only take when returning.
        if subscriptions or clients or servers:
            guards = tuple(g for g in self._guards if g._take_trigger())
        else:
            guards = tuple(g for g in self._guards if g.is_ready() and g._take_trigger())
        return WaitResult(subscriptions, clients, servers, guards)

    def _closed_contexts(self) -> bool:
        """True once the context of this wait set or of any entity in it is shut down:
        nothing can arrive any more, so a wait must not block for ever."""
        return any(c.is_shut_down for c in self._contexts())

    def _contexts(self) -> list[EntityHost]:
        found = [] if self._context is None else [self._context]
        found.extend(s.host for s in self._subscriptions)
        found.extend(c.host for c in self._clients)
        found.extend(s.host for s in self._servers)
        return found

    def release(self) -> None:
        """Wake a blocked wait (the context is shutting down)."""
        with self._condition:
            self._condition.notify_all()

    def wait(self, timeout: float) -> WaitResult:
        """Wait until an entity is ready: `timeout` < 0 (or infinite) blocks for ever, 0
        only looks, > 0 waits at most that many seconds. An empty wait set waits like a
        sleep. Returns the ready entities; an empty (falsy) result means time-out, or
        that the context was shut down while waiting."""
        if math.isnan(timeout):
            raise ValueError("wait timeout must be a number, not NaN")
        stats = self.stats
        tracer = self._context.tracer if self._context is not None else None
        if tracer is not None and tracer.active:
            tracer.event(Kind.WAIT_STARTED, name=self.name, extra={"timeout_s": timeout})
        forever = timeout < 0 or timeout > threading.TIMEOUT_MAX
        deadline = None if forever else time.monotonic() + timeout
        with self._condition:
            stats.waits += 1
            stats.waiting = True
            stats.current_timeout = None if forever else timeout
            stats.wait_started_ns = time.time_ns()
            try:
                result = self._collect()
                while not result and timeout != 0:
                    # Checked only when about to block: nothing arrives after shutdown.
                    if self._closed_contexts():
                        break
                    if deadline is None:
                        self._condition.wait()
                    else:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            break
                        self._condition.wait(remaining)
                    result = self._collect()
            finally:
                stats.waiting = False
        if not result:
            stats.timeouts += 1
        stats.last_ready = (
            *(s.topic for s in result.subscriptions),
            *(c.service for c in result.clients),
            *(s.service for s in result.servers),
            *(g.name for g in result.guard_conditions),
        )
        if tracer is not None and tracer.active:
            tracer.event(
                Kind.WAIT_COMPLETE if result else Kind.WAIT_TIMED_OUT,
                name=self.name,
                detail=", ".join(stats.last_ready),
                extra={"timeout_s": timeout},
            )
        return result


def wait_for_message(subscription: Subscription, timeout: float) -> Message | None:
    """Take a message from `subscription`, waiting up to `timeout` seconds for one."""
    message = subscription.take()
    if message is None:
        wait_set = WaitSet()
        wait_set.add_subscription(subscription)
        try:
            if wait_set.wait(timeout):
                message = subscription.take()
        finally:
            wait_set.clear()
    return message


def wait_for_request(server: ServiceServer, timeout: float) -> Request | None:
    request = server.take_request()
    if request is None:
        wait_set = WaitSet()
        wait_set.add_server(server)
        try:
            if wait_set.wait(timeout):
                request = server.take_request()
        finally:
            wait_set.clear()
    return request


def wait_for_response(client: ServiceClient, timeout: float) -> Response | None:
    response = client.take_response()
    if response is None:
        wait_set = WaitSet()
        wait_set.add_client(client)
        try:
            if wait_set.wait(timeout):
                response = client.take_response()
        finally:
            wait_set.clear()
    return response


__all__ = [
    "WaitResult",
    "WaitSet",
    "WaitSetError",
    "wait_for_message",
    "wait_for_request",
    "wait_for_response",
]
