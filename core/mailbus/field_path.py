"""One field-path grammar for JSON bodies, used by the plot, Find and the filter, the
notebook, `mailbus topic echo --field` and the test kit (docs/queries.md). Pure.

    x                 the field `x` of the document
    pose.x            a field of a field
    accel[2]          the third item of the list `accel` (`accel.2` reads the same)
    ["gain.k"].value  a key that holds '.', '[', ']', '"' or a space: quoted
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Step = str | int  # a key of an object or an index of a list
MAX_DEPTH = 8  # levels walked for completion (a path may be deeper when typed)
MAX_ITEMS = 8  # items of a list walked for completion

MISSING: Any = object()  # what `get` finds where the document has nothing

_PLAIN_KEY = re.compile(r"[^.\[\]\"\s]+\Z")
_STEP = re.compile(r'\.([^.\[\]"\s]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


class FieldPathError(ValueError):
    """A path that cannot be read; the message says what is wrong and where."""


@dataclass(frozen=True, slots=True)
class FieldPath:
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return format_path(self.steps).removeprefix(".")

    def get(self, document: object) -> Any:
        """The value at this path, or MISSING."""
        return get(document, self.steps)

    def number(self, document: object) -> float | None:
        return value_at(document, self.steps)


def parse(text: str) -> FieldPath:
    """`pose.x`, `accel[2]`, `["a b"].c`; FieldPathError says where it stops making sense."""
    if not text:
        raise FieldPathError("an empty field path: write name, name.sub, name[0]")
    return FieldPath(parse_steps(text if text[0] in ".[" else "." + text))


def format_path(path: tuple[Step, ...]) -> str:
    """`.x[0]["a b"]`: the steps as the syntax writes them, each with its leading mark."""
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
    """The steps of `.x[0]["a b"]`; a FieldPathError says where the text stops making sense."""
    steps: list[Step] = []
    pos = 0
    while pos < len(text):
        match = _STEP.match(text, pos)
        if match is None:
            raise FieldPathError(
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


def decode(body: str | None) -> object:
    """The JSON document of a body, or None (not JSON, or cut at the feed's limit)."""
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # not JSON; nested beyond what Python reads
        return None


def get(document: object, path: tuple[Step, ...]) -> Any:
    """The value at `path`, or MISSING. A key of digits also indexes a list (`items.0`)."""
    node = document
    for step in path:
        if isinstance(node, dict):
            if not isinstance(step, str) or step not in node:
                return MISSING
            node = node[step]
        elif isinstance(node, list):
            index = step if isinstance(step, int) else int(step) if step.isdigit() else -1
            if not 0 <= index < len(node):
                return MISSING
            node = node[index]
        else:
            return MISSING
    return node


def value_at(document: object, path: tuple[Step, ...]) -> float | None:
    """The number at `path` (a boolean counts as 0 or 1), or None when there is none."""
    node = get(document, path)
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
