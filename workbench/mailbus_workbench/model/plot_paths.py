"""What a plot series names: a numeric field of a topic's JSON bodies, a topic's rate or a
service's latency, written as one line of text.

    robot/pose.x                 the field `x` of each message on `robot/pose`
    sensors/imu.accel[2]         the third item of the list `accel`
    lab/cfg["gain.k"].value      a key that holds '.', '[', ']', '"' or a space: quoted
    sensors/level                a topic whose body is a bare number
    rate(robot/pose)             messages per second on `robot/pose`
    latency(demo/add)            each answered call's latency in milliseconds

The topic is the longest known topic the text starts with (followed by `.` or `[`), so a
topic whose name holds a dot still works once it has been seen; an unseen one ends at the
first `.` or `[` after its last `/`."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

from mailbus.errors import InvalidNameError
from mailbus.field_path import (
    MAX_DEPTH,
    MAX_ITEMS,
    Step,
    decode,
    format_path,
    numeric_paths,
    parse_steps,
    value_at,
)
from mailbus.field_path import FieldPathError as PathError
from mailbus.names import check_name

__all__ = [
    "MAX_DEPTH",
    "MAX_FIELDS",
    "MAX_ITEMS",
    "PathError",
    "SeriesKey",
    "SeriesKind",
    "Step",
    "decode",
    "format_path",
    "numeric_paths",
    "parse",
    "parse_steps",
    "value_at",
]

MAX_FIELDS = 200  # numeric fields offered per topic

_FUNCTION = re.compile(r"(rate|latency)\((.*)\)\Z", re.DOTALL)
# A series function's name and its parenthesis, however the rest is written: `rate()`,
# `rate(robot/pose` are never taken for a topic of that name.
_FUNCTION_START = re.compile(r"(rate|latency)\s*\(")


class SeriesKind(StrEnum):
    FIELD = "field"
    RATE = "rate"
    LATENCY = "latency"


@dataclass(frozen=True, slots=True)
class SeriesKey:
    kind: SeriesKind
    name: str  # the topic, or the service for a latency
    path: tuple[Step, ...] = ()

    def __str__(self) -> str:
        if self.kind is SeriesKind.FIELD:
            return self.name + format_path(self.path)
        return f"{self.kind.value}({self.name})"

    @property
    def unit(self) -> str:
        return {SeriesKind.RATE: "msg/s", SeriesKind.LATENCY: "ms"}.get(self.kind, "")


def _split_topic(text: str, topics: Collection[str]) -> tuple[str, str]:
    best = ""
    for topic in topics:
        if len(topic) > len(best) and (
            text == topic or (text.startswith(topic) and text[len(topic)] in ".[")
        ):
            best = topic
    if best:
        return best, text[len(best) :]
    slash = text.rfind("/")
    ends = [i for i in (text.find(".", slash + 1), text.find("[", slash + 1)) if i > 0]
    cut = min(ends) if ends else len(text)
    return text[:cut], text[cut:]


def parse(text: str, topics: Collection[str] = ()) -> SeriesKey:
    """Read one series; `topics` are the topic names seen (for names with dots)."""
    text = text.strip()
    if not text:
        raise PathError("name a series: topic.field, rate(topic) or latency(service)")
    function = _FUNCTION.match(text)
    if function is None and (start := _FUNCTION_START.match(text)) is not None:
        what = "service" if start.group(1) == "latency" else "topic"
        raise PathError(f"write {start.group(1)}({what}), one {what} name between the parentheses")
    try:
        if function is not None:
            kind, name = function.groups()
            what = "service" if kind == "latency" else "topic"
            if not name.strip():
                example = "demo/add" if kind == "latency" else "robot/pose"
                raise PathError(f"{kind}() needs a {what}: {kind}({example})")
            return SeriesKey(SeriesKind(kind), check_name(name.strip(), what))
        topic, rest = _split_topic(text, topics)
        return SeriesKey(SeriesKind.FIELD, check_name(topic), parse_steps(rest))
    except InvalidNameError as exc:
        raise PathError(str(exc)) from None
