"""The Foxglove WebSocket protocol's messages (spec: foxglove/ws-protocol `docs/spec.md`,
subprotocols `foxglove.websocket.v1` and `foxglove.sdk.v1`) as frozen dataclasses, and
pure codecs for both directions: JSON text frames with an `op` field, binary frames with
a one-byte opcode and little-endian integers.

Sans-IO: bytes and strings in, dataclasses out (and back). Decoding a frame a client
sent never raises anything but `ProtocolError`, whose message says what is wrong, so
that the server answers a malformed frame with a status message and carries on.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from mailbus.errors import MailbusError

# The app of today speaks the first, Lichtblick and foxglove_bridge's clients the second;
# the messages are the same. The server's preference comes first.
SUBPROTOCOLS = ("foxglove.sdk.v1", "foxglove.websocket.v1")
MAX_TEXT_FRAME = 1 << 20  # characters of a client's JSON frame
MAX_ITEMS = 4096  # entries of any list a client sends
UINT32 = 0xFFFFFFFF
UINT64 = 0xFFFFFFFFFFFFFFFF


class ProtocolError(MailbusError, ValueError):
    """A frame that is not a message of the protocol; the text says why."""


class StatusLevel(IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2


class ServerOpcode(IntEnum):
    MESSAGE_DATA = 1
    TIME = 2
    SERVICE_CALL_RESPONSE = 3


class ClientOpcode(IntEnum):
    MESSAGE_DATA = 1
    SERVICE_CALL_REQUEST = 2


class Capability:
    CLIENT_PUBLISH = "clientPublish"
    SERVICES = "services"
    CONNECTION_GRAPH = "connectionGraph"


# -- what a client sends ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Subscribe:
    subscriptions: tuple[tuple[int, int], ...]  # (subscription id, channel id)


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    subscription_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClientChannel:
    id: int
    topic: str
    encoding: str
    schema_name: str
    schema: str | None = None
    schema_encoding: str | None = None


@dataclass(frozen=True, slots=True)
class ClientAdvertise:
    channels: tuple[ClientChannel, ...]


@dataclass(frozen=True, slots=True)
class ClientUnadvertise:
    channel_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClientMessageData:
    channel_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ServiceCallRequest:
    service_id: int
    call_id: int
    encoding: str
    data: bytes


@dataclass(frozen=True, slots=True)
class SubscribeConnectionGraph:
    pass


@dataclass(frozen=True, slots=True)
class UnsubscribeConnectionGraph:
    pass


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A known op of a capability this server does not offer (parameters, assets)."""

    op: str


ClientMessage = (
    Subscribe
    | Unsubscribe
    | ClientAdvertise
    | ClientUnadvertise
    | ClientMessageData
    | ServiceCallRequest
    | SubscribeConnectionGraph
    | UnsubscribeConnectionGraph
    | Unsupported
)
_UNSUPPORTED_OPS = frozenset(
    {
        "getParameters",
        "setParameters",
        "subscribeParameterUpdates",
        "unsubscribeParameterUpdates",
        "fetchAsset",
    }
)


# -- what the server sends ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Channel:
    id: int
    topic: str
    encoding: str
    schema_name: str
    schema: str
    schema_encoding: str | None = None


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """A service's request or response description."""

    encoding: str
    schema_name: str
    schema_encoding: str
    schema: str


@dataclass(frozen=True, slots=True)
class Service:
    id: int
    name: str
    type: str
    request: MessageSchema
    response: MessageSchema


@dataclass(frozen=True, slots=True)
class ServerInfo:
    name: str
    capabilities: tuple[str, ...]
    supported_encodings: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Status:
    level: StatusLevel
    message: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Advertise:
    channels: tuple[Channel, ...]


@dataclass(frozen=True, slots=True)
class Unadvertise:
    channel_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AdvertiseServices:
    services: tuple[Service, ...]


@dataclass(frozen=True, slots=True)
class UnadvertiseServices:
    service_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConnectionGraphUpdate:
    published_topics: tuple[tuple[str, tuple[str, ...]], ...] = ()
    subscribed_topics: tuple[tuple[str, tuple[str, ...]], ...] = ()
    advertised_services: tuple[tuple[str, tuple[str, ...]], ...] = ()
    removed_topics: tuple[str, ...] = ()
    removed_services: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ServiceCallFailure:
    service_id: int
    call_id: int
    message: str


