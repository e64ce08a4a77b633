"""What the office offers the collaborators it hands work to: each sees only the part
of `PostOffice` it needs, as a Protocol, never the office's fields (its boxes, store,
committer, cache, connection set). The office implements them all."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mailbus.postoffice.auth import Verdict
from mailbus.postoffice.config import ServerConfig
from mailbus.postoffice.protocol import Limits

if TYPE_CHECKING:
    import sqlite3

    from mailbus.postoffice.clerk import Clerk
    from mailbus.postoffice.mailbox import Box

# A store operation (see store.op_*) and the callback of a committed one.
Operation = Callable[["sqlite3.Connection"], Any]
Done = Callable[[Any, BaseException | None], None]


class Tracing(Protocol):
    @property
    def tracing(self) -> bool:
        """Whether anyone listens (skip building an event's fields otherwise)."""
        ...

    def trace(self, kind: str, **fields: Any) -> None: ...


class MailDesk(Tracing, Protocol):
    """A GETMAIL round's needs: the letters, and taking one out of the store."""

    def letter(self, letter_id: int) -> tuple[str, bytes] | None:
        """A stored letter's sender and bytes (None: emptied meanwhile)."""
        ...

    def take_letter(self, letter_id: int, done: Done | None) -> None:
        """Delete a delivered letter: with `done`, in the next commit, calling it once
        committed (and durable); without, whenever it is convenient."""
        ...

    def getmail_served(self) -> None: ...


class ClerkDesk(MailDesk, Protocol):
    """What a connection's clerk needs from the office."""

    @property
    def config(self) -> ServerConfig: ...

    @property
    def limits(self) -> Limits: ...

    def clock(self) -> float: ...

    def admit(self, clerk: Clerk) -> bool:
        """Count a new connection in; False (and counted as refused) when full."""
        ...

    def dismiss(self, clerk: Clerk) -> None: ...

    def box(self, name: str) -> Box | None:
        """The mailbox called `name` now, if any."""
        ...

    async def verify(
        self, box: Box, digest: bytes, host: str, peer: str, gone: Callable[[], bool]
    ) -> Verdict: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> object: ...

    async def create_box(self, name: str, digest: bytes, peer: str, allowed: bool) -> bool: ...

    def refuse_box(self, name: str, reason: str, peer: str) -> None: ...

    async def remove_box(self, box: Box, reason: str) -> bool: ...

    async def empty_box(self, box: Box) -> int: ...

    def route_letter(self, name: str, sender: str) -> tuple[list[Box], str]: ...

    def store_letter(self, targets: list[Box], sender: str, data: bytes, done: Done) -> None:
        """Commit one letter to each of `targets`; `done(letter ids, error)` once it is
        committed (and, with `--sync full`, fsynced)."""
        ...

    def letter_stored(
        self, box: Box, letter_id: int, sender: str, data: bytes, to: str | None
    ) -> None: ...


class HousekeepingDesk(Tracing, Protocol):
    """What the housekeeper needs: the boxes to sweep, and the store's writes."""

    @property
    def config(self) -> ServerConfig: ...

    @property
    def boxes(self) -> Mapping[str, Box]: ...

    def clock(self) -> float: ...

    def submit(self, operation: Operation) -> None:
        """Write in the next commit; nobody waits for it."""
        ...

    async def write(self, operation: Operation) -> Any:
        """Write in the next commit; return its result once durable."""
        ...

    def uncache(self, letter_id: int) -> None: ...

    def drop_box(self, box: Box) -> None: ...
