"""The base of every area's trace event kinds: pure, so that codecs may name their
kinds without importing the tracer's threads and clocks."""

from __future__ import annotations

from enum import StrEnum
from typing import Self


class EventKind(StrEnum):
    """Base of every area's event kinds. A member's value is the event's `kind` string
    (`area.action`) and its `doc` says when it happens; docs/trace-events.md is
    generated from them (mailbus.trace_catalog), so a kind is defined in one place."""

    doc: str

    def __new__(cls, value: str, doc: str = "") -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.doc = doc
        return member
