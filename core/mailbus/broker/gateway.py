"""Gateways: a broker, its modules and links, described by a JSON file.

    {"modules": [{"name": "ticker", "loader": "mailbus.broker.samples:Ticker",
                  "args": {"period_s": 1}}],
     "links": [{"source": "*", "sink": "printer"}]}

`loader` is an import path `package.module:Factory`, or an object
`{"name": "python", "entrypoint": "package.module:Factory"}` or
`{"name": "entry_point", "entrypoint": "NAME"}` (group `mailbus.broker_modules`).
A module may also set `capacity` and `backpressure` (`{"overflow": "block" |
"drop_newest" | "drop_oldest", "timeout": seconds or null}`); a link may set its own
`backpressure`. Parsing is pure and strict: unknown keys, duplicate keys or names, a
module named "*", a link to an unknown module or a duplicate link are errors that name
the place in the file (GatewayConfigError).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from mailbus.broker.broker import Broker
from mailbus.broker.errors import BrokerError, GatewayConfigError
from mailbus.broker.links import WILDCARD
from mailbus.broker.module import ModuleFactory, load_entry_point, load_import_path
from mailbus.broker.policy import DEFAULT_CAPACITY, Backpressure, Overflow
from mailbus.broker.snapshot import BrokerSnapshot, ModuleStats
from mailbus.errors import InvalidNameError
from mailbus.names import check_name
from mailbus.trace import Tracer

if TYPE_CHECKING:
    from mailbus.context import Context

log = logging.getLogger(__name__)

MAX_FILE_SIZE = 16 * 1024 * 1024
MAX_CAPACITY = 10_000_000
LOADERS = ("python", "entry_point")


@dataclass(frozen=True, slots=True)
class ModuleSpec:
    name: str
    loader: str  # "python" or "entry_point"
    entrypoint: str
    args: Any = None
    capacity: int = DEFAULT_CAPACITY
    backpressure: Backpressure = field(default_factory=Backpressure)


@dataclass(frozen=True, slots=True)
class LinkSpec:
    source: str
    sink: str
    backpressure: Backpressure | None = None


@dataclass(frozen=True, slots=True)
class GatewaySpec:
    modules: tuple[ModuleSpec, ...]
    links: tuple[LinkSpec, ...]


# -- parsing (pure) ---------------------------------------------------------------------
def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise GatewayConfigError("", f"key {key!r} appears twice in one object")
        result[key] = value
    return result


def _object(
    value: Any, where: str, allowed: Sequence[str], required: Sequence[str]
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise GatewayConfigError(where, f"expected an object, got {type(value).__name__}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise GatewayConfigError(
            where, f"unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})"
        )
    for key in required:
        if key not in value:
            raise GatewayConfigError(where, f"missing key {key!r}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise GatewayConfigError(where, f"expected a string, got {type(value).__name__}")
    return value


def _name(value: Any, where: str) -> str:
    text = _string(value, where)
    try:
        return check_name(text, "module")
    except InvalidNameError as exc:
        raise GatewayConfigError(where, str(exc)) from None


def parse_backpressure(value: Any, where: str) -> Backpressure:
    spec = _object(value, where, ("overflow", "timeout"), ())
    overflow = spec.get("overflow", "block")
    choices = [o.value for o in Overflow]
    if overflow not in choices:
        raise GatewayConfigError(
            f"{where}.overflow", f"{overflow!r} is not one of {', '.join(choices)}"
        )
    timeout = spec.get("timeout", Backpressure().timeout)
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise GatewayConfigError(f"{where}.timeout", "expected seconds (a number) or null")
        if not math.isfinite(timeout) or timeout < 0:
            raise GatewayConfigError(f"{where}.timeout", f"{timeout} is not a duration >= 0")
    return Backpressure(Overflow(overflow), None if timeout is None else float(timeout))


def _loader(value: Any, where: str) -> tuple[str, str]:
    if isinstance(value, str):
        return "python", value
    spec = _object(value, where, ("name", "entrypoint"), ("name", "entrypoint"))
    kind = _string(spec["name"], f"{where}.name")
    if kind not in LOADERS:
        raise GatewayConfigError(
            f"{where}.name", f"{kind!r} is not a loader ({', '.join(LOADERS)})"
        )
    return kind, _string(spec["entrypoint"], f"{where}.entrypoint")


def parse_module(value: Any, where: str) -> ModuleSpec:
    spec = _object(
        value, where, ("name", "loader", "args", "capacity", "backpressure"), ("name", "loader")
    )
    name = _name(spec["name"], f"{where}.name")
    if name == WILDCARD:
        raise GatewayConfigError(f"{where}.name", "'*' is reserved for wildcard links")
    kind, entrypoint = _loader(spec["loader"], f"{where}.loader")
    capacity = spec.get("capacity", DEFAULT_CAPACITY)
    if (
        isinstance(capacity, bool)
        or not isinstance(capacity, int)
        or not 1 <= capacity <= MAX_CAPACITY
    ):
        raise GatewayConfigError(f"{where}.capacity", f"expected an integer 1..{MAX_CAPACITY}")
    backpressure = (
        parse_backpressure(spec["backpressure"], f"{where}.backpressure")
        if "backpressure" in spec
        else Backpressure()
    )
    return ModuleSpec(name, kind, entrypoint, spec.get("args"), capacity, backpressure)


def parse_link(value: Any, where: str, names: set[str]) -> LinkSpec:
    spec = _object(value, where, ("source", "sink", "backpressure"), ("source", "sink"))
    source = _string(spec["source"], f"{where}.source")
    sink = _string(spec["sink"], f"{where}.sink")
    if source != WILDCARD and source not in names:
        raise GatewayConfigError(f"{where}.source", f"no module named {source!r}")
    if sink == WILDCARD:
        raise GatewayConfigError(f"{where}.sink", "'*' can only be a link's source")
    if sink not in names:
        raise GatewayConfigError(f"{where}.sink", f"no module named {sink!r}")
    if source == sink:
        raise GatewayConfigError(where, f"module {sink!r} cannot be linked to itself")
    backpressure = (
        parse_backpressure(spec["backpressure"], f"{where}.backpressure")
        if "backpressure" in spec
        else None
    )
    return LinkSpec(source, sink, backpressure)


def parse_gateway(data: Any) -> GatewaySpec:
    """Validate a decoded gateway description."""
    spec = _object(data, "", ("modules", "links"), ("modules",))
    raw_modules = spec["modules"]
    if not isinstance(raw_modules, list):
        raise GatewayConfigError("modules", "expected a list")
    modules: list[ModuleSpec] = []
    names: set[str] = set()
    for index, raw in enumerate(raw_modules):
        module = parse_module(raw, f"modules[{index}]")
        if module.name in names:
            raise GatewayConfigError(
                f"modules[{index}].name", f"duplicate module name {module.name!r}"
            )
        names.add(module.name)
        modules.append(module)
    raw_links = spec.get("links", [])
    if not isinstance(raw_links, list):
        raise GatewayConfigError("links", "expected a list")
    links: list[LinkSpec] = []
    seen: set[tuple[str, str]] = set()
    for index, raw in enumerate(raw_links):
        link = parse_link(raw, f"links[{index}]", names)
        where = f"links[{index}]"
        if (link.source, link.sink) in seen:
            raise GatewayConfigError(where, f"duplicate link {link.source!r} -> {link.sink!r}")
        if link.source != WILDCARD and (WILDCARD, link.sink) in seen:
            raise GatewayConfigError(
                where, f"duplicate link: {link.sink!r} already receives from every module via '*'"
            )
        if link.source == WILDCARD and any(sink == link.sink for _, sink in seen):
            raise GatewayConfigError(
                where, f"duplicate link: '*' -> {link.sink!r} overlaps an earlier link to it"
            )
        seen.add((link.source, link.sink))
        links.append(link)
    return GatewaySpec(tuple(modules), tuple(links))


def parse_gateway_json(text: str | bytes) -> GatewaySpec:
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise GatewayConfigError(
            "", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except UnicodeDecodeError as exc:
        raise GatewayConfigError("", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except RecursionError:  # "[[[[..." deeper than the parser's stack
        raise GatewayConfigError("", "not a gateway description: JSON nested too deeply") from None
    return parse_gateway(data)


def load_gateway_file(path: str | Path) -> GatewaySpec:
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_FILE_SIZE:
            raise GatewayConfigError(
                str(file), f"{size} bytes is over the {MAX_FILE_SIZE} byte limit"
            )
        data = file.read_bytes()
    except OSError as exc:
        raise GatewayConfigError(str(file), f"cannot read: {exc.strerror or exc}") from None
    try:
        return parse_gateway_json(data)
    except GatewayConfigError as exc:
        where = f"{file}: {exc.where}" if exc.where else str(file)
        raise GatewayConfigError(where, exc.problem) from None


def resolve_factory(spec: ModuleSpec, where: str) -> ModuleFactory:
    if spec.loader == "entry_point":
        return load_entry_point(spec.entrypoint, where)
    return load_import_path(spec.entrypoint, where)


# -- running ----------------------------------------------------------------------------
class Gateway:
    """Builds the broker, modules and links of a GatewaySpec; `start()` then `close()`
    (or use it as a context manager). Modules are started once all links exist."""

    def __init__(
        self,
        spec: GatewaySpec,
        *,
        tracer: Tracer | None = None,
        context: Context | None = None,
        trace_messages: bool = True,
    ) -> None:
        self.spec = spec
        self.broker = Broker.create(tracer=tracer, context=context, trace_messages=trace_messages)
        self._names: list[str] = []
        self._started = False

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> Gateway:
        return cls(load_gateway_file(path), **kwargs)

    @classmethod
    def from_json(cls, text: str | bytes, **kwargs: Any) -> Gateway:
        return cls(parse_gateway_json(text), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **kwargs: Any) -> Gateway:
        return cls(parse_gateway(dict(data)), **kwargs)

    def start(self) -> Self:
        """Create every module, add every link, then start the modules in file order.
        On any failure what was built is torn down and the error names the module."""
        if self._started:
            raise BrokerError("the gateway is already started")
        self._started = True
        try:
            for index, module in enumerate(self.spec.modules):
                self._create(module, f"modules[{index}]")
            for link in self.spec.links:
                self.broker.add_link(link.source, link.sink, backpressure=link.backpressure)
            for name in list(self._names):
                self.broker.start_module(name)
        except BaseException:
            self.close()
            raise
        return self

    def _create(self, spec: ModuleSpec, where: str) -> None:
        factory = resolve_factory(spec, f"{where}.loader")
        try:
            module = factory(self.broker, spec.args)
        except Exception as exc:
            raise BrokerError(f"module {spec.name!r}: creating it failed: {exc!r}") from exc
        try:
            self.broker.add_module(
                spec.name, module, capacity=spec.capacity, backpressure=spec.backpressure
            )
        except Exception:
            destroy = getattr(module, "destroy", None)
            if callable(destroy):
                destroy()
            raise
        self._names.append(spec.name)

    def add_module(self, spec: ModuleSpec, links: Sequence[LinkSpec] = ()) -> None:
        """Add a module to the running gateway, link it, then start it."""
        self._create(spec, spec.name)
        try:
            for link in links:
                self.broker.add_link(link.source, link.sink, backpressure=link.backpressure)
            self.broker.start_module(spec.name)
        except BaseException:
            self.remove_module(spec.name)
            raise

    def remove_module(self, name: str) -> None:
        self.broker.remove_module(name)
        self._names.remove(name)

    def snapshot(self) -> BrokerSnapshot:
        return self.broker.snapshot()

    def close(self) -> tuple[ModuleStats, ...]:
        """Remove the modules in file order, each after draining its queue, destroy the
        broker; return each module's final counters. File order means a producer listed
        before its consumers stops before they do, so they still get all it published."""
        if self.broker.destroyed:
            return ()
        names = list(self._names)
        for name in names:
            try:
                self.broker.remove_module(name)
            except BrokerError as exc:
                log.error("gateway close: %s", exc)
        self._names.clear()
        self.broker.dec_ref()
        final = (self.broker.final_stats(name) for name in names)
        return tuple(stats for stats in final if stats is not None)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
