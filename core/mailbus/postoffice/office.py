"""The daemon's state: its mailboxes and groups, the store, the listening socket."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from mailbus.postoffice import lifecycle, routing
from mailbus.postoffice import store as st
from mailbus.postoffice.admin import AdminServer
from mailbus.postoffice.auth import Gatekeeper, HashPoolFull, Verdict
from mailbus.postoffice.clerk import Clerk
from mailbus.postoffice.committer import Committer
from mailbus.postoffice.config import BoxStatus, ServerConfig
from mailbus.postoffice.desk import Done, Operation
from mailbus.postoffice.housekeeping import Housekeeper
from mailbus.postoffice.kinds import PostOfficeKind
from mailbus.postoffice.mailbox import Box
from mailbus.postoffice.protocol import (
    Limits,
)
from mailbus.tls import server_context
from mailbus.trace import Tracer

log = logging.getLogger(__name__)
T = TypeVar("T")


class PostOffice:
    """The daemon: mailboxes, the store and the listening socket. Its collaborators see
    it through the narrow Protocols of `desk` (ClerkDesk, HousekeepingDesk), never
    its fields."""

    def __init__(
        self,
        config: ServerConfig,
        tracer: Tracer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.tracer = tracer or Tracer()
        self.clock = clock  # for idle expiry (injectable: tests drive it)
        self.limits = Limits(
            max_name_bytes=config.max_name_bytes,
            max_payload_bytes=config.max_letter_bytes,
            max_buffer_bytes=config.max_buffer_bytes,
        )
        self.boxes: dict[str, Box] = {}
        self.groups: dict[str, dict[str, Box]] = {}  # group name -> its member boxes
        self.reserved: set[str] = set()  # names of boxes being created (hash, commit)
        self.gate = Gatekeeper(config, self.trace)  # password checks
        self.clerks: set[Clerk] = set()
        self.store: st.Store | None = None
        self.committer: Committer | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.refused_connections = 0
        self.getmail_requests = 0  # GETMAIL round trips served (an idle client's cost)
        # Letters stored since start, by id, so that delivery needs no SELECT; bounded,
        # the store has them all anyway.
        self.cache: dict[int, tuple[str, bytes]] = {}
        self.cache_bytes = 0
        self.cache_limit = 32 * 1024 * 1024
        self.store_full = False  # refusing letters: the store's disk is at its reserve
        self.housekeeper = Housekeeper(self)
        self.admin = AdminServer(self)

    # -- life cycle -------------------------------------------------------------------
    async def start(self) -> int:
        """Open the store, load the boxes and listen; return the bound port."""
        config = self.config
        store = await asyncio.to_thread(
            st.Store, config.store_path, config.sync, config.store_reserve_bytes
        )
        self.store = store
        self.committer = Committer(store, asyncio.get_running_loop())
        records, letters = store.load()
        now = self.clock()  # a box's idle time is not stored: it counts from here
        for record in records:
            letter_ids = letters.get(record.box_id, [])
            self.add_box(Box(record.box_id, record.name, record.secret, letter_ids, now))
        loop = asyncio.get_running_loop()
        tls = None
        if config.tls_cert is not None:
            tls = server_context(config.tls_cert, config.tls_key or "", config.tls_client_ca or "")
        self._server = await loop.create_server(
            lambda: Clerk(self), config.host, config.port, reuse_address=True, ssl=tls
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info(
            "PostOffice on %s:%d (%s), %d mailboxes",
            config.host,
            self.port,
            "TLS" if tls else "plain: other hosts refused unless --allow-plain-remote",
            len(self.boxes),
        )
        await self.housekeeper.start()
        await self.admin.start()
        return self.port

    async def stop(self) -> None:
        """Tell every client SHUTDOWN, close, and close the store (pending writes land)."""
        await self.housekeeper.stop()
        await self.admin.stop()
        if self._server is not None:
            self._server.close()
        for clerk in list(self.clerks):
            clerk.shutdown()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self.committer is not None:
            await self.committer.close()
        if self.store is not None:
            self.store.close()
            self.store = None
        self.gate.hasher.close()

    def spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def write(self, operation: Callable[[Any], T]) -> T:
        """Run a store operation in the next group commit; return once it is durable."""
        assert self.committer is not None
        result: T = await self.committer.wait(operation)
        return result

    def submit(self, operation: Operation) -> None:
        """Run a store operation in the next group commit; nobody waits for it."""
        assert self.committer is not None
        self.committer.submit(operation)

    # -- what a clerk asks of the office (desk.ClerkDesk) ----------------------------------
    def admit(self, clerk: Clerk) -> bool:
        if len(self.clerks) >= self.config.max_connections:
            self.refused_connections += 1
            return False
        self.clerks.add(clerk)
        return True

    def dismiss(self, clerk: Clerk) -> None:
        self.clerks.discard(clerk)

    def box(self, name: str) -> Box | None:
        return self.boxes.get(name)

    async def verify(
        self, box: Box, digest: bytes, host: str, peer: str, gone: Callable[[], bool]
    ) -> Verdict:
        return await self.gate.verify(box, digest, host, peer, gone)

    async def remove_box(self, box: Box, reason: str) -> bool:
        return await self.housekeeper.remove(box, reason)

    async def empty_box(self, box: Box) -> int:
        return await self.housekeeper.empty(box)

    def store_letter(self, targets: list[Box], sender: str, data: bytes, done: Done) -> None:
        assert self.committer is not None
        if not self.has_room(len(data) * len(targets)):
            for box in targets:
                self.trace(
                    PostOfficeKind.LETTER_REFUSED,
                    name=box.name,
                    detail="store full",
                    extra={"sender": sender},
                )
            done(None, st.StoreFullError(f"{self.config.store_path}: disk at its reserve"))
            return
        self.committer.submit(st.op_add_letter([b.box_id for b in targets], sender, data), done)

    def has_room(self, size: int) -> bool:
        """Whether the store may grow by `size` bytes (see Committer.room_for); says
        once in the log when it starts refusing, and once when it takes again."""
        assert self.committer is not None
        room = self.committer.room_for(size)
        if room == self.store_full:
            self.store_full = not room
            if room:
                log.warning("store %s has room again: letters are taken", self.config.store_path)
            else:
                log.warning(
                    "store %s: its disk is down to the reserve (%d MB): letters and new "
                    "boxes are refused (DELFAIL, BOXEXISTS) until letters are taken or "
                    "space is freed",
                    self.config.store_path,
                    self.config.store_reserve_bytes // (1024 * 1024),
                )
        return room

    def take_letter(self, letter_id: int, done: Done | None) -> None:
        assert self.committer is not None
        self.uncache(letter_id)
        if done is None:
            self.committer.forget(letter_id)
        else:
            self.committer.submit(st.op_delete_letters([letter_id]), done)

    def getmail_served(self) -> None:
        self.getmail_requests += 1

    def add_box(self, box: Box) -> None:
        self.boxes[box.name] = box
        group = routing.group_of(box.name)
        if group:
            self.groups.setdefault(group, {})[box.name] = box

    def drop_box(self, box: Box) -> None:
        box.removed = True
        if self.boxes.get(box.name) is box:
            del self.boxes[box.name]
        group = routing.group_of(box.name)
        members = self.groups.get(group)
        if members is not None and members.get(box.name) is box:
            del members[box.name]
            if not members:
                del self.groups[group]

    def resolve(self, name: str) -> list[Box]:
        """The mailboxes a letter to `name` goes to (see `routing.resolve`)."""
        return routing.resolve(name, self.boxes, self.groups)

    def name_conflict(self, name: str) -> str:
        """Why a new mailbox may not be called `name` (see `routing.name_conflict`)."""
        return routing.name_conflict(name, self.boxes, self.groups, self.reserved)

    async def create_box(self, name: str, digest: bytes, peer: str, allowed: bool) -> bool:
        """Create the mailbox `name` with the password `digest` for the client at
        `peer` (`allowed`: that connection may create one more); False if refused."""
        config = self.config
        conflict = self.name_conflict(name)
        if conflict:
            self.refuse_box(name, conflict, peer)
            return False
        if not allowed or len(self.boxes) >= config.max_boxes:
            self.refuse_box(name, "mailbox limit reached", peer)
            return False
        if not self.has_room(0):
            self.refuse_box(name, "the store's disk is full", peer)
            return False
        self.reserved.add(name)
        try:
            secret = await self.gate.hasher.run(st.hash_digest, digest, config.hash_params)
            box_id = await self.write(st.op_create_box(name, secret))
        except HashPoolFull:
            self.refuse_box(name, "password hashing busy", peer)
            return False
        except st.StoreError as exc:  # the write failed (logged by the committer)
            self.refuse_box(name, f"the store cannot take it: {exc}", peer)
            return False
        finally:
            self.reserved.discard(name)
        if box_id is None or name in self.boxes:
            return False
        box = Box(box_id, name, secret, [], self.clock())
        box.known = self.gate.memo(box, digest)
        self.add_box(box)
        self.trace(PostOfficeKind.BOX_CREATED, name=name, extra={"peer": peer})
        return True

    def refuse_box(self, name: str, reason: str, peer: str) -> None:
        log.info("%s: CREATEBOX %s refused: %s", peer, name, reason)
        self.trace(PostOfficeKind.BOX_REFUSED, name=name, detail=reason, extra={"peer": peer})

    def route_letter(self, name: str, sender: str) -> tuple[list[Box], str]:
        """The mailboxes a letter to `name` goes to now, room made in those at their cap
        (see lifecycle); and why none, when none."""
        targets = self.resolve(name)
        if not targets:
            return [], f"no mailbox or group {name!r}"
        full = [b for b in targets if not self.housekeeper.make_room(b)]
        if not full:
            return targets, ""
        for box in full:
            self.trace(
                PostOfficeKind.LETTER_REFUSED,
                name=box.name,
                detail="mailbox full",
                extra={"sender": sender},
            )
        targets = [b for b in targets if b not in full]
        return targets, "" if targets else f"mailbox {name!r} is full"

    def letter_stored(
        self, box: Box, letter_id: int, sender: str, data: bytes, to: str | None
    ) -> None:
        """A letter to `box` (addressed `to`) is committed: keep it for delivery and
        hand it to the box's holder if it waits for mail."""
        if self.cache_bytes + len(data) <= self.cache_limit:
            self.cache[letter_id] = (sender, data)
            self.cache_bytes += len(data)
        box.letters.append(letter_id)
        box.mail_arrived()
        if self.tracer.active:
            self.trace(
                PostOfficeKind.LETTER_IN,
                name=box.name,
                size=len(data),
                extra={"sender": sender, "letter_id": letter_id, "to": to},
            )

    def letter(self, letter_id: int) -> tuple[str, bytes] | None:
        """A stored letter's sender and bytes (None: emptied meanwhile)."""
        assert self.store is not None
        return self.cache.get(letter_id) or self.store.fetch(letter_id)

    def uncache(self, letter_id: int) -> None:
        letter = self.cache.pop(letter_id, None)
        if letter is not None:
            self.cache_bytes -= len(letter[1])

    @property
    def tracing(self) -> bool:
        return self.tracer.active

    def trace(self, kind: str, **fields: Any) -> None:
        if self.tracer.active:
            self.tracer.event(kind, **fields)

    def status(self) -> list[BoxStatus]:
        """Every mailbox with its letter count and whether it is checked out, from the
        daemon's memory (call on its loop, e.g. `ServerThread.call(office.status)`).
        `store.list_mailboxes(path)` gives the same counts from the file, from any
        process."""
        now = self.clock()
        return [
            BoxStatus(
                name,
                len(box.letters),
                box.holder is not None,
                box.holder.peer if box.holder else "",
                box.dropped,
                lifecycle.idle_seconds(box.idle_since, now),
            )
            for name, box in sorted(self.boxes.items())
        ]
