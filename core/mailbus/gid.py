"""Globally unique identifiers of publishers, clients and servers."""

from __future__ import annotations

import uuid


def new_gid() -> str:
    """A random 128-bit identifier as 32 hex digits.

    Unique across processes and machines, unlike the reference's 32-bit counter.
    """
    return uuid.uuid4().hex