@dataclass(frozen=True, slots=True)
class MessageData:
    subscription_id: int
    timestamp_ns: int  # the log time: when Mailbus received the email
    data: bytes


@dataclass(frozen=True, slots=True)
class ServiceCallResponse:
    service_id: int
    call_id: int
    encoding: str
    data: bytes


ServerMessage = (
    ServerInfo
    | Status
    | Advertise
    | Unadvertise
    | AdvertiseServices
    | UnadvertiseServices
    | ConnectionGraphUpdate
    | ServiceCallFailure
    | MessageData
    | ServiceCallResponse
)

# -- encoding ------------------------------------------------------------------------------
_MESSAGE_HEADER = struct.Struct("<BIQ")
_CALL_HEADER = struct.Struct("<BIII")
_CLIENT_DATA_HEADER = struct.Struct("<BI")


def _dumps(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _channel_json(c: Channel) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": c.id,
        "topic": c.topic,
        "encoding": c.encoding,
        "schemaName": c.schema_name,
        "schema": c.schema,
    }
    if c.schema_encoding is not None:
        out["schemaEncoding"] = c.schema_encoding
    return out


def _schema_json(s: MessageSchema) -> dict[str, str]:
    return {
        "encoding": s.encoding,
        "schemaName": s.schema_name,
        "schemaEncoding": s.schema_encoding,
        "schema": s.schema,
    }


def _graph_entries(entries: Sequence[tuple[str, tuple[str, ...]]], ids: str) -> list[Any]:
    return [{"name": name, ids: list(holders)} for name, holders in entries]


def message_data_header(subscription_id: int, timestamp_ns: int) -> bytes:
    """The 13 bytes before a message's payload (the hot path joins them itself)."""
    return _MESSAGE_HEADER.pack(ServerOpcode.MESSAGE_DATA, subscription_id, timestamp_ns)


def encode_server(message: ServerMessage) -> str | bytes:
    """`message` as the frame to send: text for JSON ops, bytes for binary ones."""
    m = message
    if isinstance(m, MessageData):
        return message_data_header(m.subscription_id, m.timestamp_ns) + m.data
    if isinstance(m, ServiceCallResponse):
        encoding = m.encoding.encode()
        head = _CALL_HEADER.pack(
            ServerOpcode.SERVICE_CALL_RESPONSE, m.service_id, m.call_id, len(encoding)
        )
        return head + encoding + m.data
    obj: dict[str, Any]
    if isinstance(m, ServerInfo):
        obj = {"op": "serverInfo", "name": m.name, "capabilities": list(m.capabilities)}
        if m.supported_encodings:
            obj["supportedEncodings"] = list(m.supported_encodings)
        obj["metadata"] = dict(m.metadata)
        if m.session_id is not None:
            obj["sessionId"] = m.session_id
    elif isinstance(m, Status):
        obj = {"op": "status", "level": int(m.level), "message": m.message}
        if m.id is not None:
            obj["id"] = m.id
    elif isinstance(m, Advertise):
        obj = {"op": "advertise", "channels": [_channel_json(c) for c in m.channels]}
    elif isinstance(m, Unadvertise):
        obj = {"op": "unadvertise", "channelIds": list(m.channel_ids)}
    elif isinstance(m, AdvertiseServices):
        obj = {
            "op": "advertiseServices",
            "services": [
                {
                    "id": s.id,
                    "name": s.name,
                    "type": s.type,
                    "request": _schema_json(s.request),
                    "response": _schema_json(s.response),
                }
                for s in m.services
            ],
        }
    elif isinstance(m, UnadvertiseServices):
        obj = {"op": "unadvertiseServices", "serviceIds": list(m.service_ids)}
    elif isinstance(m, ConnectionGraphUpdate):
        obj = {
            "op": "connectionGraphUpdate",
            "publishedTopics": _graph_entries(m.published_topics, "publisherIds"),
            "subscribedTopics": _graph_entries(m.subscribed_topics, "subscriberIds"),
            "advertisedServices": _graph_entries(m.advertised_services, "providerIds"),
            "removedTopics": list(m.removed_topics),
            "removedServices": list(m.removed_services),
        }
    else:
        obj = {
            "op": "serviceCallFailure",
            "serviceId": m.service_id,
            "callId": m.call_id,
            "message": m.message,
        }
    return _dumps(obj)


