"""The base of every area's trace event kinds: pure, so that codecs may name their
kinds without importing the tracer's threads and clocks.

A kind declares the keys its events may carry in `extra`, each with its type and
meaning (`Extra`). docs/trace-events.md renders them, and `EventKind.extra_problems`
tells an undeclared or wrongly typed key: the test suite runs it on every event it
emits (tests/conftest.py) and on the `extra={...}` literals of the product code
(tests/core/test_trace_catalog.py)."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Self


@dataclass(frozen=True, slots=True)
class Extra:
    """One key an event's `extra` may carry. `type` is a class, a union (`int | float`)
    or a parametrised container (`list[str]`, `tuple[str, ...]`, `dict[str, Any]`)."""

    type: Any
    doc: str = ""


NO_EXTRA: Mapping[str, Extra] = types.MappingProxyType({})


class EventKind(StrEnum):
    """Base of every area's event kinds. A member's value is the event's `kind` string
    (`area.action`), its `doc` says when it happens (`when | notable fields`) and its
    `extra` declares the keys of the event's `extra` mapping; docs/trace-events.md is
    generated from them (mailbus.trace_catalog), so a kind is defined in one place."""

    doc: str
    extra: Mapping[str, Extra]

    def __new__(cls, value: str, doc: str = "", extra: Mapping[str, Extra] = NO_EXTRA) -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.doc = doc
        member.extra = types.MappingProxyType(dict(extra))
        return member

    def extra_problems(self, extra: Mapping[str, object]) -> list[str]:
        """What in `extra` this kind does not declare, or declares with another type."""
        problems = []
        for key, value in extra.items():
            declared = self.extra.get(key)
            if declared is None:
                problems.append(f"{self.value}: extra key {key!r} is not declared")
            elif not conforms(value, declared.type):
                wanted = type_name(declared.type)
                problems.append(f"{self.value}: extra[{key!r}] = {value!r:.80} is not {wanted}")
        return problems


def conforms(value: object, expected: Any) -> bool:
    """Whether `value` is of the declared type (containers checked item by item)."""
    if expected is Any or expected is object:
        return True
    if expected is None or expected is type(None):
        return value is None
    origin = typing.get_origin(expected)
    args = typing.get_args(expected)
    if origin is typing.Union or origin is types.UnionType:
        return any(conforms(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if origin is None:
        if expected is float:  # as in typing: an int is acceptable where a float is
            return isinstance(value, int | float) and not isinstance(value, bool)
        if expected is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, expected)
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        if not isinstance(value, Mapping):
            return False
        key_type, value_type = args or (Any, Any)
        return all(conforms(k, key_type) and conforms(v, value_type) for k, v in value.items())
    if origin is tuple and args and args[-1] is not Ellipsis:
        return (
            isinstance(value, tuple)
            and len(value) == len(args)
            and all(conforms(v, a) for v, a in zip(value, args, strict=True))
        )
    container = Sequence if origin is Sequence else origin
    if not isinstance(value, container) or isinstance(value, str | bytes):
        return False
    item_type = args[0] if args else Any
    return all(conforms(v, item_type) for v in value)


def type_name(expected: Any) -> str:
    """How a declared type reads in the documentation: `int`, `list[str]`, `str | None`."""
    if expected is None or expected is type(None):
        return "None"
    if isinstance(expected, type) and not typing.get_args(expected):
        return expected.__name__
    return str(expected).replace("typing.", "").replace("collections.abc.", "")
