"""The engine behind the workbench: a context (in-process demo or a real system from an
options file) whose trace events feed the model, plus publish and call for the forms.

Publish and call block (a real transport talks to servers), so the UI runs them in
workers; this class is thread-safe for that."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mailbus.broker import Broker
from mailbus.context import Context
from mailbus.demo import DemoSystem
from mailbus.envelope import Response
from mailbus.errors import ContextError, MailbusError, TransportError
from mailbus.options import Options, load_options
from mailbus.publisher import Publisher
from mailbus.service import ServiceClient
from mailbus.trace import Kind, TraceEvent
from mailbus.waitset import WaitSet

from mailbus_workbench.viewer_box import remove_viewer_boxes, viewer_box, viewer_options

# Waits between attempts to start a context whose server cannot be reached: growing,
# then every 30 s for as long as the workbench runs.
INIT_RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
DEMO_ANNOUNCE_PERIOD_S = 2.0


class NotConnectedError(MailbusError):
    """Publish or call before the engine reached its server; says why and when it retries."""


@dataclass(frozen=True, slots=True)
class Connection:
    """What the workbench knows of its link to the transport's server.
    `state`: connecting, connected, retrying (with `problem` and `next_attempt`, a
    time.time()), reconnected (after an outage) or failed (with `problem`: the engine
    gave up at start)."""

    state: str
    problem: str = ""
    next_attempt: float = 0.0

    def describe(self, now: float) -> str:
        if self.state == "failed":
            return f"failed to start: {self.problem}"
        if self.state != "retrying":
            return self.state
        wait = math.ceil(max(0.0, self.next_attempt - now))
        return f"{self.problem.rstrip('.')}; retrying in {wait} s"


@dataclass(frozen=True, slots=True)
class CallResult:
    service: str
    request: str
    response: Response
    latency_s: float


class EngineHost:
    """Owns the context the workbench observes. `demo=True` runs the demo system in it."""

    def __init__(
        self,
        options: Options | None = None,
        *,
        demo: bool = True,
        seed: int | None = None,
        speed: float = 1.0,
        viewer: bool = False,
    ) -> None:
        # One of many browser viewers (`mailbus serve`): a PostOffice box of its own.
        self.viewer = viewer
        self.config_file: str | None = None  # the options file attached to, if one
        if options is None and demo:
            # The demo announces itself, so that Participants has something to show.
            options = Options(announce_period_s=DEMO_ANNOUNCE_PERIOD_S)
        self.options = viewer_options(options or Options()) if viewer else options or Options()
        self.context = Context(self.options)
        self.demo: DemoSystem | None = (
            DemoSystem(self.context, speed=speed, seed=seed) if demo else None
        )
        self._publishers: dict[str, Publisher] = {}
        self._clients: dict[str, ServiceClient] = {}
        # The GIDs of every publisher and client made above, closed ones too.
        self._sent_by: set[str] = set()
        self._lock = threading.Lock()
        self._detach: list[Callable[[], None]] = []
        # Brokers shown on the Broker screen, by name (the demo adds one).
        self.brokers: dict[str, Broker] = {}
        self._own_brokers: list[Broker] = []
        self.connection = Connection("connecting")
        self.retry_delays = INIT_RETRY_DELAYS_S
        self._stopping = threading.Event()
        self._detach.append(self.context.tracer.add_listener(self._watch_connection))

    @classmethod
    def from_config(cls, path: str | Path | None, *, viewer: bool = False) -> EngineHost:
        """Attach to the system of the options file (`path`, else $MAILBUS_CONFIG_FILE,
        as every other mailbus command reads it); the embedded demo without either.
        `viewer`: one of several viewers of that system (see `viewer_box`)."""
        path = path or os.environ.get("MAILBUS_CONFIG_FILE") or None
        if path is None:
            return cls(demo=True)
        host = cls(load_options(str(path)), demo=False, viewer=viewer)
        host.config_file = str(Path(path).absolute())
        return host

    @property
    def description(self) -> str:
        if self.demo is not None:
            return "embedded demo (in-process)"
        box = viewer_box(self.options)
        where = f"box {box}" if box else self.options.address
        return f"{self.options.transport} as {where}"

    def add_listener(self, listener: Callable[[TraceEvent], None]) -> None:
        self._detach.append(self.context.tracer.add_listener(listener))

    def start(self, *, retry: bool = False) -> None:
        """Initialise the context. `retry`: a server that cannot be reached is tried again
        (waiting `retry_delays`, the last one repeated) until it answers or `stop()`.
        A host started already (by a notebook or a test before the app) is left as it is."""
        if self.context.is_initialized:
            return
        delays = self.retry_delays
        attempt = 0
        while True:
            try:
                self.context.init()
                break
            except (TransportError, ContextError) as exc:
                if self._stopping.is_set():
                    return
                if not retry or isinstance(exc, ContextError):
                    self.connection = Connection("failed", str(exc))
                    raise
                delay = delays[min(attempt, len(delays) - 1)]
                attempt += 1
                self.connection = Connection("retrying", str(exc), time.time() + delay)
                if self._stopping.wait(delay):
                    return
        self.connection = Connection("reconnected" if attempt else "connected")
        if self.demo is not None:
            self.demo.start()
            from mailbus_workbench.demo_broker import start_demo_broker

            broker = start_demo_broker(self.context)
            self._own_brokers.append(broker)
            # The name its announcements give it, so Broker and Participants agree.
            self.brokers[broker.announced_as] = broker

    def _watch_connection(self, event: TraceEvent) -> None:
        # The polling thread reports receive failures with the wait before it retries.
        if event.kind == Kind.ERROR and "retry_in_s" in event.extra:
            delay = event.extra["retry_in_s"]
            wait = float(delay) if isinstance(delay, int | float) else 0.0
            self.connection = Connection("retrying", event.detail, time.time() + wait)
        elif event.kind == Kind.RECONNECTED:
            self.connection = Connection("reconnected")

    def _check_connected(self) -> None:
        if not self.context.is_initialized:
            connection = self.connection
            if connection.state in ("retrying", "failed"):
                raise NotConnectedError(connection.describe(time.time()))
            raise NotConnectedError("not connected yet: the engine is still starting")

    def stop(self) -> None:
        self._stopping.set()
        if self.demo is not None:
            self.demo.stop()
        from mailbus_workbench.demo_broker import stop_demo_broker

        for broker in self._own_brokers:
            stop_demo_broker(broker)
        self._own_brokers.clear()
        for detach in self._detach:
            detach()
        self._detach.clear()
        self.context.shutdown()
        if self.viewer:
            remove_viewer_boxes(self.options)

    def sender_gids(self) -> frozenset[str]:
        """The GIDs of the publishers and clients that Publish and Call used (closed
        ones too): what the workbench sent, told from what others sent by the sender's
        GID of each message and request it received."""
        with self._lock:
            return frozenset(self._sent_by)

    def wait_sets(self) -> list[WaitSet]:
        return self.context.wait_sets

    def publish(self, topic: str, body: str, headers: Mapping[str, str] | None = None) -> str:
        self._check_connected()
        with self._lock:
            publisher = self._publishers.get(topic)
            if publisher is None:
                publisher = self._publishers[topic] = self.context.publisher(topic)
                self._sent_by.add(publisher.gid)
        return publisher.publish(body, headers)

    def call(self, service: str, body: str, timeout: float) -> CallResult:
        self._check_connected()
        with self._lock:
            client = self._clients.get(service)
            if client is None:
                client = self._clients[service] = self.context.client(service)
                self._sent_by.add(client.gid)
        started = time.perf_counter()
        try:
            response = client.call(body, timeout)
        except MailbusError:
            # A failed call (a misspelt name, no server) ends its client: it would
            # otherwise stay announced, a phantom in Participants, for as long as the
            # workbench runs. A later call opens a new one.
            with self._lock:
                if self._clients.get(service) is client:
                    del self._clients[service]
            client.close()
            raise
        return CallResult(service, body, response, time.perf_counter() - started)
