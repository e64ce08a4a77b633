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

import json
import math
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from enum import StrEnum

from mailbus.errors import InvalidNameError
from mailbus.names import check_name

Step = str | int  # a key of an object or an index of a list
MAX_DEPTH = 8  # levels walked for completion (a path may be deeper when typed)
MAX_ITEMS = 8  # items of a list walked for completion
MAX_FIELDS = 200  # numeric fields offered per topic

_FUNCTION = re.compile(r"(rate|latency)\((.+)\)\Z", re.DOTALL)
_PLAIN_KEY = re.compile(r"[^.\[\]\"\s]+\Z")
_STEP = re.compile(r'\.([^.\[\]"\s]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


class PathError(ValueError):
    """A series that cannot be read; the message says what is wrong and where."""


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


def format_path(path: tuple[Step, ...]) -> str:
    """`.x[0]["a b"]`: the steps as the syntax above writes them."""
    out = []
    for step in path:
        if isinstance(step, int):
            out.append(f"[{step}]")
        elif _PLAIN_KEY.match(step):
            out.append(f".{step}")
        else:
            out.append(f"[{json.dumps(step)}]")
    return "".join(out)


def parse_steps(text: str) -> tuple[Step, ...]:
    """The steps of `.x[0]["a b"]`; a PathError says where the text stops making sense."""
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None:
            raise PathError(
                f'cannot read the field path at {text[pos:]!r}: write .name, [index] or ["any key"]'
            )
        key, index, quoted = match.groups()
        if key is not None:
            steps.append(key)
        elif index is not None:
            steps.append(int(index))
        else:
            steps.append(json.loads(quoted))  # a JSON string: data only
        pos = match.end()
    return tuple(steps)


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
    try:
        if function is not None:
            kind, name = function.groups()
            what = "service" if kind == "latency" else "topic"
            return SeriesKey(SeriesKind(kind), check_name(name.strip(), what))
        topic, rest = _split_topic(text, topics)
        return SeriesKey(SeriesKind.FIELD, check_name(topic), parse_steps(rest))
    except InvalidNameError as exc:
        raise PathError(str(exc)) from None


def decode(body: str | None) -> object:
    """The JSON document of a body, or None (not JSON, or cut at the feed's limit)."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # not JSON; nested beyond what Python reads
        return None


def value_at(document: object, path: tuple[Step, ...]) -> float | None:
    """The number at `path` (a boolean counts as 0 or 1), or None when there is none."""
    node = document
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return None
            node = node[step]
        else:
            if not isinstance(node, dict) or step not in node:
                return None
            node = node[step]
    if isinstance(node, bool | int | float):
        try:
            value = float(node)
        except OverflowError:  # an integer beyond any float
            return None
        return value if math.isfinite(value) else None  # NaN, Infinity: nothing to draw
    return None


def numeric_paths(document: object) -> Iterator[tuple[Step, ...]]:
    """The paths of the numbers (and booleans) in a decoded JSON document, depth first,
    at most MAX_DEPTH deep and MAX_ITEMS items into each list."""

    def walk(node: object, path: tuple[Step, ...]) -> Iterator[tuple[Step, ...]]:
        if isinstance(node, bool | int | float):
            yield path
        elif len(path) >= MAX_DEPTH:
            return
        elif isinstance(node, dict):
            for key, value in node.items():
                yield from walk(value, (*path, str(key)))
        elif isinstance(node, list):
            for index, value in enumerate(node[:MAX_ITEMS]):
                yield from walk(value, (*path, index))

    return walk(document, ())
