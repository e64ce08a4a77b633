"""What a broker module is, and how a gateway finds one by name.

A module is any object with `receive(message)` and `destroy()`; `start()` is optional
and runs once all links exist. The broker calls all three on the module's own worker
thread, one at a time, so a module never needs a lock for its own state. A module
publishes as itself: `broker.publish(self, message)`.

A factory makes a module: `factory(broker, args)` where `args` is the JSON value of the
gateway file (a class whose __init__ takes `(broker, args)` is a factory). Factories are
found by Python import path (`package.module:Name`) or by entry point name in the group
`mailbus.broker_modules`. A gateway file therefore chooses which code runs: treat it
like code, not like data from strangers.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mailbus.broker.errors import GatewayConfigError
from mailbus.broker.message import BrokerMessage

if TYPE_CHECKING:
    from mailbus.broker.broker import Broker

ENTRY_POINT_GROUP = "mailbus.broker_modules"

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_IMPORT_PATH = re.compile(rf"({_DOTTED}):({_DOTTED})")
_ENTRY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")


@runtime_checkable
class Module(Protocol):
    def receive(self, message: BrokerMessage) -> None: ...

    def destroy(self) -> None: ...


ModuleFactory = Callable[["Broker", Any], Any]


def load_import_path(path: str, where: str = "loader") -> ModuleFactory:
    """The factory at `package.module:Name` (the attribute may be dotted)."""
    match = _IMPORT_PATH.fullmatch(path)
    if match is None:
        raise GatewayConfigError(
            where, f"{path!r} is not an import path like 'package.module:Name'"
        )
    module_name, attribute = match.groups()
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise GatewayConfigError(where, f"cannot import {module_name!r}: {exc}") from exc
    except (Exception, SystemExit) as exc:  # its code raised (or exited) while importing
        raise GatewayConfigError(
            where, f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise GatewayConfigError(
                where, f"{module_name!r} has no attribute {attribute!r}"
            ) from None
        except Exception as exc:  # a module __getattr__ or a descriptor that raised
            raise GatewayConfigError(
                where, f"getting {attribute!r} of {module_name!r} failed: {exc!r}"
            ) from exc
    if not callable(target):
        raise GatewayConfigError(where, f"{path!r} is not callable")
    factory: ModuleFactory = target
    return factory


def load_entry_point(name: str, where: str = "loader") -> ModuleFactory:
    """The factory registered as entry point `name` in the `mailbus.broker_modules` group."""
    if not _ENTRY_NAME.fullmatch(name):
        raise GatewayConfigError(where, f"{name!r} is not a valid entry point name")
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name)
    points = list(found)
    if not points:
        raise GatewayConfigError(
            where,
            f"no entry point {name!r} in group {ENTRY_POINT_GROUP!r} (is its package installed?)",
        )
    if len(points) > 1:
        values = ", ".join(sorted(p.value for p in points))
        raise GatewayConfigError(where, f"entry point {name!r} is ambiguous: {values}")
    try:
        target = points[0].load()
    except (Exception, SystemExit) as exc:
        raise GatewayConfigError(where, f"entry point {name!r} failed to load: {exc!r}") from exc
    if not callable(target):
        raise GatewayConfigError(where, f"entry point {name!r} is not callable")
    factory: ModuleFactory = target
    return factory


def check_module(module: object, what: str) -> None:
    """A clear error now rather than an AttributeError on the worker thread later."""
    for method in ("receive", "destroy"):
        if not callable(getattr(module, method, None)):
            raise TypeError(f"{what}: {type(module).__name__} has no {method}() method")
    start = getattr(module, "start", None)
    if start is not None and not callable(start):
        raise TypeError(f"{what}: {type(module).__name__}.start is not callable")
