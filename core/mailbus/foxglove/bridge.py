"""The bridge between a Mailbus system and Foxglove clients, as a state machine.

Sans-IO: the I/O loop feeds it what happens (a client connects, a frame arrives, the
engine receives a message, a participant announces itself, time passes) and gets back
effects to carry out: frames to send to a client, Mailbus publishes and calls to make.

- Topics become channels at their first message (the schema needs a body; a topic only
  announced shows in the connection graph until then) and are unadvertised once no
  live participant announces them and none of their messages has come for `linger_s`.
  Each channel carries `json` with a `jsonschema` schema inferred from the bodies
  seen (mailbus.foxglove.schema); when a body widens it, the message is still sent on
  the old channel, then the topic is advertised again under a new id (ids are never
  reused, as the spec asks of a changed schema).
- `wanted` is the set of topics some client subscribes to: the engine-side listener
  hands over the messages of those topics only (and the first of a new topic), so a
  topic nobody watches costs a set lookup.
- Services (with `allow_calls`) and client publishing (with `allow_publish`) are
  offered only when asked for; `local_services` (the player's controls) are answered by
  the I/O loop itself.
- The connection graph comes from participant announcements (mailbus.presence).
- A malformed frame gets an error status naming what is wrong; nothing else changes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from mailbus.errors import InvalidNameError
from mailbus.foxglove import protocol as P
from mailbus.foxglove.schema import TopicSchema, as_message
from mailbus.names import check_name
from mailbus.presence import Announcement, PresenceState

INTERNAL_PREFIX = "_mailbus/"
ENCODING = "json"
SCHEMA_ENCODING = "jsonschema"
LINGER_S = 60.0  # a topic nobody announces stays this long after its last message
EXPIRY_PERIODS = 3.0  # a participant silent for this many of its periods is gone


class Send(NamedTuple):
    """Send `frame` to `client` (a tuple: one is made per message and subscriber)."""

    client: int
    frame: str | bytes


@dataclass(frozen=True, slots=True)
class Publish:
    """Publish `body` on the Mailbus topic `topic` (a client's Publish panel)."""

    client: int
    topic: str
    body: str


@dataclass(frozen=True, slots=True)
class Call:
    """Call the Mailbus service `service` (or answer a local one) for a client."""

    client: int
    service_id: int
    call_id: int
    service: str
    body: str
    local: bool = False


Effect = Send | Publish | Call


@dataclass(slots=True)
class _Topic:
    name: str
    channel: P.Channel
    schema: TopicSchema
    last_message_s: float
    subscribers: dict[int, int] = field(default_factory=dict)  # client -> subscription id


@dataclass(slots=True)
class _Client:
    subscriptions: dict[int, str] = field(default_factory=dict)  # subscription id -> topic
    channels: dict[int, str] = field(default_factory=dict)  # client channel id -> topic
    graph: bool = False


@dataclass(slots=True)
class _Participant:
    announcement: Announcement
    expires_s: float


def participant_label(a: Announcement) -> str:
    return f"{a.name} (pid {a.pid} on {a.host})"


class Bridge:
    def __init__(
        self,
        *,
        name: str = "mailbus",
        allow_calls: bool = False,
        allow_publish: bool = False,
        local_services: Iterable[str] = (),
        linger_s: float = LINGER_S,
        metadata: Mapping[str, str] | None = None,
        schemas: Mapping[str, str] | None = None,
    ) -> None:
        """`schemas`: JSON Schemas declared per topic (the options file's
        [foxglove.schemas]); those topics' schemas are not inferred."""
        self.allow_calls = allow_calls
        self.allow_publish = allow_publish
        self.linger_s = linger_s
        self.local_services = frozenset(local_services)
        self.declared = dict(schemas or {})
        capabilities = [P.Capability.CONNECTION_GRAPH]
        if allow_calls or self.local_services:
            capabilities.append(P.Capability.SERVICES)
        if allow_publish:
            capabilities.append(P.Capability.CLIENT_PUBLISH)
        offers_encoding = allow_calls or allow_publish or bool(self.local_services)
        self.info = P.ServerInfo(
            name=name,
            capabilities=tuple(capabilities),
            supported_encodings=(ENCODING,) if offers_encoding else (),
            metadata=dict(metadata or {}),
            session_id=uuid.uuid4().hex,
        )
        self._topics: dict[str, _Topic] = {}
        self._by_channel: dict[int, _Topic] = {}
        self._clients: dict[int, _Client] = {}
        self._next_channel = 1
        self._services: dict[str, P.Service] = {}
        self._services_by_id: dict[int, P.Service] = {}
        self._service_seen_s: dict[str, float] = {}
        self._next_service = 1
        self._participants: dict[str, _Participant] = {}
        self._graph: dict[str, dict[str, tuple[str, ...]]] = {}
        # Read by the engine-side listener from another thread: replaced, never mutated.
        self.wanted: frozenset[str] = frozenset()
        self.known: frozenset[str] = frozenset()
        self.known_services: frozenset[str] = frozenset()
        for service in sorted(self.local_services):
            self._add_service(service)

    # -- what the I/O loop asks ------------------------------------------------------------
    @property
    def clients(self) -> list[int]:
        return list(self._clients)

    @property
    def channels(self) -> list[P.Channel]:
        return [t.channel for t in self._topics.values()]

    @property
    def services(self) -> list[P.Service]:
        return list(self._services.values())

    # -- clients -------------------------------------------------------------------------
    def connect(self, client: int) -> list[Effect]:
        """A new client: the server's info, every channel and every service."""
        self._clients[client] = _Client()
        out: list[Effect] = [Send(client, P.encode_server(self.info))]
        out.append(Send(client, P.encode_server(P.Advertise(tuple(self.channels)))))
        if self._offers_services() and self._services:
            frame = P.encode_server(P.AdvertiseServices(tuple(self._services.values())))
            out.append(Send(client, frame))
        return out

    def disconnect(self, client: int) -> None:
        state = self._clients.pop(client, None)
        if state is None:
            return
        for topic in set(state.subscriptions.values()):
            t = self._topics.get(topic)
            if t is not None:
                t.subscribers.pop(client, None)
        self._update_wanted()

    def on_frame(self, client: int, frame: str | bytes) -> list[Effect]:
        """A frame from `client`; a malformed one is answered with an error status."""
        if client not in self._clients:
            return []
        try:
            message = P.decode_client(frame)
        except P.ProtocolError as exc:
            return [_status(client, P.StatusLevel.ERROR, f"malformed message: {exc}")]
        return self._handle(client, message)

    def _handle(self, client: int, m: P.ClientMessage) -> list[Effect]:
        if isinstance(m, P.Subscribe):
            return self._subscribe(client, m)
        if isinstance(m, P.Unsubscribe):
            return self._unsubscribe(client, m)
        if isinstance(m, P.ClientAdvertise):
            return self._client_advertise(client, m)
        if isinstance(m, P.ClientUnadvertise):
            state = self._clients[client]
            for channel_id in m.channel_ids:
                state.channels.pop(channel_id, None)
            return []
        if isinstance(m, P.ClientMessageData):
            return self._client_publish(client, m)
        if isinstance(m, P.ServiceCallRequest):
            return self._call(client, m)
        if isinstance(m, P.SubscribeConnectionGraph):
            self._clients[client].graph = True
            return [Send(client, P.encode_server(self._full_graph()))]
        if isinstance(m, P.UnsubscribeConnectionGraph):
            self._clients[client].graph = False
            return []
        return [
            _status(
                client,
                P.StatusLevel.ERROR,
                f"{m.op} is not supported: this server has no such capability",
            )
        ]

    def _subscribe(self, client: int, m: P.Subscribe) -> list[Effect]:
        state = self._clients[client]
        out: list[Effect] = []
        for sub_id, channel_id in m.subscriptions:
            topic = self._by_channel.get(channel_id)
            if sub_id in state.subscriptions:
                out.append(
                    _status(client, P.StatusLevel.ERROR, f"subscription id {sub_id} is in use")
                )
            elif topic is None:
                out.append(
                    _status(client, P.StatusLevel.WARNING, f"no channel {channel_id} (gone?)")
                )
            elif client in topic.subscribers:
                out.append(
                    _status(
                        client,
                        P.StatusLevel.ERROR,
                        f"already subscribed to channel {channel_id} ({topic.name})",
                    )
                )
            else:
                state.subscriptions[sub_id] = topic.name
                topic.subscribers[client] = sub_id
        self._update_wanted()
        return out

    def _unsubscribe(self, client: int, m: P.Unsubscribe) -> list[Effect]:
        state = self._clients[client]
        out: list[Effect] = []
        for sub_id in m.subscription_ids:
            name = state.subscriptions.pop(sub_id, None)
            if name is None:
                out.append(_status(client, P.StatusLevel.WARNING, f"no subscription {sub_id}"))
                continue
            topic = self._topics.get(name)
            if topic is not None and topic.subscribers.get(client) == sub_id:
                del topic.subscribers[client]
        self._update_wanted()
        return out

    def _client_advertise(self, client: int, m: P.ClientAdvertise) -> list[Effect]:
        if not self.allow_publish:
            return [
                _status(
                    client,
                    P.StatusLevel.ERROR,
                    "publishing is off (start `mailbus foxglove` with --allow-publish)",
                )
            ]
        state = self._clients[client]
        out: list[Effect] = []
        for channel in m.channels:
            try:
                check_name(channel.topic)
                if channel.topic.startswith(INTERNAL_PREFIX):
                    raise InvalidNameError(f"topic {channel.topic!r} is reserved for Mailbus")
            except InvalidNameError as exc:
                out.append(_status(client, P.StatusLevel.ERROR, f"cannot publish: {exc}"))
                continue
            if channel.encoding != ENCODING:
                out.append(
                    _status(
                        client,
                        P.StatusLevel.ERROR,
                        f"cannot publish on {channel.topic}: encoding {channel.encoding!r:.40},"
                        " only 'json' is supported",
                    )
                )
                continue
            state.channels[channel.id] = channel.topic
        return out

    def _client_publish(self, client: int, m: P.ClientMessageData) -> list[Effect]:
        topic = self._clients[client].channels.get(m.channel_id)
        if topic is None:
            return [
                _status(
                    client,
                    P.StatusLevel.ERROR,
                    f"message on client channel {m.channel_id}, which is not advertised",
                )
            ]
        try:
            body = m.data.decode("utf-8")
        except UnicodeDecodeError:
            return [_status(client, P.StatusLevel.ERROR, f"message on {topic} is not UTF-8")]
        return [Publish(client, topic, body)]

    def _call(self, client: int, m: P.ServiceCallRequest) -> list[Effect]:
        def failure(why: str) -> list[Effect]:
            frame = P.encode_server(P.ServiceCallFailure(m.service_id, m.call_id, why))
            return [Send(client, frame)]

        service = self._services_by_id.get(m.service_id)
        if service is None or not self._offers_services():
            return failure(f"no service {m.service_id}")
        local = service.name in self.local_services
        if not local and not self.allow_calls:
            return failure("calls are off (start `mailbus foxglove` with --allow-calls)")
        if m.encoding != ENCODING:
            return failure(f"encoding {m.encoding!r:.40}: only 'json' is supported")
        try:
            body = m.data.decode("utf-8")
        except UnicodeDecodeError:
            return failure("the request is not UTF-8")
        return [Call(client, m.service_id, m.call_id, service.name, body, local)]

    def call_done(self, call: Call, response: str | None, error: str = "") -> list[Effect]:
        """The answer to `call` (a response body, or None and why it failed)."""
        if call.client not in self._clients:
            return []
        if response is None:
            failure = P.ServiceCallFailure(call.service_id, call.call_id, error or "failed")
            return [Send(call.client, P.encode_server(failure))]
        payload, _ = as_message(response)
        reply = P.ServiceCallResponse(call.service_id, call.call_id, ENCODING, payload)
        return [Send(call.client, P.encode_server(reply))]

    # -- the system --------------------------------------------------------------------------
    def on_message(self, topic: str, body: str, log_time_ns: int, now_s: float) -> list[Effect]:
        """A message the engine received on `topic` (a new topic is advertised)."""
        if topic.startswith(INTERNAL_PREFIX):
            return []
        t = self._topics.get(topic)
        if t is None:
            # The first message of a new topic: its schema from it, then the advertisement.
            t = self._add_topic(topic, now_s)
            declared = self.declared.get(topic)
            if declared is None:
                _, value = as_message(body)
                t.schema.widen(value)
            t.channel = replace(t.channel, schema=declared or t.schema.text(topic))
            return self._broadcast(P.Advertise((t.channel,)))
        t.last_message_s = now_s
        if not t.subscribers:
            return []
        payload, value = as_message(body)
        out: list[Effect] = [
            Send(client, P.message_data_header(sub_id, log_time_ns) + payload)
            for client, sub_id in t.subscribers.items()
        ]
        if t.name not in self.declared and t.schema.widen(value):
            out.extend(self._readvertise(t))
        return out

    def on_service_seen(self, service: str, now_s: float) -> list[Effect]:
        """A request or response of `service` went by."""
        self._service_seen_s[service] = now_s
        return self._add_service(service)

    def on_announcement(self, a: Announcement, now_s: float) -> list[Effect]:
        if a.state is PresenceState.GOODBYE:
            self._participants.pop(a.gid, None)
        else:
            self._participants[a.gid] = _Participant(a, now_s + a.period_s * EXPIRY_PERIODS)
        out: list[Effect] = []
        for entity in a.entities:
            if entity.kind == "server":
                out.extend(self._add_service(entity.name))
        out.extend(self._graph_changes())
        return out

    def tick(self, now_s: float) -> list[Effect]:
        """Forget participants that stopped announcing, topics and services gone."""
        for gid, p in list(self._participants.items()):
            if p.expires_s <= now_s:
                del self._participants[gid]
        announced = self._announced()
        out: list[Effect] = []
        gone = [
            t
            for t in self._topics.values()
            if t.name not in announced["topics"] and now_s - t.last_message_s > self.linger_s
        ]
        for t in gone:
            out.extend(self._remove_topic(t))
        for name, service in list(self._services.items()):
            seen = self._service_seen_s.get(name, float("-inf"))
            if name in self.local_services or name in announced["services"]:
                continue
            if now_s - seen > self.linger_s:
                out.extend(self._remove_service(service))
        out.extend(self._graph_changes())
        return out

    def status(self, level: P.StatusLevel, message: str, status_id: str | None) -> list[Effect]:
        """A status message for every client (skipped emails, transport errors)."""
        return self._broadcast(P.Status(level, message, status_id))

    # -- channels ----------------------------------------------------------------------------
    def _add_topic(self, name: str, now_s: float) -> _Topic:
        schema = TopicSchema()
        t = _Topic(name, self._channel(name, schema.text(name)), schema, now_s)
        self._topics[name] = t
        self._by_channel[t.channel.id] = t
        self.known = frozenset(self._topics)
        return t

    def _channel(self, topic: str, schema: str) -> P.Channel:
        channel_id = self._next_channel
        self._next_channel += 1
        return P.Channel(channel_id, topic, ENCODING, topic, schema, SCHEMA_ENCODING)

    def _readvertise(self, t: _Topic) -> list[Effect]:
        old = t.channel
        del self._by_channel[old.id]
        for client in t.subscribers:
            self._clients[client].subscriptions.pop(t.subscribers[client], None)
        t.subscribers.clear()
        t.channel = self._channel(t.name, t.schema.text(t.name))
        self._by_channel[t.channel.id] = t
        self._update_wanted()
        return [
            *self._broadcast(P.Unadvertise((old.id,))),
            *self._broadcast(P.Advertise((t.channel,))),
        ]

    def _remove_topic(self, t: _Topic) -> list[Effect]:
        for client, sub_id in t.subscribers.items():
            self._clients[client].subscriptions.pop(sub_id, None)
        del self._topics[t.name]
        del self._by_channel[t.channel.id]
        self.known = frozenset(self._topics)
        self._update_wanted()
        return self._broadcast(P.Unadvertise((t.channel.id,)))

    def _update_wanted(self) -> None:
        self.wanted = frozenset(name for name, t in self._topics.items() if t.subscribers)

    # -- services ------------------------------------------------------------------------------
    def _offers_services(self) -> bool:
        return P.Capability.SERVICES in self.info.capabilities

    def _add_service(self, name: str) -> list[Effect]:
        internal = name.startswith(INTERNAL_PREFIX) and name not in self.local_services
        if name in self._services or internal:
            return []
        if not (self.allow_calls or name in self.local_services):
            self.known_services = self.known_services | {name}
            return []
        open_schema = P.MessageSchema(ENCODING, f"{name} request", SCHEMA_ENCODING, "{}")
        response = P.MessageSchema(ENCODING, f"{name} response", SCHEMA_ENCODING, "{}")
        service = P.Service(self._next_service, name, name, open_schema, response)
        self._next_service += 1
        self._services[name] = service
        self._services_by_id[service.id] = service
        self.known_services = frozenset(self._services)
        return self._broadcast(P.AdvertiseServices((service,)))

    def _remove_service(self, service: P.Service) -> list[Effect]:
        del self._services[service.name]
        del self._services_by_id[service.id]
        self.known_services = frozenset(self._services)
        return self._broadcast(P.UnadvertiseServices((service.id,)))

    # -- the connection graph ----------------------------------------------------------------
    def _announced(self) -> dict[str, set[str]]:
        topics: set[str] = set()
        services: set[str] = set()
        for p in self._participants.values():
            for e in p.announcement.entities:
                if e.kind in ("publisher", "subscription"):
                    topics.add(e.name)
                elif e.kind == "server":
                    services.add(e.name)
        return {"topics": topics, "services": services}

    def _current_graph(self) -> dict[str, dict[str, tuple[str, ...]]]:
        graph: dict[str, dict[str, set[str]]] = {"publisher": {}, "subscription": {}, "server": {}}
        for p in self._participants.values():
            label = participant_label(p.announcement)
            for e in p.announcement.entities:
                if e.kind in graph and not e.name.startswith(INTERNAL_PREFIX):
                    graph[e.kind].setdefault(e.name, set()).add(label)
        return {kind: {n: tuple(sorted(h)) for n, h in g.items()} for kind, g in graph.items()}

    def _full_graph(self) -> P.ConnectionGraphUpdate:
        g = self._graph = self._current_graph()
        return P.ConnectionGraphUpdate(
            published_topics=tuple(sorted(g["publisher"].items())),
            subscribed_topics=tuple(sorted(g["subscription"].items())),
            advertised_services=tuple(sorted(g["server"].items())),
        )

    def _graph_changes(self) -> list[Effect]:
        old, new = self._graph, self._current_graph()
        if old == new:
            return []
        self._graph = new

        still_named = {n for g in new.values() for n in g}

        def changed(kind: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
            before = old.get(kind, {})
            now = {n: h for n, h in new[kind].items() if before.get(n) != h}
            # A name that lost every holder of this kind but keeps others: an empty list.
            for n in before.keys() - new[kind].keys():
                if n in still_named:
                    now[n] = ()
            return tuple(sorted(now.items()))

        def removed(*kinds: str) -> tuple[str, ...]:
            before = {n for k in kinds for n in old.get(k, {})}
            after = {n for k in kinds for n in new[k]}
            return tuple(sorted(before - after))

        update = P.ConnectionGraphUpdate(
            published_topics=changed("publisher"),
            subscribed_topics=changed("subscription"),
            advertised_services=changed("server"),
            removed_topics=removed("publisher", "subscription"),
            removed_services=removed("server"),
        )
        frame = P.encode_server(update)
        return [Send(c, frame) for c, state in self._clients.items() if state.graph]

    def _broadcast(self, message: P.ServerMessage) -> list[Effect]:
        if isinstance(message, P.AdvertiseServices | P.UnadvertiseServices) and not (
            self._offers_services()
        ):
            return []
        frame = P.encode_server(message)
        return [Send(client, frame) for client in self._clients]


def _status(client: int, level: P.StatusLevel, message: str) -> Send:
    return Send(client, P.encode_server(P.Status(level, message)))
