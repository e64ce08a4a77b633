"""How a session maps onto MCAP, both ways (docs/sessions.md, "MCAP"). Pure: no I/O.

Every row of a session becomes one message of the events channel (`mailbus.events`):
the row's columns as a JSON object (the *envelope*), its body left out when the row is an
email. An email's body is the message of its name's channel (`/` + the topic or service
name), written right after its envelope with the same log time and sequence: the body
itself when it is a JSON object (so Foxglove plots `/robot/pose.x`), else wrapped as
`{"text": ...}` (UTF-8 text that is not a JSON object, as the live Foxglove bridge wraps
it) or `{"base64": ...}` (bytes that are not UTF-8); the envelope's `body_encoding` says
which, so the bytes come back exact.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from mailbus.envelope import EnvelopeKind
from mailbus.sessions.schema import COLUMN_NAMES
from mailbus.trace import Kind

PROFILE = "mailbus"
EVENTS_TOPIC = "mailbus.events"  # no leading "/": never the channel of a name
EVENTS_SCHEMA = "mailbus.Event"
METADATA_NAME = "mailbus.session"
FORMAT_VERSION = "1"
# Channel metadata keys.
ROLE_KEY = "mailbus.role"  # "events" or "body"
NAME_KEY = "mailbus.name"  # the topic or service name of a body channel
KINDS_KEY = "mailbus.kinds"  # what the channel carries: message, request, response
# MCAP's message sequence is a uint32.
SEQUENCE_MASK = 0xFFFFFFFF

# What becomes an email on a name's channel: what replay re-sends (mailbus.sessions.player).
SENT_KINDS = {
    Kind.PUBLISHED.value: EnvelopeKind.MESSAGE.value,
    Kind.REQUEST_SENT.value: EnvelopeKind.REQUEST.value,
    Kind.RESPONSE_SENT.value: EnvelopeKind.RESPONSE.value,
}
RECEIVED = Kind.RECEIVED.value
EMAIL_WHATS = frozenset(kind.value for kind in EnvelopeKind)

BODY_JSON = "json"
BODY_TEXT = "text"
BODY_BASE64 = "base64"
BODY_NONE = "none"
BODY_ENCODINGS = (BODY_JSON, BODY_TEXT, BODY_BASE64, BODY_NONE)

_INT_COLUMNS = ("event_index", "recorded_ns", "source_ns", "reception_ns", "sequence_number")
_TEXT_COLUMNS = (
    "kind",
    "name",
    "gid",
    "source_gid",
    "message_id",
    "in_reply_to",
    "detail",
    "extra",
    "transport",
    "participant",
    "signature",
)

_SCALAR_COLUMNS = _INT_COLUMNS + _TEXT_COLUMNS
_INT_TYPES = frozenset({int, type(None)})  # not bool: True is no number of a column
_TEXT_TYPES = frozenset({str, type(None)})


def channel_topic(name: str) -> str:
    """The MCAP topic of a Mailbus topic or service: ROS and Foxglove topics start with
    a slash, and Foxglove's message paths (`/robot/pose.x`) need it."""
    return "/" + name


def email_what(kind: str, detail: str | None) -> str | None:
    """message, request or response when a row of `kind` is an email, else None."""
    what = SENT_KINDS.get(kind)
    if what is not None:
        return what
    if kind == RECEIVED and detail in EMAIL_WHATS:
        return detail
    return None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: Python's json accepts them


# Made once: json.dumps and json.loads with options build an encoder or decoder per call.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_decode_strict = json.JSONDecoder(parse_constant=_reject_constant).decode


def body_message(body: bytes | None) -> tuple[bytes, str, dict[str, Any]]:
    """The data of an email's channel message, its `body_encoding` and the JSON object
    the data holds (for the channel's schema)."""
    if body is None:
        return b"{}", BODY_NONE, {}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        wrapped = {BODY_BASE64: base64.b64encode(body).decode("ascii")}
        return json.dumps(wrapped).encode(), BODY_BASE64, wrapped
    if text.lstrip()[:1] == "{":
        try:
            value = _decode_strict(text)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return body, BODY_JSON, value
    # As the live Foxglove bridge sends it (mailbus.foxglove.schema), so that a layout
    # made on live traffic works on the recording.
    wrapped = {BODY_TEXT: text}
    return _encode(wrapped).encode(), BODY_TEXT, wrapped


