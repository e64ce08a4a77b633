"""The context owns what the design calls global: options, the transport's sender and
receiver, the polling manager and the handlers. Entities are created through it.

Use it as `with Context(options) as ctx:` or call `init()` and `shutdown()` yourself.
`mailbus.init()` and `mailbus.default_context()` keep one default context per process.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Self, TypeVar

from mailbus import headers as H
from mailbus.announcer import Announcer, BrokerLike, default_name
from mailbus.email_message import Email, new_message_id
from mailbus.errors import ContextError
from mailbus.gid import new_gid
from mailbus.guard_condition import GuardCondition
from mailbus.inprocess import in_process_transport
from mailbus.options import Options, Recipients, load_options
from mailbus.polling import PollingManager
from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.publisher import Publisher
from mailbus.registry import TRANSPORTS, WRAPPERS, load
from mailbus.routing import Registry, ServiceHandler, SubscriptionHandler
from mailbus.service import ServiceClient, ServiceServer
from mailbus.subscription import DEFAULT_DEPTH, OverflowPolicy, Subscription
from mailbus.trace import Tracer
from mailbus.transport import EmailSender, Transport
from mailbus.waitset import WaitSet

if TYPE_CHECKING:
    from mailbus.signing.gate import SignatureGate

E = TypeVar("E")
TransportFactory = Callable[[Options, Tracer], Transport]
TransportWrapper = Callable[[Transport, Options, Tracer], Transport]


class ContextState(StrEnum):
    """A context's life: init() once, then shutdown(); the values read as words."""

    NEW = "new"
    INITIALISED = "initialised"
    SHUT_DOWN = "shut down"


class _Registered(Generic[E]):
    """Entities of one kind: held weakly for introspection, and kept in step with the
    handler's registry under `key(entity)`."""

    def __init__(self, registry: Registry[E], key: Callable[[E], str]) -> None:
        self._items: weakref.WeakSet[E] = weakref.WeakSet()
        self._registry = registry
        self._key = key

    def add(self, item: E) -> None:
        self._items.add(item)
        self._registry.add(self._key(item), item)

    def discard(self, item: E) -> None:
        if item in self._items:
            self._items.discard(item)
            self._registry.remove(self._key(item), item)

    def __iter__(self) -> Iterator[E]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)


