"""Globally unique identifiers of publishers, clients and servers."""

from __future__ import annotations

from mailbus.random_pool import RandomPool

_random = RandomPool(16, batch=256)


def new_gid() -> str:
    """A random 128-bit identifier (a version-4 UUID) as 32 hex digits.

    Unique across processes and machines, unlike the reference's 32-bit counter. A
    replay maps each recorded GID to a new one: the bytes come from a pooled read."""
    value = bytearray(_random.take())
    # The version and variant bits, as uuid.UUID(version=4) sets them (that costs 5 times
    # as much, and a replay makes a GID per email whose client it does not know).
    value[6] = (value[6] & 0x0F) | 0x40
    value[8] = (value[8] & 0x3F) | 0x80
    return value.hex()
