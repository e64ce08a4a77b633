"""Participant announcements: what a context says about itself on the reserved topic
`_mailbus/participants` (its name, host, pid, transport, entities, wait sets, broker
modules and outbox depth), so that a viewer can list every participant of a system.

Sans-IO: this module only turns an `Announcement` into a JSON body and back. The body is
plain JSON (never anything that can run code) with a `format` field, so that a viewer
tells a foreign or malformed body from one it can read, and says why in a
`PresenceError`. The periodic sending lives in `mailbus.announcer`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, TypeVar

from mailbus.errors import InvalidNameError, MailbusError
from mailbus.names import check_name

TOPIC = check_name("_mailbus/participants")
FORMAT = "mailbus.participant/1"
# The workbench keeps 64 KiB of a body: an announcement stays below that, whole.
MAX_BODY = 60_000
# Items of each list an announcement carries at most (the rest is counted as omitted).
MAX_ITEMS = 256
MAX_TEXT = 255  # characters of any name or label

T = TypeVar("T")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class PresenceError(MailbusError, ValueError):
    """A body on the participants topic that is not a readable announcement."""


class PresenceState(StrEnum):
    """`alive` at each period; `goodbye` once, when the context shuts down."""

    ALIVE = "alive"
    GOODBYE = "goodbye"


@dataclass(frozen=True, slots=True)
class EntityInfo:
    """A publisher, subscription, server or client; `queued` counts what waits in a
    subscription's or server's queue."""

    kind: str
    name: str
    queued: int = 0


@dataclass(frozen=True, slots=True)
class WaitEntityInfo:
    kind: str
    name: str
    ready: bool


@dataclass(frozen=True, slots=True)
class WaitSetInfo:
    name: str
    waiting: bool = False
    timeout_s: float | None = None  # of the current wait; None: none, or for ever
    waits: int = 0
    timeouts: int = 0
    last_ready: tuple[str, ...] = ()
    entities: tuple[WaitEntityInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class ModuleInfo:
    name: str
    kind: str
    state: str
    queue_depth: int
    capacity: int


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    name: str
    modules: tuple[ModuleInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class Announcement:
    gid: str  # the context's participant GID: a viewer's key
    name: str
    host: str
    pid: int
    transport: str
    period_s: float  # the next one is due after this long (a viewer's clock for expiry)
    state: PresenceState = PresenceState.ALIVE
    sequence: int = 0
    address: str = ""
    entities: tuple[EntityInfo, ...] = ()
    wait_sets: tuple[WaitSetInfo, ...] = ()
    brokers: tuple[BrokerInfo, ...] = ()
    outbox_depth: int | None = None  # None: no outbox
    omitted: int = 0  # list items left out to stay within MAX_ITEMS / MAX_BODY


# -- encoding -----------------------------------------------------------------------------
def safe_label(text: str, fallback: str = "?") -> str:
    """`text` as a name a viewer accepts: control characters become `?`, outer white
    space goes, at most MAX_TEXT characters; `fallback` when nothing is left."""
    cleaned = _CONTROL.sub("?", text).strip()[:MAX_TEXT].strip()
    return cleaned or fallback


def _to_json(announcement: Announcement) -> dict[str, Any]:
    a = announcement
    return {
        "format": FORMAT,
        "gid": a.gid,
        "name": a.name,
        "host": a.host,
        "pid": a.pid,
        "transport": a.transport,
        "period_s": a.period_s,
        "state": a.state.value,
        "sequence": a.sequence,
        "address": a.address,
        "entities": [[e.kind, e.name, e.queued] for e in a.entities],
        "wait_sets": [
            {
                "name": w.name,
                "waiting": w.waiting,
                "timeout_s": w.timeout_s,
                "waits": w.waits,
                "timeouts": w.timeouts,
                "last_ready": list(w.last_ready),
                "entities": [[e.kind, e.name, e.ready] for e in w.entities],
            }
            for w in a.wait_sets
        ],
        "brokers": [
            {
                "name": b.name,
                "modules": [
                    [m.name, m.kind, m.state, m.queue_depth, m.capacity] for m in b.modules
                ],
            }
            for b in a.brokers
        ],
        "outbox_depth": a.outbox_depth,
        "omitted": a.omitted,
    }


def _capped(items: tuple[T, ...], limit: int) -> tuple[tuple[T, ...], int]:
    return items[:limit], max(0, len(items) - limit)


def fit(announcement: Announcement) -> Announcement:
    """`announcement` within MAX_ITEMS per list and MAX_BODY characters once encoded:
    lists are cut (largest first) and what was left out is counted in `omitted`."""
    a = announcement
    entities, cut_e = _capped(a.entities, MAX_ITEMS)
    wait_sets, cut_w = _capped(a.wait_sets, MAX_ITEMS)
    brokers, cut_b = _capped(a.brokers, MAX_ITEMS)
    a = replace(
        a,
        entities=entities,
        wait_sets=wait_sets,
        brokers=brokers,
        omitted=a.omitted + cut_e + cut_w + cut_b,
    )
    while len(encode_unchecked(a)) > MAX_BODY:
        sizes = {"entities": len(a.entities), "wait_sets": len(a.wait_sets)}
        sizes["brokers"] = len(a.brokers)
        largest = max(sizes, key=lambda k: sizes[k])
        count = sizes[largest]
        if count == 0:  # only possible with absurdly long scalar fields
            raise PresenceError("announcement does not fit in a body even without its lists")
        kept = count // 2
        a = replace(
            a,
            **{largest: getattr(a, largest)[:kept]},
            omitted=a.omitted + count - kept,
        )
    return a


def encode_unchecked(announcement: Announcement) -> str:
    return json.dumps(_to_json(announcement), separators=(",", ":"), ensure_ascii=False)


def encode(announcement: Announcement) -> str:
    """The JSON body of `announcement`, cut to fit (see `fit`)."""
    return encode_unchecked(fit(announcement))


# -- decoding -----------------------------------------------------------------------------
def _field(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise PresenceError(f"{where}: field {key!r} is missing")
    return obj[key]


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise PresenceError(f"{what} must be a string, not {type(value).__name__}")
    if len(value) > MAX_TEXT:
        raise PresenceError(f"{what} is longer than {MAX_TEXT} characters")
    return value


def _name(value: Any, what: str) -> str:
    """A name that the viewer shows: the same rule as topic names (no control
    characters, so that a label cannot forge lines on screen)."""
    text = _text(value, what)
    try:
        return check_name(text, what)
    except InvalidNameError as exc:
        raise PresenceError(str(exc)) from None


def _label(value: Any, what: str) -> str:
    """Like `_name`, but may be empty (an unnamed wait set, no address)."""
    text = _text(value, what)
    return _name(text, what) if text else text


def _count(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise PresenceError(f"{what} must be a non-negative integer, got {value!r:.40}")
    return value


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise PresenceError(f"{what} must be true or false, got {value!r:.40}")
    return value


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PresenceError(f"{what} must be a number, got {value!r:.40}")
    seconds = float(value)
    if not 0 <= seconds <= 86_400:  # NaN fails this too
        raise PresenceError(f"{what} must be between 0 and 86400 seconds, got {value!r:.40}")
    return seconds


def _list(value: Any, what: str, item: Callable[[Any, str], T]) -> tuple[T, ...]:
    if not isinstance(value, list):
        raise PresenceError(f"{what} must be a list, not {type(value).__name__}")
    if len(value) > MAX_ITEMS:
        raise PresenceError(f"{what} has {len(value)} items, more than {MAX_ITEMS}")
    return tuple(item(v, f"{what}[{i}]") for i, v in enumerate(value))


def _row(value: Any, what: str, length: int) -> Sequence[Any]:
    if not isinstance(value, list) or len(value) != length:
        raise PresenceError(f"{what} must be a list of {length} values")
    return value


def _entity(value: Any, what: str) -> EntityInfo:
    kind, name, queued = _row(value, what, 3)
    return EntityInfo(
        _name(kind, f"{what} kind"), _name(name, f"{what} name"), _count(queued, f"{what} queued")
    )


def _wait_entity(value: Any, what: str) -> WaitEntityInfo:
    kind, name, ready = _row(value, what, 3)
    return WaitEntityInfo(
        _name(kind, f"{what} kind"), _label(name, f"{what} name"), _flag(ready, f"{what} ready")
    )


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise PresenceError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _wait_set(value: Any, what: str) -> WaitSetInfo:
    obj = _object(value, what)
    timeout = _field(obj, "timeout_s", what)
    return WaitSetInfo(
        name=_label(_field(obj, "name", what), f"{what} name"),
        waiting=_flag(_field(obj, "waiting", what), f"{what} waiting"),
        timeout_s=None if timeout is None else _seconds(timeout, f"{what} timeout_s"),
        waits=_count(_field(obj, "waits", what), f"{what} waits"),
        timeouts=_count(_field(obj, "timeouts", what), f"{what} timeouts"),
        last_ready=_list(_field(obj, "last_ready", what), f"{what} last_ready", _label),
        entities=_list(_field(obj, "entities", what), f"{what} entities", _wait_entity),
    )


def _module(value: Any, what: str) -> ModuleInfo:
    name, kind, state, depth, capacity = _row(value, what, 5)
    return ModuleInfo(
        _name(name, f"{what} name"),
        _name(kind, f"{what} kind"),
        _name(state, f"{what} state"),
        _count(depth, f"{what} queue depth"),
        _count(capacity, f"{what} capacity"),
    )


def _broker(value: Any, what: str) -> BrokerInfo:
    obj = _object(value, what)
    return BrokerInfo(
        _name(_field(obj, "name", what), f"{what} name"),
        _list(_field(obj, "modules", what), f"{what} modules", _module),
    )


def decode(body: str) -> Announcement:
    """The announcement in `body`; PresenceError saying what is wrong otherwise (a body
    that is not JSON, of another format, or with a field missing or of the wrong kind)."""
    if len(body) > MAX_BODY:
        raise PresenceError(f"announcement of {len(body)} characters, more than {MAX_BODY}")
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise PresenceError(f"announcement is not JSON: {exc}") from None
    obj = _object(raw, "announcement")
    fmt = obj.get("format")
    if fmt != FORMAT:
        raise PresenceError(f"not a participant announcement: format {fmt!r:.60}, not {FORMAT!r}")
    where = "announcement"
    state = _field(obj, "state", where)
    if state not in tuple(PresenceState):
        raise PresenceError(f"state must be alive or goodbye, got {state!r:.40}")
    outbox = _field(obj, "outbox_depth", where)
    gid = _text(_field(obj, "gid", where), "gid")
    if not (len(gid) == 32 and all(c in "0123456789abcdef" for c in gid)):
        raise PresenceError(f"gid must be 32 lower-case hex digits, got {gid!r:.40}")
    period = _seconds(_field(obj, "period_s", where), "period_s")
    if period <= 0:
        raise PresenceError("period_s must be above 0")
    return Announcement(
        gid=gid,
        name=_name(_field(obj, "name", where), "participant name"),
        host=_name(_field(obj, "host", where), "host"),
        pid=_count(_field(obj, "pid", where), "pid"),
        transport=_name(_field(obj, "transport", where), "transport"),
        period_s=period,
        state=PresenceState(state),
        sequence=_count(_field(obj, "sequence", where), "sequence"),
        address=_label(_field(obj, "address", where), "address"),
        entities=_list(_field(obj, "entities", where), "entities", _entity),
        wait_sets=_list(_field(obj, "wait_sets", where), "wait_sets", _wait_set),
        brokers=_list(_field(obj, "brokers", where), "brokers", _broker),
        outbox_depth=None if outbox is None else _count(outbox, "outbox_depth"),
        omitted=_count(_field(obj, "omitted", where), "omitted"),
    )