class Context:
    def __init__(self, options: Options | None = None, *, transport: Transport | None = None):
        """`options` None reads them from MAILBUS_CONFIG_FILE and MAILBUS_* variables
        (in-process when neither is set)."""
        self.options = options if options is not None else load_options()
        self.tracer = Tracer()
        self.counters: Counter[str] = Counter()
        self._counter_lock = threading.Lock()
        self.recipients: Recipients = self.options.recipients
        self.address = self.options.address
        self._transport = transport
        self._lock = threading.Lock()
        self._follow_lock = threading.Lock()
        self._state = ContextState.NEW
        self._polling: PollingManager | None = None
        self._gate: SignatureGate | None = None
        self.subscription_handler = SubscriptionHandler()
        self.service_handler = ServiceHandler()
        self._subscriptions: _Registered[Subscription] = _Registered(
            self.subscription_handler.subscriptions, lambda s: s.topic
        )
        self._servers: _Registered[ServiceServer] = _Registered(
            self.service_handler.servers, lambda s: s.service
        )
        self._clients: _Registered[ServiceClient] = _Registered(
            self.service_handler.clients, lambda c: c.gid
        )
        self._wait_sets: weakref.WeakSet[WaitSet] = weakref.WeakSet()
        self.publishers: weakref.WeakSet[Publisher] = weakref.WeakSet()
        # Who this context is in participant announcements (mailbus.presence).
        self.participant_gid = new_gid()
        self.participant_name = self.options.name or default_name()
        self._brokers: weakref.WeakValueDictionary[str, BrokerLike] = weakref.WeakValueDictionary()
        self._announcer: Announcer | None = None

    # -- life cycle ---------------------------------------------------------------------
    def init(self) -> Self:
        with self._lock:
            if self._state is not ContextState.NEW:
                raise ContextError(f"context is already {self._state}; init() runs once")
            made_transport = self._transport is None
            try:
                if self._transport is None:
                    if self.options.transport == "inprocess":
                        self._transport = in_process_transport()
                    else:
                        entry = TRANSPORTS[self.options.transport]
                        factory: TransportFactory = load(
                            entry.factory, f"transport {self.options.transport!r}"
                        )
                        self._transport = factory(self.options, self.tracer)
                for section, target in WRAPPERS.items():
                    if section in self.options.sections:
                        wrap: TransportWrapper = load(target, f"[{section}]")
                        self._transport = wrap(self._transport, self.options, self.tracer)
                if "signing" in self.options.sections:
                    # Imported only here: it loads dkimpy.
                    from mailbus.signing.gate import SignatureGate

                    self._gate = SignatureGate.from_sections(self.options.sections)
                self._polling = PollingManager(
                    self._transport.receiver,
                    [self.subscription_handler.handle, self.service_handler.handle],
                    self.tracer,
                    self.increment,
                    self.options.polling_period_ms / 1000.0,
                    gate=self._gate,
                )
                self._polling.start()
                if self.options.announce_period_s > 0:
                    self._announcer = Announcer(
                        self, self._send_announcement, self.options.announce_period_s, self.tracer
                    )
                    self._announcer.start()
            except BaseException:
                if self._polling is not None:
                    self._polling.stop()
                # Release what was opened (connections, checked-out boxes) before failing.
                if made_transport and self._transport is not None:
                    self._transport.close()
                    self._transport = None
                if self._gate is not None:
                    self._gate.close()
                    self._gate = None
                raise
            self._state = ContextState.INITIALISED
        # Entities made before init(): the receiver learns of them now (a routed
        # receiver reads only the folders of what it is told; it was told nothing).
        self._tell_receiver()
        return self

    def shutdown(self) -> None:
        """Stop the polling thread and close the transport. Safe to call twice.
        Waits blocked on this context's entities return (empty), and blocked calls
        raise ContextError."""
        with self._lock:
            if self._state is not ContextState.INITIALISED:
                if self._state is ContextState.NEW:
                    self._state = ContextState.SHUT_DOWN
                return
            self._state = ContextState.SHUT_DOWN
        if self._announcer is not None:
            # Before the transport closes: the goodbye still has a way out.
            self._announcer.stop(goodbye=True)
        if self._polling is not None:
            self._polling.stop()
        if self._transport is not None:
            self._transport.close()
        if self._gate is not None:
            self._gate.close()  # releases the replay state dir
        for client in self._clients:
            client.abort_calls()
        for entity in (*self._subscriptions, *self._servers, *self._clients):
            entity.wake()
        for wait_set in list(self._wait_sets):
            wait_set.release()

    def __enter__(self) -> Self:
        return self.init()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    @property
    def is_initialized(self) -> bool:
        return self._state is ContextState.INITIALISED

    @property
    def is_shut_down(self) -> bool:
        return self._state is ContextState.SHUT_DOWN

    @property
    def state(self) -> ContextState:
        return self._state

    def check_open(self) -> None:
        if self._state is not ContextState.INITIALISED:
            raise ContextError(f"context is {self._state}; call init() before using it")

    @property
    def transport(self) -> Transport:
        self.check_open()
        assert self._transport is not None
        return self._transport

    @property
    def sender(self) -> EmailSender:
        return self.transport.sender

    @property
    def polling_alive(self) -> bool:
        return self._polling is not None and self._polling.alive

    def outgoing(self, subject: str, body: str, headers: dict[str, str]) -> Email:
        """An email from this participant to its configured recipients, with a fresh
        Message-ID: what publishers and clients send."""
        recipients = self.recipients
        return Email(
            subject=subject,
            body=body,
            sender=self.address,
            to=recipients.to,
            cc=recipients.cc,
            bcc=recipients.bcc,
            headers=headers,
            message_id=new_message_id(self.address),
        )

    def _send_announcement(self, body: str, sequence: int) -> None:
        """Send a participant announcement; past `check_open`, since the goodbye goes
        out while the context is shutting down."""
        transport = self._transport
        if transport is None:
            raise ContextError("context has no transport")
        headers = {
            H.SOURCE_TIMESTAMP: str(time.time_ns()),
            H.PUBLISHER_GID: self.participant_gid,
            H.PUBLISHER_SEQUENCE_NUMBER: str(sequence),
        }
        transport.sender.send(self.outgoing(PARTICIPANTS_TOPIC, body, headers))

    def increment(self, counter: str) -> None:
        with self._counter_lock:
            self.counters[counter] += 1

    # -- the entity host (mailbus.host): what entities may ask of their context -------
    def register(self, entity: object) -> None:
        self._registry_of(entity).add(entity)  # type: ignore[arg-type]
        self._tell_receiver()

    def unregister(self, entity: object) -> None:
        self._registry_of(entity).discard(entity)  # type: ignore[arg-type]
        self._tell_receiver()

    def _tell_receiver(self) -> None:
        """Tell the receiver what this context receives (EmailReceiver.follow)."""
        transport = self._transport
        if transport is None:
            return
        with self._follow_lock:  # the last snapshot taken is the last one told
            transport.receiver.follow(
                frozenset(self.subscription_handler.subscriptions.keys()),
                frozenset(self.service_handler.servers.keys()),
                frozenset(c.service for c in self._clients),
            )

    def _registry_of(
        self, entity: object
    ) -> (
        _Registered[Subscription]
        | _Registered[ServiceServer]
        | _Registered[ServiceClient]
        | weakref.WeakSet[WaitSet]
    ):
        if isinstance(entity, Subscription):
            return self._subscriptions
        if isinstance(entity, ServiceServer):
            return self._servers
        if isinstance(entity, ServiceClient):
            return self._clients
        if isinstance(entity, WaitSet):
            return self._wait_sets
        raise TypeError(f"a context hosts no {type(entity).__name__}")

    # -- entities ---------------------------------------------------------------------
    def publisher(self, topic: str) -> Publisher:
        publisher = Publisher(self, topic)
        self.publishers.add(publisher)
        return publisher

    def subscription(
        self,
        topic: str,
        *,
        depth: int = DEFAULT_DEPTH,
        overflow: OverflowPolicy = OverflowPolicy.DROP_OLDEST,
    ) -> Subscription:
        return Subscription(self, topic, depth=depth, overflow=overflow)

    def client(self, service: str) -> ServiceClient:
        return ServiceClient(self, service)

    def server(self, service: str) -> ServiceServer:
        return ServiceServer(self, service)

    def wait_set(self, name: str = "") -> WaitSet:
        return WaitSet(self, name)

    def guard_condition(self, name: str = "") -> GuardCondition:
        return GuardCondition(name)

    # -- introspection (the workbench) ------------------------------------------------
    @property
    def subscriptions(self) -> list[Subscription]:
        return list(self._subscriptions)

    @property
    def servers(self) -> list[ServiceServer]:
        return list(self._servers)

    @property
    def clients(self) -> list[ServiceClient]:
        return list(self._clients)

    @property
    def wait_sets(self) -> list[WaitSet]:
        return list(self._wait_sets)

    # -- participant announcements (mailbus.presence) ---------------------------------
    def add_broker(self, broker: BrokerLike, name: str = "") -> str:
        """Announce `broker`'s modules with this participant; returns its name there
        (`name`, else `broker N`). Held weakly: one no longer referenced drops out.
        A broker created with `context=` registers itself."""
        with self._lock:
            if not name:
                n = len(self._brokers) + 1
                while f"broker {n}" in self._brokers:
                    n += 1
                name = f"broker {n}"
            self._brokers[name] = broker
        return name

    @property
    def brokers(self) -> dict[str, BrokerLike]:
        return dict(self._brokers)

    @property
    def announced_publishers(self) -> list[Publisher]:
        return list(self.publishers)

    @property
    def transport_name(self) -> str:
        """The transport as built (`postoffice+outbox`, `custom`), else as configured."""
        transport = self._transport
        return transport.name if transport is not None else self.options.transport

    def outbox_depth(self) -> int | None:
        """Emails waiting in the durable outbox; None without one."""
        transport = self._transport
        depth = getattr(transport.sender, "outbox_depth", None) if transport else None
        return int(depth()) if callable(depth) else None

    @property
    def announcer(self) -> Announcer | None:
        return self._announcer


_default: Context | None = None
_default_lock = threading.Lock()


def init(options: Options | None = None) -> Context:
    """Create and initialise the default context (ContextError if one is running)."""
    global _default
    with _default_lock:
        if _default is not None and _default.is_initialized:
            raise ContextError("the default context is already initialised")
        _default = Context(options).init()
        return _default


def default_context() -> Context:
    with _default_lock:
        if _default is None or not _default.is_initialized:
            raise ContextError("no default context: call mailbus.init() first")
        return _default


def shutdown() -> None:
    global _default
    with _default_lock:
        if _default is not None:
            _default.shutdown()
            _default = None
