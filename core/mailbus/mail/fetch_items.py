"""What the IMAP receiver asks in its FETCHes and how it reads the answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SIZE_ITEMS = [b"UID", b"RFC822.SIZE"]


def body_items(max_bytes: int) -> list[bytes]:
    return [b"UID", b"BODY.PEEK[]<0.%d>" % max_bytes]


def response_bytes(data: list[Any]) -> int:
    """How many bytes of FETCH response imaplib handed over (lines and literals)."""
    total = 0
    for item in data:
        if isinstance(item, bytes):
            total += len(item)
        elif isinstance(item, tuple):
            total += sum(len(part) for part in item if isinstance(part, bytes))
    return total


def body_of(data: Mapping[bytes, Any]) -> bytes | None:
    """The body bytes of one parsed FETCH item (the key names the partial range)."""
    for key, value in data.items():
        if key.startswith(b"BODY[]") and isinstance(value, bytes):
            return value
    return None


def size_of(data: Mapping[bytes, Any]) -> int:
    return int(data.get(b"RFC822.SIZE", 0))
