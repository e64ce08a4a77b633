"""The rules of a mailbox's life, as pure functions (no I/O, no clock of their own).

- **Idle expiry**: a box nobody has checked out for `expire_idle_s` is removed by the
  daemon, letters and all. A box is idle from when it was created, returned, or loaded
  at start-up, until it is checked out again; a box checked out (a reader waiting in
  GETMAIL included) is never idle.
- **Cap per box**: at `max_letters_per_box`, the daemon either drops the box's oldest
  letters to make room (`drop-oldest`, the default) or refuses the new letter (`refuse`,
  DELFAIL). Drop-oldest because the usual reason a box fills is a reader that is slow or
  gone: with refusal its publishers would fail (or block, retrying) for the sake of old
  letters nobody may ever read, whereas for monitoring the newest letters matter most.
  The letter a reader has in hand (sent, not yet acknowledged) is never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

WhenFull = Literal["drop-oldest", "refuse"]
WHEN_FULL: tuple[WhenFull, ...] = ("drop-oldest", "refuse")
DEFAULT_EXPIRE_IDLE_S = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Room:
    """What to do with a new letter for a box: accept it, after dropping `drop` of the
    box's oldest letters."""

    accept: bool
    drop: int = 0


def make_room(
    waiting: int, pending: int, cap: int, when_full: WhenFull, in_flight: bool = False
) -> Room:
    """Room for one more letter in a box holding `waiting` stored letters and `pending`
    accepted but not stored yet, capped at `cap`. Only stored letters can be dropped,
    and not the one in a reader's hands (`in_flight`); if that is not enough room, the
    letter is refused: the cap is never exceeded."""
    if cap < 1:
        raise ValueError("the cap must be at least 1")
    excess = waiting + pending + 1 - cap
    if excess <= 0:
        return Room(accept=True)
    if when_full == "refuse":
        return Room(accept=False)
    droppable = max(0, waiting - (1 if in_flight else 0))
    if excess > droppable:
        return Room(accept=False)
    return Room(accept=True, drop=excess)


def is_expired(idle_since: float | None, now: float, expire_idle_s: float) -> bool:
    """Whether a box idle since `idle_since` (None: checked out now) has expired at
    `now`. `expire_idle_s` <= 0 turns expiry off."""
    if idle_since is None or expire_idle_s <= 0:
        return False
    return now - idle_since >= expire_idle_s


def expired(
    boxes: Iterable[tuple[str, float | None]], now: float, expire_idle_s: float
) -> list[str]:
    """The names, among `(name, idle_since)` pairs, of the boxes expired at `now`."""
    return [name for name, since in boxes if is_expired(since, now, expire_idle_s)]


def sweep_interval(expire_idle_s: float) -> float:
    """How often the daemon looks for expired boxes: a tenth of the expiry time, between
    one second and a minute (a box outlives its expiry by at most that)."""
    return min(60.0, max(1.0, expire_idle_s / 10.0))


def idle_seconds(idle_since: float | None, now: float) -> float | None:
    """For listings: how long a box has been idle (None while checked out)."""
    return None if idle_since is None else max(0.0, now - idle_since)