def body_from_message(data: bytes, encoding: str) -> bytes | None:
    """The body bytes back from a channel message written by `body_message`."""
    if encoding == BODY_JSON:
        return data
    if encoding == BODY_NONE:
        return None
    value = json.loads(data)
    if encoding == BODY_TEXT:
        return str(value[BODY_TEXT]).encode("utf-8")
    if encoding == BODY_BASE64:
        return base64.b64decode(value[BODY_BASE64], validate=True)
    raise ValueError(f"unknown body_encoding {encoding!r}")


def envelope(values: Sequence[Any], *, body_channel: str | None, body_encoding: str) -> bytes:
    """The events-channel message of a session row, given as its values in COLUMN_NAMES
    order (null columns left out). With `body_channel`, the body travels on that channel
    and is left out here."""
    out = {c: v for c, v in zip(COLUMN_NAMES, values, strict=True) if v is not None}
    body = out.pop("body", None)
    if body is not None and body_channel is None:
        try:
            out["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            out["body_base64"] = base64.b64encode(body).decode("ascii")
    raw = out.pop("raw", None)
    if raw is not None:
        out["raw_base64"] = base64.b64encode(raw).decode("ascii")
    headers = out.get("headers")
    if headers is not None:
        out["headers"] = dict(headers)
    if body_channel is not None:
        out["body_channel"] = body_channel
        out["body_encoding"] = body_encoding
    return _encode(out).encode()


def row_from_envelope(env: Mapping[str, Any]) -> dict[str, Any]:
    """The session row an envelope was made from, its body (if it travelled on a body
    channel) still to be filled in. ValueError when the envelope is not one."""
    get = env.get
    row: dict[str, Any] = {c: get(c) for c in _SCALAR_COLUMNS}
    # One quick pass over the types; the slow one only to say what is wrong.
    if any(type(row[c]) not in _INT_TYPES for c in _INT_COLUMNS) or any(
        type(row[c]) not in _TEXT_TYPES for c in _TEXT_COLUMNS
    ):
        for column in _INT_COLUMNS:
            if type(row[column]) not in _INT_TYPES:
                raise ValueError(f"envelope {column} is not an integer: {row[column]!r:.40}")
        for column in _TEXT_COLUMNS:
            if type(row[column]) not in _TEXT_TYPES:
                raise ValueError(f"envelope {column} is not a string: {row[column]!r:.40}")
    if row["event_index"] is None or row["kind"] is None or row["recorded_ns"] is None:
        raise ValueError("envelope lacks event_index, kind or recorded_ns")
    references = env.get("references")
    if references is not None and not (
        isinstance(references, list) and all(isinstance(r, str) for r in references)
    ):
        raise ValueError("envelope references is not a list of strings")
    row["references"] = references
    headers = env.get("headers")
    if headers is not None:
        if not isinstance(headers, dict):
            raise ValueError("envelope headers is not an object")
        headers = [(str(k), str(v)) for k, v in headers.items()]
    row["headers"] = headers
    if "body" in env:
        row["body"] = str(env["body"]).encode("utf-8")
    elif "body_base64" in env:
        row["body"] = base64.b64decode(env["body_base64"], validate=True)
    else:
        row["body"] = None
    row["raw"] = base64.b64decode(env["raw_base64"], validate=True) if "raw_base64" in env else None
    size = env.get("body_size")
    row["body_size"] = size if isinstance(size, int) and not isinstance(size, bool) else None
    row["body_truncated"] = bool(env.get("body_truncated", False))
    return row


# What the events channel's messages hold (Foxglove lists these fields).
EVENTS_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": EVENTS_SCHEMA,
    "description": "one row of a Mailbus session (docs/sessions.md); an email's body is "
    "the message of its body_channel with the same log time and sequence",
    "type": "object",
    "properties": {
        "event_index": {"type": "integer"},
        "kind": {"type": "string"},
        "recorded_ns": {"type": "integer"},
        "source_ns": {"type": "integer"},
        "reception_ns": {"type": "integer"},
        "name": {"type": "string"},
        "gid": {"type": "string"},
        "source_gid": {"type": "string"},
        "sequence_number": {"type": "integer"},
        "message_id": {"type": "string"},
        "in_reply_to": {"type": "string"},
        "references": {"type": "array", "items": {"type": "string"}},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "body": {"type": "string"},
        "body_base64": {"type": "string"},
        "body_size": {"type": "integer"},
        "body_truncated": {"type": "boolean"},
        "body_channel": {"type": "string"},
        "body_encoding": {"enum": list(BODY_ENCODINGS)},
        "detail": {"type": "string"},
        "extra": {"type": "string"},
        "transport": {"type": "string"},
        "participant": {"type": "string"},
        "signature": {"type": "string"},
        "raw_base64": {"type": "string"},
    },
    "required": ["event_index", "kind", "recorded_ns"],
}
