"""Where the IMAP receiver is in the mailbox: a sans-IO cursor over UIDs.

The receiver tells the cursor what EXAMINE reported and which UIDs a FETCH returned;
the cursor says which range to fetch next and which UIDs are new. It never sees a
socket, so the rules are tested byte by byte and with hypothesis:

- It starts at UIDNEXT (only mail that arrives from now on) or at a given UID
  (catching up on what is already in the mailbox).
- `first:*` returns the highest message even when no UID is >= first (RFC 3501
  6.4.8), so returned UIDs below the cursor are dropped, never delivered twice. The
  receiver asks `first:*` only for UID and size; `new_uids` names the UIDs whose
  bodies are worth fetching (`uid_set` writes them as an IMAP sequence set), and
  `accept` moves the cursor once those bodies arrived.
- Below the UIDNEXT seen at EXAMINE, UIDs are final, so a backlog is read in bounded
  chunks `first:last`; past it, `first:*`.
- A UIDVALIDITY change means the mailbox was recreated and old UIDs mean nothing: the
  cursor restarts at UID 1 (nothing lost; the engine drops Message-IDs it has seen).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Started:
    uidvalidity: int
    first_uid: int


@dataclass(frozen=True, slots=True)
class Resumed:
    uidvalidity: int
    first_uid: int


@dataclass(frozen=True, slots=True)
class UidValidityChanged:
    old: int
    new: int
    first_uid: int


CursorEvent = Started | Resumed | UidValidityChanged


@dataclass(frozen=True, slots=True)
class UidRange:
    first: int
    last: int | None  # None: open-ended (`first:*`)

    def __str__(self) -> str:
        return f"{self.first}:{'*' if self.last is None else self.last}"


class UidCursor:
    def __init__(self, start_uid: int | None = None, batch: int = 500) -> None:
        if start_uid is not None and start_uid < 1:
            raise ValueError("start_uid must be >= 1")
        if batch < 1:
            raise ValueError("batch must be >= 1")
        self._start_uid = start_uid
        self.batch = batch
        self.uidvalidity: int | None = None
        self.next_uid: int | None = None  # first UID not delivered yet
        self.uidnext_at_select = 1

    def selected(self, uidvalidity: int, uidnext: int) -> CursorEvent:
        """The mailbox was examined (at start or after a reconnect)."""
        uidnext = max(uidnext, 1)
        self.uidnext_at_select = uidnext
        if self.uidvalidity is None or self.next_uid is None:
            self.uidvalidity = uidvalidity
            self.next_uid = self._start_uid if self._start_uid is not None else uidnext
            return Started(uidvalidity, self.next_uid)
        if uidvalidity != self.uidvalidity:
            old, self.uidvalidity, self.next_uid = self.uidvalidity, uidvalidity, 1
            return UidValidityChanged(old, uidvalidity, 1)
        return Resumed(uidvalidity, self.next_uid)

    def next_range(self) -> UidRange:
        if self.next_uid is None:
            raise RuntimeError("selected() must come first")
        first = self.next_uid
        if first + self.batch <= self.uidnext_at_select:
            return UidRange(first, first + self.batch - 1)
        return UidRange(first, None)

    def new_uids(self, uids: Iterable[int], fetched: UidRange) -> list[int]:
        """The new UIDs, in order, among those a FETCH of `fetched` returned; the
        cursor does not move (see `accept`)."""
        if self.next_uid is None:
            raise RuntimeError("selected() must come first")
        low = max(self.next_uid, fetched.first)
        high = fetched.last
        return sorted({u for u in uids if u >= low and (high is None or u <= high)})

    def accept(self, uids: Iterable[int], fetched: UidRange) -> list[int]:
        """The UIDs a FETCH of `fetched` returned; return the new ones in order and
        move past them."""
        new = self.new_uids(uids, fetched)
        if new:
            self.next_uid = new[-1] + 1
        if fetched.last is not None:
            # Every UID of a closed range below UIDNEXT is final: skip past gaps.
            self.next_uid = max(self.next_uid or 1, fetched.last + 1)
        return new


def uid_set(uids: Iterable[int]) -> str:
    """The UIDs as an IMAP sequence set with runs collapsed: [1, 2, 3, 7] -> "1:3,7"."""
    ordered = sorted(set(uids))
    if not ordered or ordered[0] < 1:
        raise ValueError("a UID set needs UIDs >= 1")
    runs: list[str] = []
    start = prev = ordered[0]
    for uid in [*ordered[1:], 0]:  # 0 ends the last run
        if uid != prev + 1:
            runs.append(str(start) if start == prev else f"{start}:{prev}")
            start = uid
        prev = uid
    return ",".join(runs)
