"""The session format: one Parquet row per trace event, schema version 1.

docs/sessions.md describes every column. The version is written in the manifest and in
each part file's metadata; a reader refuses a version newer than SCHEMA_VERSION with a
clear error instead of misreading columns it does not know.

Redaction lives here too, so that the recorder and anything else that writes rows share
one rule: no password ever reaches a session, not as a header, not inside a URL, not
as the literal password anywhere in a string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mailbus.extras import needs_extra
from mailbus.trace import TraceEvent

with needs_extra("mailbus.sessions"):
    import pyarrow as pa  # type: ignore[import-untyped]

SCHEMA_VERSION = 1
METADATA_VERSION_KEY = b"mailbus.sessions.schema_version"
METADATA_ENGINE_KEY = b"mailbus.sessions.engine_version"
MANIFEST = "manifest.json"
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"
TEMP_SUFFIX = ".tmp"
REDACTED = "[redacted]"

# Column name, arrow type, nullable. Order is the order in the files.
COLUMNS: tuple[tuple[str, pa.DataType, bool], ...] = (
    ("event_index", pa.int64(), False),
    ("kind", pa.string(), False),
    ("recorded_ns", pa.int64(), False),
    ("source_ns", pa.int64(), True),
    ("reception_ns", pa.int64(), True),
    ("name", pa.string(), True),
    ("gid", pa.string(), True),
    ("source_gid", pa.string(), True),
    ("sequence_number", pa.int64(), True),
    ("message_id", pa.string(), True),
    ("in_reply_to", pa.string(), True),
    ("references", pa.list_(pa.string()), True),
    ("headers", pa.map_(pa.string(), pa.string()), True),
    ("body", pa.binary(), True),
    ("body_size", pa.int64(), True),
    ("body_truncated", pa.bool_(), False),
    ("detail", pa.string(), True),
    ("extra", pa.string(), True),
    ("transport", pa.string(), True),
    ("participant", pa.string(), True),
    ("signature", pa.string(), True),
    ("raw", pa.binary(), True),
)
COLUMN_NAMES = tuple(name for name, _, _ in COLUMNS)
# Nullable columns added to version 1 later (a compatible change): parts written before
# lack them, and readers fill them with nulls.
ADDED_COLUMNS = frozenset({"signature", "raw"})


def arrow_schema(engine_version: str = "") -> pa.Schema:
    metadata = {METADATA_VERSION_KEY: str(SCHEMA_VERSION).encode()}
    if engine_version:
        metadata[METADATA_ENGINE_KEY] = engine_version.encode()
    return pa.schema(
        [pa.field(name, kind, nullable=nullable) for name, kind, nullable in COLUMNS],
        metadata=metadata,
    )


def part_name(number: int) -> str:
    return f"{PART_PREFIX}{number:05d}{PART_SUFFIX}"


# Header names whose values are secrets, whatever transport or part set them.
_SECRET_HEADER = re.compile(r"pass|secret|token|auth|credential|cookie|api[-_]?key", re.I)
# userinfo of a URL: scheme://user:password@host -> scheme://user:[redacted]@host
_URL_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*):[^/\s@]*@")
# key=value or key: value pairs that name a password in free text (details, logs).
_SECRET_PAIR = re.compile(r"((?:password|passwd|pwd|secret|token)\s*[=:]\s*)([^\s,;&]+)", re.I)


# Cheap pre-check: only values that may hold a secret go through the full rules.
_SUSPECT = re.compile(r"://|pass|pwd|secret|token", re.I)


class Redactor:
    """Removes passwords from what is recorded. `secrets` are literal values (the
    context's password) replaced wherever they occur, bodies included."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first: a secret inside another must not leave the rest of the longer.
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self._secret_bytes = tuple(s.encode("utf-8") for s in self._secrets)
        self._secret_names: dict[str, bool] = {}
        self._secret_raw_names: dict[bytes, bool] = {}
        literal = "|".join(re.escape(s) for s in self._secrets)
        self._suspect = (
            re.compile(f"{_SUSPECT.pattern}|{literal}", re.I) if literal else _SUSPECT
        ).search

    def text(self, value: str) -> str:
        if not value or self._suspect(value) is None:
            return value
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
                if secret in value:  # the marker and its neighbours spelled it again
                    return REDACTED
        if "://" in value:
            value = _URL_USERINFO.sub(r"\1:" + REDACTED + "@", value)
        if "=" in value or ":" in value:
            value = _SECRET_PAIR.sub(r"\1" + REDACTED, value)
        return value

    def headers(self, headers: Mapping[str, str]) -> list[tuple[str, str]]:
        names = self._secret_names
        result = []
        for name, value in headers.items():
            secret = names.get(name)
            if secret is None:
                secret = bool(_SECRET_HEADER.search(name))
                if len(names) < 10_000:
                    names[name] = secret
            if secret:
                value = REDACTED
            elif self._suspect(value) is not None:
                value = self.text(value)
            result.append((name, value))
        return result

    def raw(self, raw: bytes, *, literal: bool = True) -> bytes:
        """The raw bytes of an email with the headers rule applied to its header block (a
        header named like a secret keeps its name, its value and folded lines become
        [redacted]) and, with `literal`, the secrets replaced wherever they occur. Every
        line of the block is read: the parsed headers may lack some (a malformed line
        ends the parser's header block; a signature check keeps only signed headers)."""
        end = raw.find(b"\r\n\r\n")
        if end < 0:
            end = raw.find(b"\n\n")
        lines = (raw if end < 0 else raw[:end]).split(b"\n")
        names = self._secret_raw_names
        kept: list[bytes] = []
        secret = changed = False
        for line in lines:
            if line[:1] in (b" ", b"\t"):  # a folded line of the header above
                if secret:
                    changed = True
                else:
                    kept.append(line)
                continue
            name, colon, _ = line.partition(b":")
            known = names.get(name) if colon else False
            if known is None:
                known = bool(_SECRET_HEADER.search(name.decode("latin-1")))
                if len(names) < 10_000:
                    names[name] = known
            secret = known
            if secret:
                changed = True
                kept.append(
                    name + b": " + REDACTED.encode() + (b"\r" if line.endswith(b"\r") else b"")
                )
            else:
                kept.append(line)
        if changed:
            raw = b"\n".join(kept) + (b"" if end < 0 else raw[end:])
        return self.body(raw) if literal else raw

    def body(self, body: bytes) -> bytes:
        for secret in self._secret_bytes:
            if secret in body:
                body = body.replace(secret, REDACTED.encode())
                if secret in body:
                    return REDACTED.encode()
        return body


def cap_body(body: str, cap: int) -> tuple[bytes, int, bool]:
    """UTF-8 bytes of `body` cut to at most `cap` bytes at a character boundary, the true
    size in bytes, and whether it was cut."""
    if body.isascii():
        size = len(body)
        if size <= cap:
            return body.encode("ascii"), size, False
        return body[:cap].encode("ascii"), size, True
    data = body.encode("utf-8", "surrogatepass")
    size = len(data)
    if size <= cap:
        return data, size, False
    end = cap
    while end > 0 and (data[end] & 0xC0) == 0x80:  # never split a character
        end -= 1
    return data[:end], size, True


# One row of a recording before it is written: (event_index, event, capped body, body
# size in bytes or -1 for none, truncated).
EventRow = tuple[int, TraceEvent, bytes | None, int, bool]


def event_columns(
    rows: Sequence[EventRow],
    redactor: Redactor,
    *,
    redact_bodies: bool = True,
    transport: str = "",
    participant: str = "",
    raw_cap: int = 0,
) -> dict[str, list[Any]]:
    """The columns of COLUMNS for `rows`, redacted: the one mapping from trace events
    to a recording's rows (the recorder and the notebook monitor both use it). The raw
    bytes of an email are kept when they are at most `raw_cap` bytes (0: never)."""
    text = redactor.text
    events = [row[1] for row in rows]

    def opt(value: str) -> str | None:
        return text(value) if value else None

    return {
        "event_index": [row[0] for row in rows],
        "kind": [e.kind for e in events],
        "recorded_ns": [e.time_ns for e in events],
        "source_ns": [e.source_timestamp_ns or None for e in events],
        "reception_ns": [e.reception_timestamp_ns or None for e in events],
        "name": [e.name or None for e in events],
        "gid": [e.gid or None for e in events],
        "source_gid": [e.source_gid or None for e in events],
        "sequence_number": [e.sequence_number if e.sequence_number >= 0 else None for e in events],
        "message_id": [e.message_id or None for e in events],
        "in_reply_to": [e.in_reply_to or None for e in events],
        "references": [list(e.references) if e.references else None for e in events],
        "headers": [redactor.headers(e.headers) if e.headers else None for e in events],
        "body": [
            redactor.body(row[2]) if row[2] is not None and redact_bodies else row[2]
            for row in rows
        ],
        "body_size": [row[3] if row[3] >= 0 else None for row in rows],
        "body_truncated": [row[4] for row in rows],
        "detail": [opt(e.detail) for e in events],
        "extra": [
            text(json.dumps(e.extra, default=str, sort_keys=True)) if e.extra else None
            for e in events
        ],
        "transport": [transport or None] * len(rows),
        "participant": [participant or None] * len(rows),
        # "verified", "unsigned" or "failed: why" (email.received with [signing] options).
        "signature": [_signature(e.extra) for e in events],
        "raw": [
            redactor.raw(e.raw, literal=redact_bodies)
            if e.raw is not None and len(e.raw) <= raw_cap
            else None
            for e in events
        ],
    }


def _signature(extra: Mapping[str, Any]) -> str | None:
    value = extra.get("signature") if extra else None
    return value if isinstance(value, str) and value else None