def encode_client(message: ClientMessage) -> str | bytes:
    """`message` as a client sends it (for our own tests, benchmark and fuzzing)."""
    m = message
    if isinstance(m, ClientMessageData):
        return _CLIENT_DATA_HEADER.pack(ClientOpcode.MESSAGE_DATA, m.channel_id) + m.data
    if isinstance(m, ServiceCallRequest):
        encoding = m.encoding.encode()
        head = _CALL_HEADER.pack(
            ClientOpcode.SERVICE_CALL_REQUEST, m.service_id, m.call_id, len(encoding)
        )
        return head + encoding + m.data
    obj: dict[str, Any]
    if isinstance(m, Subscribe):
        obj = {
            "op": "subscribe",
            "subscriptions": [{"id": s, "channelId": c} for s, c in m.subscriptions],
        }
    elif isinstance(m, Unsubscribe):
        obj = {"op": "unsubscribe", "subscriptionIds": list(m.subscription_ids)}
    elif isinstance(m, ClientAdvertise):
        channels = []
        for c in m.channels:
            entry: dict[str, Any] = {
                "id": c.id,
                "topic": c.topic,
                "encoding": c.encoding,
                "schemaName": c.schema_name,
            }
            if c.schema is not None:
                entry["schema"] = c.schema
            if c.schema_encoding is not None:
                entry["schemaEncoding"] = c.schema_encoding
            channels.append(entry)
        obj = {"op": "advertise", "channels": channels}
    elif isinstance(m, ClientUnadvertise):
        obj = {"op": "unadvertise", "channelIds": list(m.channel_ids)}
    elif isinstance(m, SubscribeConnectionGraph):
        obj = {"op": "subscribeConnectionGraph"}
    elif isinstance(m, UnsubscribeConnectionGraph):
        obj = {"op": "unsubscribeConnectionGraph"}
    else:
        obj = {"op": m.op}
    return _dumps(obj)


