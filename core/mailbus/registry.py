"""Transports known by name, as data: where each factory lives, which option tables
wrap a transport (the durable outbox), and which environment variables hold a secret.

The engine loads a transport by this name only when options ask for it, so it never
imports one (the layers contract in pyproject.toml checks it), and the recorder redacts
every declared secret without knowing any transport.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mailbus.errors import ConfigError


@dataclass(frozen=True, slots=True)
class TransportEntry:
    factory: str  # "module:function", called with (options, tracer)
    secret_environment: tuple[str, ...] = ()


TRANSPORTS: dict[str, TransportEntry] = {
    "email": TransportEntry("mailbus.mail.transport:create_transport"),
    "postoffice": TransportEntry(
        "mailbus.postoffice.transport:create_transport",
        secret_environment=("MAILBUS_POSTOFFICE_PASSWORD",),
    ),
}

# An options table of this name puts the named wrapper around the transport built above.
WRAPPERS: dict[str, str] = {
    "outbox": "mailbus.outbox.sender:wrap_transport",
}


def secret_environment() -> frozenset[str]:
    """Every environment variable that some transport reads a secret from."""
    return frozenset(name for entry in TRANSPORTS.values() for name in entry.secret_environment)


def load(target: str, what: str) -> Callable[..., Any]:
    """The function `module:function` names, or ConfigError if its module is missing."""
    module_name, _, function = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError("transport", f"{what} is not available: {exc}") from None
    loaded: Callable[..., Any] = getattr(module, function)
    return loaded
