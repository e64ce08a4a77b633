"""Events whose fields do not fit their columns: a recording never dies of one event.

A trace event can carry anything a foreign email or a bug put in it: a number beyond
int64, a string with lone surrogates (not encodable as UTF-8), a value of the wrong type.
Such a value is stored null (a required column gets a stand-in) and the event's `detail`
says which field and why; every other value and every other event is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mailbus.extras import needs_extra
from mailbus.trace import TraceEvent

with needs_extra("mailbus.sessions"):
    import pyarrow as pa  # type: ignore[import-untyped]

NOTE_PREFIX = "[recorder stored null: "
_ARROW_ERRORS = (pa.ArrowException, OverflowError, TypeError, ValueError, UnicodeError)
_STAND_INS: Mapping[str, Any] = {"kind": "unknown", "recorded_ns": 0, "body_truncated": False}
_FIELD_TYPES: Mapping[str, type | tuple[type, ...]] = {
    "kind": str,
    "time_ns": int,
    "name": str,
    "gid": str,
    "source_gid": str,
    "sequence_number": int,
    "message_id": str,
    "in_reply_to": str,
    "references": tuple,
    "source_timestamp_ns": int,
    "reception_timestamp_ns": int,
    "body": (str, type(None)),
    "size": int,
    "headers": Mapping,
    "detail": str,
    "extra": Mapping,
}
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TraceEvent)}


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def coerced(event: TraceEvent) -> tuple[TraceEvent, list[str]]:
    """`event` with every field of the wrong Python type set to its default, and notes."""
    changes: dict[str, Any] = {}
    notes: list[str] = []
    for name, expected in _FIELD_TYPES.items():
        value = getattr(event, name)
        if not isinstance(value, expected):
            changes[name] = 0 if name == "time_ns" else _DEFAULTS[name]
            notes.append(f"{name}: a {type(value).__name__} is not a {name}")
    if not changes:
        return event, notes
    return dataclasses.replace(event, **changes), notes


def with_notes(detail: str | None, notes: list[str]) -> str:
    note = NOTE_PREFIX + _printable("; ".join(notes)) + "]"
    return f"{detail} {note}" if detail else note


def fitted_table(columns: dict[str, list[Any]], schema: pa.Schema) -> tuple[pa.Table, int]:
    """The table of `columns`, and how many values had to be replaced to build it."""
    try:
        return pa.table(columns, schema=schema), 0
    except _ARROW_ERRORS:
        pass
    rows = len(columns[schema.names[0]])
    notes: list[list[str]] = [[] for _ in range(rows)]
    fixed: dict[str, list[Any]] = {}
    for field in schema:
        values = list(columns[field.name])
        try:
            pa.array(values, type=field.type)
        except _ARROW_ERRORS:
            for index, value in enumerate(values):
                try:
                    pa.array([value], type=field.type)
                except _ARROW_ERRORS as exc:
                    values[index] = None if field.nullable else _STAND_INS[field.name]
                    reason = str(exc).splitlines()[0][:160] if str(exc) else ""
                    notes[index].append(f"{field.name}: {type(exc).__name__}: {reason}")
        fixed[field.name] = values
    replaced = 0
    for index, row_notes in enumerate(notes):
        if row_notes:
            replaced += len(row_notes)
            fixed["detail"][index] = with_notes(fixed["detail"][index], row_notes)
    return pa.table(fixed, schema=schema), replaced