# -- decoding: typed field readers ------------------------------------------------------------
def _get(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise ProtocolError(f"{where}: field {key!r} is missing")
    return obj[key]


def _uint32(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINT32:
        raise ProtocolError(f"{what} must be an integer from 0 to 2^32-1, got {value!r:.40}")
    return value


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{what} must be a string, not {type(value).__name__}")
    return value


def _optional_string(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    return None if value is None else _string(value, f"{where} {key}")


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"{what} must be a list, not {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise ProtocolError(f"{what} has {len(value)} entries, more than {MAX_ITEMS}")
    return value


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _ids(obj: Mapping[str, Any], key: str, op: str) -> tuple[int, ...]:
    values = _list(_get(obj, key, op), f"{op} {key}")
    return tuple(_uint32(v, f"{op} {key}[{i}]") for i, v in enumerate(values))


def _load(text: str) -> Mapping[str, Any]:
    if len(text) > MAX_TEXT_FRAME:
        raise ProtocolError(f"text frame of {len(text)} characters, more than {MAX_TEXT_FRAME}")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"text frame is not JSON: {exc}") from None
    obj = _object(raw, "text frame")
    if not isinstance(obj.get("op"), str):
        raise ProtocolError("text frame has no string field 'op'")
    return obj


# -- decoding what a client sends ------------------------------------------------------------
def decode_client_text(text: str) -> ClientMessage:
    obj = _load(text)
    op = obj["op"]
    if op == "subscribe":
        subs = []
        for i, entry in enumerate(_list(_get(obj, "subscriptions", op), "subscriptions")):
            e = _object(entry, f"subscriptions[{i}]")
            subs.append(
                (
                    _uint32(_get(e, "id", op), f"subscriptions[{i}] id"),
                    _uint32(_get(e, "channelId", op), f"subscriptions[{i}] channelId"),
                )
            )
        return Subscribe(tuple(subs))
    if op == "unsubscribe":
        return Unsubscribe(_ids(obj, "subscriptionIds", op))
    if op == "advertise":
        channels = []
        for i, entry in enumerate(_list(_get(obj, "channels", op), "channels")):
            e = _object(entry, f"channels[{i}]")
            where = f"channels[{i}]"
            channels.append(
                ClientChannel(
                    id=_uint32(_get(e, "id", where), f"{where} id"),
                    topic=_string(_get(e, "topic", where), f"{where} topic"),
                    encoding=_string(_get(e, "encoding", where), f"{where} encoding"),
                    schema_name=_string(_get(e, "schemaName", where), f"{where} schemaName"),
                    schema=_optional_string(e, "schema", where),
                    schema_encoding=_optional_string(e, "schemaEncoding", where),
                )
            )
        return ClientAdvertise(tuple(channels))
    if op == "unadvertise":
        return ClientUnadvertise(_ids(obj, "channelIds", op))
    if op == "subscribeConnectionGraph":
        return SubscribeConnectionGraph()
    if op == "unsubscribeConnectionGraph":
        return UnsubscribeConnectionGraph()
    if op in _UNSUPPORTED_OPS:
        return Unsupported(op)
    raise ProtocolError(f"unknown op {op!r:.60}")


def _call_payload(data: bytes, what: str) -> tuple[int, int, str, bytes]:
    if len(data) < _CALL_HEADER.size:
        raise ProtocolError(f"{what} of {len(data)} bytes, shorter than its header")
    _, service_id, call_id, length = _CALL_HEADER.unpack_from(data)
    end = _CALL_HEADER.size + length
    if end > len(data):
        raise ProtocolError(f"{what}: encoding length {length} runs past the frame")
    try:
        encoding = data[_CALL_HEADER.size : end].decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(f"{what}: encoding is not UTF-8") from None
    return service_id, call_id, encoding, bytes(data[end:])


def decode_client_binary(data: bytes) -> ClientMessage:
    if not data:
        raise ProtocolError("empty binary frame")
    op = data[0]
    if op == ClientOpcode.MESSAGE_DATA:
        if len(data) < _CLIENT_DATA_HEADER.size:
            raise ProtocolError(f"client message data of {len(data)} bytes, shorter than 5")
        _, channel_id = _CLIENT_DATA_HEADER.unpack_from(data)
        return ClientMessageData(channel_id, bytes(data[_CLIENT_DATA_HEADER.size :]))
    if op == ClientOpcode.SERVICE_CALL_REQUEST:
        return ServiceCallRequest(*_call_payload(data, "service call request"))
    raise ProtocolError(f"unknown binary opcode 0x{op:02x}")


def decode_client(frame: str | bytes) -> ClientMessage:
    """A client's frame as a message; ProtocolError saying why it is not one."""
    if isinstance(frame, str):
        return decode_client_text(frame)
    return decode_client_binary(frame)


# -- decoding what the server sends (our benchmark's client and the round-trip tests) ----------
def _strings(value: Any, what: str) -> tuple[str, ...]:
    return tuple(_string(v, what) for v in _list(value, what))


def _schema(value: Any, what: str) -> MessageSchema:
    e = _object(value, what)
    return MessageSchema(
        encoding=_string(_get(e, "encoding", what), f"{what} encoding"),
        schema_name=_string(_get(e, "schemaName", what), f"{what} schemaName"),
        schema_encoding=_string(_get(e, "schemaEncoding", what), f"{what} schemaEncoding"),
        schema=_string(_get(e, "schema", what), f"{what} schema"),
    )


def _graph(value: Any, ids: str, what: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = []
    for entry in _list(value, what):
        e = _object(entry, what)
        out.append((_string(_get(e, "name", what), what), _strings(_get(e, ids, what), what)))
    return tuple(out)


def decode_server_text(text: str) -> ServerMessage:
    obj = _load(text)
    op = obj["op"]
    if op == "serverInfo":
        metadata = _object(obj.get("metadata", {}), "metadata")
        return ServerInfo(
            name=_string(_get(obj, "name", op), "name"),
            capabilities=_strings(_get(obj, "capabilities", op), "capabilities"),
            supported_encodings=_strings(obj.get("supportedEncodings", []), "supportedEncodings"),
            metadata={str(k): _string(v, "metadata value") for k, v in metadata.items()},
            session_id=_optional_string(obj, "sessionId", op),
        )
    if op == "status":
        level = _get(obj, "level", op)
        if level not in (0, 1, 2) or isinstance(level, bool):
            raise ProtocolError(f"status level must be 0, 1 or 2, got {level!r:.40}")
        return Status(
            StatusLevel(level),
            _string(_get(obj, "message", op), "message"),
            _optional_string(obj, "id", op),
        )
    if op == "advertise":
        channels = []
        for i, entry in enumerate(_list(_get(obj, "channels", op), "channels")):
            e, where = _object(entry, f"channels[{i}]"), f"channels[{i}]"
            channels.append(
                Channel(
                    id=_uint32(_get(e, "id", where), f"{where} id"),
                    topic=_string(_get(e, "topic", where), f"{where} topic"),
                    encoding=_string(_get(e, "encoding", where), f"{where} encoding"),
                    schema_name=_string(_get(e, "schemaName", where), f"{where} schemaName"),
                    schema=_string(_get(e, "schema", where), f"{where} schema"),
                    schema_encoding=_optional_string(e, "schemaEncoding", where),
                )
            )
        return Advertise(tuple(channels))
    if op == "unadvertise":
        return Unadvertise(_ids(obj, "channelIds", op))
    if op == "advertiseServices":
        services = []
        for i, entry in enumerate(_list(_get(obj, "services", op), "services")):
            e, where = _object(entry, f"services[{i}]"), f"services[{i}]"
            services.append(
                Service(
                    id=_uint32(_get(e, "id", where), f"{where} id"),
                    name=_string(_get(e, "name", where), f"{where} name"),
                    type=_string(_get(e, "type", where), f"{where} type"),
                    request=_schema(_get(e, "request", where), f"{where} request"),
                    response=_schema(_get(e, "response", where), f"{where} response"),
                )
            )
        return AdvertiseServices(tuple(services))
    if op == "unadvertiseServices":
        return UnadvertiseServices(_ids(obj, "serviceIds", op))
    if op == "connectionGraphUpdate":
        return ConnectionGraphUpdate(
            published_topics=_graph(obj.get("publishedTopics", []), "publisherIds", op),
            subscribed_topics=_graph(obj.get("subscribedTopics", []), "subscriberIds", op),
            advertised_services=_graph(obj.get("advertisedServices", []), "providerIds", op),
            removed_topics=_strings(obj.get("removedTopics", []), "removedTopics"),
            removed_services=_strings(obj.get("removedServices", []), "removedServices"),
        )
    if op == "serviceCallFailure":
        return ServiceCallFailure(
            _uint32(_get(obj, "serviceId", op), "serviceId"),
            _uint32(_get(obj, "callId", op), "callId"),
            _string(_get(obj, "message", op), "message"),
        )
    raise ProtocolError(f"unknown op {op!r:.60}")


def decode_server_binary(data: bytes) -> ServerMessage:
    if not data:
        raise ProtocolError("empty binary frame")
    op = data[0]
    if op == ServerOpcode.MESSAGE_DATA:
        if len(data) < _MESSAGE_HEADER.size:
            raise ProtocolError(f"message data of {len(data)} bytes, shorter than 13")
        _, sub, timestamp = _MESSAGE_HEADER.unpack_from(data)
        return MessageData(sub, timestamp, bytes(data[_MESSAGE_HEADER.size :]))
    if op == ServerOpcode.SERVICE_CALL_RESPONSE:
        return ServiceCallResponse(*_call_payload(data, "service call response"))
    raise ProtocolError(f"unknown binary opcode 0x{op:02x}")


def decode_server(frame: str | bytes) -> ServerMessage:
    if isinstance(frame, str):
        return decode_server_text(frame)
    return decode_server_binary(frame)
