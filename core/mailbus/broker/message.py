"""Broker messages: string properties and content bytes, immutable.

A published message is handed to every sink as the same object (no copy per sink, the
zero-copy hand-off the design wanted from nanomsg), which is only safe because nobody
can change it: the content is `bytes` and the properties a read-only mapping.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

_EMPTY: Mapping[str, str] = MappingProxyType({})


def _check_property(key: object, value: object) -> None:
    # The wire format ends keys and values with NUL, so a NUL inside one cannot travel.
    if not isinstance(key, str) or not isinstance(value, str):
        raise TypeError(
            f"message properties map str to str, got {type(key).__name__} -> "
            f"{type(value).__name__} for key {key!r}"
        )
    if not key:
        raise ValueError("message property keys must not be empty")
    if "\0" in key or "\0" in value:
        raise ValueError(f"message property {key!r} contains a NUL character")


class BrokerMessage:
    """`BrokerMessage(content=b"", properties=None)`: read-only after creation."""

    __slots__ = ("_content", "_properties")

    _content: bytes
    _properties: Mapping[str, str]

    def __init__(
        self,
        content: bytes | bytearray | memoryview | str = b"",
        properties: Mapping[str, str] | None = None,
    ) -> None:
        if type(content) is not bytes:
            if isinstance(content, str):
                content = content.encode("utf-8")
            elif isinstance(content, bytearray | memoryview):
                content = bytes(content)
            else:
                raise TypeError(f"message content must be bytes, not {type(content).__name__}")
        if properties:
            copied = dict(properties)
            for key, value in copied.items():
                _check_property(key, value)
            props: Mapping[str, str] = MappingProxyType(copied)
        else:
            props = _EMPTY
        object.__setattr__(self, "_content", content)
        object.__setattr__(self, "_properties", props)

    @classmethod
    def _trusted(cls, content: bytes, properties: dict[str, str]) -> BrokerMessage:
        """For the decoder, which has validated everything already; takes ownership of
        `properties`."""
        message = cls.__new__(cls)
        object.__setattr__(message, "_content", content)
        object.__setattr__(
            message, "_properties", MappingProxyType(properties) if properties else _EMPTY
        )
        return message

    @property
    def content(self) -> bytes:
        return self._content

    @property
    def properties(self) -> Mapping[str, str]:
        return self._properties

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("broker messages are read-only (sinks share one object)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("broker messages are read-only (sinks share one object)")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BrokerMessage):
            return NotImplemented
        return self._content == other._content and dict(self._properties) == dict(other._properties)

    def __hash__(self) -> int:
        return hash((self._content, frozenset(self._properties.items())))

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._properties.items())

    def __repr__(self) -> str:
        shown = self._content[:32]
        more = "..." if len(self._content) > 32 else ""
        return f"BrokerMessage({shown!r}{more}, properties={dict(self._properties)!r})"

    def with_properties(self, **extra: str) -> BrokerMessage:
        """A copy with `extra` properties added (or replaced)."""
        return BrokerMessage(self._content, {**self._properties, **extra})
