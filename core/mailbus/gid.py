"""Globally unique identifiers of publishers, clients and servers."""

from __future__ import annotations

import uuid

from mailbus.random_pool import RandomPool

_random = RandomPool(16, batch=256)


def new_gid() -> str:
    """A random 128-bit identifier (a version-4 UUID) as 32 hex digits.

    Unique across processes and machines, unlike the reference's 32-bit counter. A
    replay maps each recorded GID to a new one: the bytes come from a pooled read."""
    return uuid.UUID(bytes=_random.take(), version=4).hex
