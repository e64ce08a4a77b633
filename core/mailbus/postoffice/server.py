"""The PostOffice daemon: a clerk per connection, on one asyncio event loop.

Why asyncio rather than a thread per clerk: most clerks spend their life waiting (for
the client's next byte, for mail during GETMAIL, for a password back-off), and timers
for COMMTIMEOUT and GETMAIL deadlines are free on an event loop, where a thread per
connection would cost a stack each and a lock around every mailbox. The two things that
block run elsewhere, each on threads of its own: scrypt on `HashPool` (few threads, a
bounded queue), fsync and checkpoints of the store's WAL on the committer's executor
(see `Committer`). So the loop keeps serving while commits are made durable, and a flood
of password checks can neither stall the fsync that acknowledged letters wait for nor
queue without limit. SQLite's own work (an INSERT, a COMMIT without fsync) takes
microseconds and runs on the loop, which keeps it single-threaded and free of locks.

A clerk is an asyncio.Protocol: it feeds the bytes it receives to
`protocol.ServerProtocol` and answers the events it hands out at once, in the callback;
the protocol module checks that every answer is allowed where it is sent. Only rare,
slow steps (creating a box, checking a password) run as tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from mailbus.postoffice import lifecycle
from mailbus.postoffice import store as st
from mailbus.postoffice.admin import AdminServer
from mailbus.postoffice.housekeeping import Housekeeper
from mailbus.postoffice.protocol import (
    DEFAULT_PORT,
    NEED_DATA,
    PAUSED,
    Command,
    Digest,
    EndOfStream,
    InvalidName,
    LimitError,
    Limits,
    Mail,
    Name,
    OversizedPayload,
    Payload,
    Phase,
    ProtocolError,
    Reply,
    Request,
    Response,
    ServerProtocol,
    Timeout,
    UnknownCommand,
)
from mailbus.trace import Tracer

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Everything the daemon can be told. Limits are refused with a code (see docs)."""

    store_path: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    sync: st.SyncMode = "full"
    max_letter_bytes: int = 16 * 1024 * 1024
    max_name_bytes: int = 255
    max_connections: int = 256
    max_boxes_per_connection: int = 64  # boxes one connection may create
    max_boxes: int = 100_000
    max_letters_per_box: int = 100_000
    when_full: lifecycle.WhenFull = "drop-oldest"  # at max_letters_per_box; see lifecycle
    expire_idle_s: float = lifecycle.DEFAULT_EXPIRE_IDLE_S  # 0: boxes never expire
    comm_timeout_s: float = 10.0  # silence allowed inside a command
    auth_delay_s: float = 0.2  # first back-off after a wrong password, doubling
    auth_delay_max_s: float = 5.0
    auth_max_waiting: int = 8  # connections of one peer host in back-off at once
    auth_forget_s: float = 60.0  # a peer's failures are forgotten after this quiet
    hash_params: st.HashParams = field(default_factory=st.HashParams)
    hash_workers: int = 2  # threads running scrypt
    # scrypt jobs waiting beyond those; more are refused at once. None: max_connections
    # (a connection has at most one job in hand, so legitimate bursts such as every
    # participant reconnecting after a restart are never refused); lower it to refuse
    # instead of queueing.
    hash_queue: int | None = None
    max_buffer_bytes: int = 1024 * 1024  # input a client may send ahead of the replies


@dataclass(frozen=True, slots=True)
class BoxStatus:
    name: str
    letters: int
    checked_out: bool
    holder: str = ""  # the peer address of the connection holding it
    dropped: int = 0  # oldest letters dropped at the cap since the daemon started
    idle_s: float | None = None  # how long nobody has held it (None: held now)


Done = Callable[[Any, BaseException | None], None]
CHECKPOINT_BATCHES = 500
FORGET_DELAY_S = 0.05


class Committer:
    """Group commit on the event loop. Writes submitted while the loop handles one round
    of events share a transaction, run by a callback scheduled for the end of that
    round. In "full" mode their callbacks run only after an fsync of the WAL that
    started after their commit; the fsync runs in the executor, and every batch that
    commits meanwhile waits for the next one, so one fsync covers many batches. In
    "normal" mode they run at commit and the WAL is fsynced within a second."""

    def __init__(self, store: st.Store, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.loop = loop
        # Its own threads: at most one fsync and one checkpoint run at a time, and
        # nothing else (scrypt, to_thread users) can sit in front of them.
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="postoffice-store")
        self.full = store.sync == "full"
        self._pending: list[tuple[Callable[[Any], Any], Done | None]] = []
        self._deletes: list[int] = []
        self._forget_timer: asyncio.TimerHandle | None = None
        self._scheduled = False
        self._unsynced: list[tuple[Done, Any]] = []
        self._syncing: asyncio.Future[None] | None = None
        self._dirty_timer: asyncio.TimerHandle | None = None
        self._maintaining = False
        self._maintenance: asyncio.Future[None] | None = None
        self._batches_at_checkpoint = 0

    def submit(self, operation: Callable[[Any], Any], done: Done | None = None) -> None:
        """Queue `operation`; `done(result, error)` runs once it is committed (and, in
        "full" mode, fsynced)."""
        self._pending.append((operation, done))
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._commit)

    def forget(self, letter_id: int) -> None:
        """Delete a delivered letter; nobody waits for it. The deletes ride along with
        the next batch (one statement for all of them), or go on their own within
        FORGET_DELAY_S when nothing else commits: a crash before that means those
        letters are delivered again (the receivers drop duplicates by Message-ID), never
        that one is lost, and under load it halves the commits per letter."""
        self._deletes.append(letter_id)
        if self._forget_timer is None:
            # Not cancelled when a batch takes the deletes first: one timer per interval
            # rather than a timer armed and cancelled per letter.
            self._forget_timer = self.loop.call_later(FORGET_DELAY_S, self._flush_deletes)

    def _flush_deletes(self) -> None:
        self._forget_timer = None
        if self._deletes and not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._commit)

    def wait(self, operation: Callable[[Any], T]) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self.loop.create_future()

        def done(result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        self.submit(operation, done)
        return future

    def _commit(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        if self._deletes:
            batch.insert(0, (st.op_delete_letters(self._deletes), None))
            self._deletes = []
        if not batch:
            return
        try:
            results = self.store.run_batch([operation for operation, _ in batch])
        except st.StoreError as exc:
            log.error("%s", exc)
            for _, done in batch:
                if done is not None:
                    done(None, exc)
            return
        pairs = [(done, r) for (_, done), r in zip(batch, results, strict=True) if done]
        if self._dirty_timer is None:
            self._dirty_timer = self.loop.call_later(1.0, self._periodic_sync)
        if self.store.batches - self._batches_at_checkpoint >= CHECKPOINT_BATCHES:
            self._maintain()  # keep the WAL short under load too
        if self.full:
            self._unsynced.extend(pairs)
            self._start_sync()
            return
        for done, result in pairs:
            done(result, None)

    def _start_sync(self) -> None:
        if self._syncing is not None or not self._unsynced:
            return
        waiting, self._unsynced = self._unsynced, []
        syncing = self.loop.run_in_executor(self.executor, self.store.sync_wal)
        self._syncing = syncing

        def synced(_: object) -> None:
            self._syncing = None
            error = syncing.exception()
            if error is not None:
                log.error("%s", error)
            for done, result in waiting:
                done(result, error)
            self._start_sync()

        syncing.add_done_callback(synced)

    def _periodic_sync(self) -> None:
        """Within a second of a commit: fsync the WAL ("normal" mode's promise) and
        checkpoint it, in the executor."""
        self._dirty_timer = None
        if self._maintaining:  # the last one is still running: try again shortly
            self._dirty_timer = self.loop.call_later(0.1, self._periodic_sync)
            return
        self._maintain()

    def _maintain(self) -> None:
        if self._maintaining:
            return
        self._maintaining = True
        self._batches_at_checkpoint = self.store.batches

        def run() -> None:
            self.store.sync_wal()
            self.store.checkpoint()

        future = self.loop.run_in_executor(self.executor, run)
        self._maintenance = future

        def finished(_: object) -> None:
            self._maintaining = False
            _log_failure(future)

        future.add_done_callback(finished)

    async def close(self) -> None:
        """Commit what is pending and wait until it is durable."""
        if self._forget_timer is not None:
            self._forget_timer.cancel()
            self._forget_timer = None
        self._commit()
        while self._syncing is not None:
            await asyncio.shield(self._syncing)
        if self._maintenance is not None:  # the store closes next: let it finish
            await asyncio.gather(self._maintenance, return_exceptions=True)
        if self._dirty_timer is not None:
            self._dirty_timer.cancel()
            self._dirty_timer = None
        self.executor.shutdown(wait=False)  # idle by now


class Box:
    """A mailbox in memory: its id, password hash, the ids of its letters, its holder."""

    def __init__(
        self, box_id: int, name: str, secret: str, letters: list[int], idle_since: float = 0.0
    ) -> None:
        self.box_id = box_id
        self.name = name
        self.secret = secret
        self.letters: deque[int] = deque(letters)
        self.pending = 0  # letters accepted but not committed yet
        self.holder: Clerk | None = None
        self.removed = False
        self.known = b""  # PostOffice.memo of the digest last found right, or b""
        self.idle_since: float | None = idle_since  # None while checked out
        self.dropped = 0  # letters dropped at the cap (lifecycle.make_room)

    def mail_arrived(self) -> None:
        if self.holder is not None:
            self.holder.mail_arrived()


MAX_FAILING_PEERS = 10_000  # peer hosts whose wrong passwords are remembered


@dataclass(slots=True)
class PeerFailures:
    """Wrong passwords from one peer host (all its connections, all boxes)."""

    count: int = 0
    last: float = 0.0  # loop time of the last one
    waiting: int = 0  # its connections waiting out a back-off now
    until: float = 0.0  # loop time its back-off ends: no password is hashed before


class HashPoolFull(Exception):
    """The scrypt threads and their queue are all taken."""


class HashPool:
    """scrypt on threads of its own, with a bounded queue: beyond `workers + queue` jobs
    in hand, `run` refuses at once (HashPoolFull) rather than queue without limit."""

    def __init__(self, workers: int, queue: int) -> None:
        self.executor = ThreadPoolExecutor(
            max_workers=max(1, workers), thread_name_prefix="postoffice-scrypt"
        )
        self.limit = max(1, workers) + max(0, queue)
        self.in_hand = 0  # jobs running or queued (only touched on the loop)
        self.refused = 0

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        if self.in_hand >= self.limit:
            self.refused += 1
            raise HashPoolFull
        self.in_hand += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)
        finally:
            self.in_hand -= 1

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


class PostOffice:
    """The daemon: mailboxes, the store and the listening socket."""

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
        queue = config.max_connections if config.hash_queue is None else config.hash_queue
        self.hasher = HashPool(config.hash_workers, queue)
        self._memo_key = secrets.token_bytes(32)  # this process only, never stored
        self.clerks: set[Clerk] = set()
        self.store: st.Store | None = None
        self.committer: Committer | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.refused_connections = 0
        self.getmail_requests = 0  # GETMAIL round trips served (an idle client's cost)
        # Wrong passwords by peer host, oldest first; bounded (MAX_FAILING_PEERS).
        self.auth_failures: dict[str, PeerFailures] = {}
        # Letters stored since start, by id, so that delivery needs no SELECT; bounded,
        # the store has them all anyway.
        self.cache: dict[int, tuple[str, bytes]] = {}
        self.cache_bytes = 0
        self.cache_limit = 32 * 1024 * 1024
        self.housekeeper = Housekeeper(self)
        self.admin = AdminServer(self)

    # -- life cycle -------------------------------------------------------------------
    async def start(self) -> int:
        """Open the store, load the boxes and listen; return the bound port."""
        store = await asyncio.to_thread(st.Store, self.config.store_path, self.config.sync)
        self.store = store
        self.committer = Committer(store, asyncio.get_running_loop())
        records, letters = store.load()
        now = self.clock()  # a box's idle time is not stored: it counts from here
        for record in records:
            letter_ids = letters.get(record.box_id, [])
            self.add_box(Box(record.box_id, record.name, record.secret, letter_ids, now))
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Clerk(self), self.config.host, self.config.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("PostOffice on %s:%d, %d mailboxes", self.config.host, self.port, len(self.boxes))
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
        self.hasher.close()

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

    def add_box(self, box: Box) -> None:
        self.boxes[box.name] = box
        group = box.name.rpartition(".")[0]
        if group:
            self.groups.setdefault(group, {})[box.name] = box

    def drop_box(self, box: Box) -> None:
        box.removed = True
        if self.boxes.get(box.name) is box:
            del self.boxes[box.name]
        group = box.name.rpartition(".")[0]
        members = self.groups.get(group)
        if members is not None and members.get(box.name) is box:
            del members[box.name]
            if not members:
                del self.groups[group]

    def resolve(self, name: str) -> list[Box]:
        """The box named `name`, or else every member of the group `name` (the boxes
        named `name.<member>`, one level down); see docs/postoffice.md, "Groups"."""
        box = self.boxes.get(name)
        if box is not None:
            return [box]
        return list(self.groups.get(name, {}).values())

    def memo(self, box: Box, digest: bytes) -> bytes:
        """A keyed fast hash of a digest found right for `box` (in memory only, with a key
        that dies with the process): a later check-out with the same password is
        recognised without scrypt, so it is granted at once even while its host is in
        back-off, and wrong guesses cannot lock out an owner already seen."""
        return hmac.digest(self._memo_key, box.secret.encode() + b"\0" + digest, "sha256")

    def name_conflict(self, name: str) -> str:
        """Why a new mailbox may not be called `name` ("" if it may). A CREATEBOX never
        changes where letters to an existing address go (it needs no credentials): so
        `robot` is refused while `robot.arm` exists, as it would take the letters of the
        group `robot`. A name under a mailbox is allowed (the transport keeps
        `robot.arm.out` beside `robot.arm`): a mailbox's name keeps meaning that mailbox.
        Names being created count as existing, so concurrent CREATEBOX cannot get round
        this (a name whose parent is being created is refused until that is done)."""
        reserved = self.reserved
        if name in self.boxes or name in reserved:
            return "a mailbox of that name exists"
        if name in self.groups or any(r.rpartition(".")[0] == name for r in reserved):
            return "it is the group of existing mailboxes"
        parent = name.rpartition(".")[0]
        if parent in reserved:
            return f"{parent!r} is being created"
        return ""

    def auth_failed(self, host: str, now: float) -> PeerFailures:
        """Count a wrong password from `host`; its record, the count included."""
        failures = self.auth_failures.pop(host, None)
        if failures is None or (
            failures.waiting == 0 and now - failures.last >= self.config.auth_forget_s
        ):
            failures = PeerFailures()
        failures.count += 1
        failures.last = now
        self.auth_failures[host] = failures  # re-inserted: the dict stays oldest first
        # Forget hosts quiet for long, and the oldest beyond the bound (oldest first, so
        # this stops at the first one to keep).
        while True:
            oldest = next(iter(self.auth_failures))
            record = self.auth_failures[oldest]
            stale = record.waiting == 0 and now - record.last >= self.config.auth_forget_s
            if record is failures or (not stale and len(self.auth_failures) <= MAX_FAILING_PEERS):
                break
            del self.auth_failures[oldest]
        return failures

    def uncache(self, letter_id: int) -> None:
        letter = self.cache.pop(letter_id, None)
        if letter is not None:
            self.cache_bytes -= len(letter[1])

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


class Clerk(asyncio.Protocol):
    """Serves one connection, driven by callbacks: asyncio hands it bytes, it feeds them
    to `ServerProtocol` and answers each event at once. Only what must wait (a commit,
    mail during GETMAIL, a password check) leaves the clerk `busy`; input that arrives
    meanwhile stays buffered, and processing resumes when the wait is over. No task per
    connection and no future per message: that is what keeps the daemon's cost per
    letter low."""

    def __init__(self, office: PostOffice) -> None:
        self.office = office
        self.config = office.config
        self.loop = asyncio.get_running_loop()
        self.proto = ServerProtocol(office.limits)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.host = "?"  # the peer's address without the port: back-off is per host
        self.box: Box | None = None
        self._digest = b""
        self._created = 0
        self._out = bytearray()
        self._lost = False
        self._busy = False  # waiting for a commit, mail or a password check
        self._closing = False
        self._write_paused = False
        self._read_paused = False
        self._pause_above = office.limits.max_buffer_bytes // 2
        self._clock = 0.0  # when the client last sent, or we last answered
        self._timer: asyncio.TimerHandle | None = None
        # Per-request scratch: the name (or why it was refused) and the mail loop.
        self._name: str | None = None
        self._name_error = ""
        self._deadline = 0.0
        self._in_flight: int | None = None
        self._waiting_mail = False
        self._mail_timer: asyncio.TimerHandle | None = None

    @property
    def in_flight(self) -> int | None:
        """The id of the letter this clerk has sent in GETMAIL and not seen taken yet."""
        return self._in_flight

    # -- asyncio.Protocol ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses).
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        office = self.office
        if len(office.clerks) >= self.config.max_connections:
            office.refused_connections += 1
            self.transport.write(bytes((Response.SHUTDOWN,)))
            transport.close()
            self._lost = True
            return
        office.clerks.add(self)
        self._clock = self.loop.time()
        self._timer = self.loop.call_later(self.config.comm_timeout_s, self._check_stall)

    def data_received(self, data: bytes) -> None:
        if self._lost:
            return
        self._clock = self.loop.time()
        try:
            self.proto.receive_data(data)
        except ProtocolError as exc:
            log.info("%s: %s; closing", self.peer, exc)
            self._close()
            return
        if self.proto.buffered > self._pause_above and self.transport is not None:
            self.transport.pause_reading()
            self._read_paused = True
        self._process()

    def eof_received(self) -> bool:
        self.proto.receive_data(b"")
        self._process()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        for timer in (self._timer, self._mail_timer):
            if timer is not None:
                timer.cancel()
        self._waiting_mail = False
        self._release("connection closed")
        self.office.clerks.discard(self)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._clock = self.loop.time()
        self._process()

    # -- plumbing ----------------------------------------------------------------------
    def _send(self, frame: Reply | Mail) -> None:
        self._out += self.proto.send(frame)

    def _reply(self, response: Response) -> None:
        self._out += self.proto.reply(response)

    def _flush(self) -> None:
        if self._out and self.transport is not None and not self._lost:
            self.transport.write(bytes(self._out))
        self._out.clear()

    def _close(self) -> None:
        self._flush()
        self._closing = True
        if self.transport is not None:
            self.transport.close()

    def shutdown(self) -> None:
        """The daemon is stopping: say SHUTDOWN and close."""
        if self.transport is not None and not self._lost:
            self.transport.write(bytes(self._out) + bytes((Response.SHUTDOWN,)))
            self._out.clear()
            self.transport.close()
        self._closing = True

    def _check_stall(self) -> None:
        """COMMTIMEOUT for a client silent too long inside a command. One timer per
        connection, re-armed when it fires, so that a message costs no timer work."""
        self._timer = None
        if self._lost or self._closing:
            return
        limit = self.config.comm_timeout_s
        now = self.loop.time()
        waiting_on_us = self._busy or self._write_paused  # a slow reader is not a stall
        if self.proto.mid_command and not waiting_on_us and now - self._clock >= limit:
            self.office.trace(
                "postoffice.timeout",
                name=self.box.name if self.box else "",
                detail=f"no data from {self.peer} within {limit} s",
                extra={"peer": self.peer, "phase": self.proto.position.phase.value},
            )
            self._reply(Response.COMMTIMEOUT)
            self._close()
            return
        wait = limit - (now - self._clock) if self.proto.mid_command else limit
        self._timer = self.loop.call_later(max(wait, 0.01), self._check_stall)

    def _resume(self) -> None:
        """An asynchronous step answered: go on with what the client sent meanwhile."""
        self._busy = False
        self._clock = self.loop.time()
        self._process()

    def _start(self, coro: Any) -> None:
        """Run a rare, slow step (password check, box creation) as a task."""
        self._busy = True

        async def run() -> None:
            try:
                await coro
            except Exception:
                log.exception("clerk for %s failed", self.peer)
                self._close()
                return
            self._resume()

        self.office.spawn(run())

    # -- the clerk's loop ----------------------------------------------------------------
    def _process(self) -> None:
        proto = self.proto
        while not (self._busy or self._lost or self._closing or self._write_paused):
            event = proto.next_event()
            if event is NEED_DATA:
                if self._read_paused and self.transport is not None:
                    self._read_paused = False
                    self.transport.resume_reading()
                break
            if event is PAUSED or isinstance(event, EndOfStream):
                self._close()  # closed after DISCONNECT, or the client went away
                break
            try:
                self._handle(event)
            except LimitError as exc:
                log.info("%s: %s; closing", self.peer, exc)
                self._close()
                break
            if proto.closed:
                self._close()
                break
        # While a step waits (a commit, mail), the REQDATA answers already buffered are
        # for steps whose data has arrived: the client sent ahead and waits for them all,
        # so they go out together with the final answer, in one write.
        if not self._busy:
            self._flush()

    def _handle(self, event: object) -> None:
        # One dictionary look-up instead of a chain of isinstance tests per event.
        _HANDLERS[type(event)](self, event)

    def _on_unknown(self, event: UnknownCommand) -> None:
        self._reply(Response.BADCOMMAND)

    def _on_command(self, event: Command) -> None:
        if self.proto.position.phase is Phase.MAIL_REPLY:
            self._mail_loop(event.request)
        else:
            self._command(event.request)

    def _on_name(self, event: Name) -> None:
        self._name = event.name
        self._name_error = ""
        self._reply(Response.REQDATA)

    def _on_invalid_name(self, event: InvalidName) -> None:
        self._name = None
        self._name_error = event.reason
        self._reply(Response.REQDATA)

    def _on_digest(self, event: Digest) -> None:
        if self.proto.position.request is Request.CREATEBOX:
            self._start(self._create_box(event.digest))
        else:
            self._start(self._check_out(event.digest))

    def _on_timeout(self, event: Timeout) -> None:
        self._start_mail(event.milliseconds)

    def _command(self, request: Request) -> None:
        box = self.box
        needs_box = (
            Request.RETBOX,
            Request.REMOVEBOX,
            Request.SENDLETTER,
            Request.GETMAIL,
            Request.EMPTYBOX,
        )
        if request in needs_box and box is None:
            self._reply(Response.NOBOXCONN)
        elif request in (Request.CREATEBOX, Request.SENDLETTER, Request.GETMAIL):
            self._reply(Response.REQDATA)
        elif request is Request.REQBOX:
            self._reply(Response.ALREADYCONN if box is not None else Response.REQDATA)
        elif request is Request.RETBOX:
            self._release("returned")
            self._reply(Response.REQGRANTED)
        elif request is Request.REMOVEBOX:
            self._start(self._remove_box())
        elif request is Request.EMPTYBOX:
            assert box is not None
            self._start(self._empty_box(box))
        elif request is Request.DISCONNECT:
            self._release("disconnect")
            self._reply(Response.REQGRANTED)
        else:  # NEXTLETTER / SATIATED outside GETMAIL
            self._reply(Response.BADCOMMAND)

    # -- mailboxes -----------------------------------------------------------------------
    async def _create_box(self, digest: bytes) -> None:
        office, config, name = self.office, self.config, self._name
        # Every refusal is BOXEXISTS, the only one ERRATA allows after CREATEBOX; the
        # log and the trace say why.
        if name is None:
            self._refuse_box("", f"invalid name: {self._name_error}")
            return
        conflict = office.name_conflict(name)
        if conflict:
            self._refuse_box(name, conflict)
            return
        if self._created >= config.max_boxes_per_connection or len(office.boxes) >= (
            config.max_boxes
        ):
            self._refuse_box(name, "mailbox limit reached")
            return
        office.reserved.add(name)
        try:
            secret = await office.hasher.run(st.hash_digest, digest, config.hash_params)
            box_id = await office.write(st.op_create_box(name, secret))
        except HashPoolFull:
            self._refuse_box(name, "password hashing busy")
            return
        finally:
            office.reserved.discard(name)
        if box_id is None or name in office.boxes:
            self._reply(Response.BOXEXISTS)
            return
        box = Box(box_id, name, secret, [], office.clock())
        box.known = office.memo(box, digest)
        office.add_box(box)
        self._created += 1
        office.trace("postoffice.box_created", name=name, extra={"peer": self.peer})
        self._reply(Response.REQGRANTED)

    def _refuse_box(self, name: str, reason: str) -> None:
        log.info("%s: CREATEBOX %s refused: %s", self.peer, name, reason)
        self.office.trace(
            "postoffice.box_refused", name=name, detail=reason, extra={"peer": self.peer}
        )
        self._reply(Response.BOXEXISTS)

    async def _check_out(self, digest: bytes) -> None:
        office, name = self.office, self._name
        box = office.boxes.get(name) if name is not None else None
        if box is None:
            self._reply(Response.NONEXISTBOX)
            return
        if not await self._verify(box, digest):
            return  # answered NOAUTH
        if box.removed or office.boxes.get(box.name) is not box:
            self._reply(Response.NONEXISTBOX)
        elif box.holder is not None or self._lost:
            self._reply(Response.BOXINUSE)
        else:
            box.holder = self
            box.idle_since = None
            self.box = box
            self._digest = digest
            office.trace("postoffice.checked_out", name=box.name, extra={"peer": self.peer})
            self._reply(Response.REQGRANTED)

    async def _verify(self, box: Box, digest: bytes) -> bool:
        """Check a password, hashing as little as a flood allows.

        - A digest found right before (`PostOffice.memo`) is granted at once, without
          scrypt and whatever failed before: guessing cannot lock out a known owner.
        - Otherwise nothing is hashed while the peer's host is in back-off (after a
          wrong password, a wait that doubles with the host's recent failures, across
          its connections and boxes so reconnecting does not reset it): the attempt
          waits until the back-off ends, then is checked. A host with
          `auth_max_waiting` connections waiting already has the next one answered
          NOAUTH and closed at once, without hashing: its waits and hashes are bounded.
        - scrypt runs on `HashPool`; when its queue is full the attempt is answered
          NOAUTH at once, without hashing.
        - A wrong password is answered NOAUTH after the back-off it starts (less what
          the attempt already waited)."""
        office, config = self.office, self.config
        memo = office.memo(box, digest)
        if box.known and hmac.compare_digest(box.known, memo):
            return True
        started = self.loop.time()
        failures = office.auth_failures.get(self.host)
        if failures is not None and started < failures.until:
            if failures.waiting >= config.auth_max_waiting:
                self._refuse_unhashed(box, "too many attempts waiting, closing")
                self._close()
                return False
            await self._sit_out(failures, failures.until - started)
            if self._lost:
                return False  # gone meanwhile: nothing to check
        try:
            ok = await office.hasher.run(st.verify_digest, digest, box.secret)
        except HashPoolFull:
            self._refuse_unhashed(box, "password checks busy")
            return False
        if ok:
            box.known = memo
            return True
        now = self.loop.time()
        failures = office.auth_failed(self.host, now)
        backoff = min(
            config.auth_delay_s * 2 ** min(failures.count - 1, 30), config.auth_delay_max_s
        )
        failures.until = max(failures.until, now + backoff)
        crowded = failures.waiting >= config.auth_max_waiting
        office.trace(
            "postoffice.auth_failed",
            name=box.name,
            detail=f"wrong password from {self.peer}"
            + ("; too many attempts waiting, closing" if crowded else ""),
            extra={"peer": self.peer, "failures": failures.count},
        )
        if crowded:
            log.info("%s: wrong password for %s; too many attempts waiting", self.peer, box.name)
            self._reply(Response.NOAUTH)
            self._close()
            return False
        delay = backoff - (now - started)  # an attempt that waited before has been slowed
        if delay > 0:
            await self._sit_out(failures, delay)
        self._reply(Response.NOAUTH)
        return False

    @staticmethod
    async def _sit_out(failures: PeerFailures, seconds: float) -> None:
        """Wait out a back-off, counted among the host's waiting attempts."""
        failures.waiting += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            failures.waiting -= 1

    def _refuse_unhashed(self, box: Box, reason: str) -> None:
        """NOAUTH without checking the password (back-off crowded, hashing busy)."""
        log.info("%s: password for %s not checked: %s", self.peer, box.name, reason)
        self.office.trace(
            "postoffice.auth_refused",
            name=box.name,
            detail=f"password from {self.peer} not checked: {reason}",
            extra={"peer": self.peer},
        )
        self._reply(Response.NOAUTH)

    def _release(self, reason: str) -> None:
        box = self.box
        if box is None:
            return
        self.box = None
        self._digest = b""
        self._in_flight = None
        if box.holder is self:
            box.holder = None
            box.idle_since = self.office.clock()
            self.office.trace("postoffice.returned", name=box.name, detail=reason)

    async def _remove_box(self) -> None:
        box, office = self.box, self.office
        assert box is not None
        if box.removed or office.boxes.get(box.name) is not box:
            self._release("removed")
            self._reply(Response.NONEXISTBOX)
            return
        # Only the box this connection checked out, and only with its password.
        if not await self._verify(box, self._digest):
            return  # answered NOAUTH
        removed = await office.housekeeper.remove(box, "removed by its holder")
        self._release("removed")
        self._reply(Response.REQGRANTED if removed else Response.NONEXISTBOX)

    async def _empty_box(self, box: Box) -> None:
        await self.office.housekeeper.empty(box)
        self._in_flight = None
        self._reply(Response.REQGRANTED)

    # -- letters -------------------------------------------------------------------------
    def _send_letter(self, event: Payload | OversizedPayload) -> None:
        office, sender, config = self.office, self.box, self.config
        assert sender is not None and office.committer is not None
        name = self._name
        targets = office.resolve(name) if name is not None else []
        reason = ""
        if isinstance(event, OversizedPayload):
            reason = f"letter of {event.size} bytes is over {config.max_letter_bytes}"
        elif name is None:
            reason = f"invalid recipient: {self._name_error}"
        elif not targets:
            reason = f"no mailbox or group {name!r}"
        else:
            full = [b for b in targets if not office.housekeeper.make_room(b)]
            if full:
                targets = [b for b in targets if b not in full]
                for box in full:
                    office.trace(
                        "postoffice.letter_refused",
                        name=box.name,
                        detail="mailbox full",
                        extra={"sender": sender.name},
                    )
                if not targets:
                    reason = f"mailbox {name!r} is full"
        if reason or not isinstance(event, Payload):
            log.debug("%s: DELFAIL: %s", self.peer, reason)
            self._reply(Response.DELFAIL)
            return
        for box in targets:
            box.pending += 1
        data = event.data

        def stored(letter_ids: Any, error: BaseException | None) -> None:
            for box in targets:
                box.pending -= 1
            delivered = 0
            for box, letter_id in zip(targets, letter_ids or [None] * len(targets), strict=True):
                if letter_id is None or box.removed:
                    continue
                delivered += 1
                if office.cache_bytes + len(data) <= office.cache_limit:
                    office.cache[letter_id] = (sender.name, data)
                    office.cache_bytes += len(data)
                box.letters.append(letter_id)
                box.mail_arrived()
                if office.tracer.active:
                    office.trace(
                        "postoffice.letter_in",
                        name=box.name,
                        size=len(data),
                        extra={"sender": sender.name, "letter_id": letter_id, "to": name},
                    )
            if self._lost:
                return
            self._reply(Response.REQGRANTED if delivered else Response.DELFAIL)
            self._resume()

        self._busy = True
        office.committer.submit(
            st.op_add_letter([b.box_id for b in targets], sender.name, data), stored
        )

    def _start_mail(self, milliseconds: int) -> None:
        box = self.box
        assert box is not None
        self.office.getmail_requests += 1
        wait = max(0, milliseconds) / 1000.0
        self._deadline = self.loop.time() + wait
        self._in_flight = None
        if not box.letters and wait == 0:
            self._reply(Response.MAILTIMEOUT)
        else:
            self._reply(Response.REQDATA)

    def _mail_loop(self, request: Request) -> None:
        """NEXTLETTER or SATIATED inside GETMAIL. The client asking again (or being
        satiated) means it has the letter in flight whole: only now does that letter
        leave its mailbox. NEXTLETTER does not wait for that delete to commit (a crash
        before it means the letter comes again, never that it is lost); SATIATED does,
        and commits happen in order, so after its REQGRANTED every letter taken in that
        GETMAIL is gone for good."""
        committer = self.office.committer
        assert committer is not None
        letter_id, self._in_flight = self._in_flight, None
        box = self.box
        if letter_id is not None and box is not None:
            if box.letters and box.letters[0] == letter_id:
                box.letters.popleft()
            self.office.uncache(letter_id)
            operation = st.op_delete_letters([letter_id])
            if request is Request.SATIATED:
                self._busy = True

                def deleted(_: Any, error: BaseException | None) -> None:
                    if not self._lost:
                        self._reply(Response.REQGRANTED)
                        self._resume()

                committer.submit(operation, deleted)
                return
            committer.forget(letter_id)
        if request is Request.SATIATED:
            self._reply(Response.REQGRANTED)
            return
        if self._deliver():
            return
        remaining = self._deadline - self.loop.time()
        if remaining <= 0:
            self._reply(Response.MAILTIMEOUT)
            return
        self._busy = True
        self._waiting_mail = True
        # One timer per GETMAIL deadline, left armed when mail comes first (arming and
        # cancelling one per letter costs more than the letter).
        timer = self._mail_timer
        if timer is not None and timer.when() > self._deadline:
            timer.cancel()
            timer = None
        if timer is None:
            self._mail_timer = self.loop.call_at(self._deadline, self._mail_wait_over)

    def _deliver(self) -> bool:
        """Send the first letter of the box as INMAIL, if there is one."""
        box, store = self.box, self.office.store
        assert box is not None and store is not None
        while box.letters:
            letter_id = box.letters[0]
            letter = self.office.cache.get(letter_id) or store.fetch(letter_id)
            if letter is None:  # emptied meanwhile
                box.letters.popleft()
                continue
            self._in_flight = letter_id
            self._send(Mail(letter[0], letter[1]))
            if self.office.tracer.active:
                self.office.trace(
                    "postoffice.letter_out",
                    name=box.name,
                    size=len(letter[1]),
                    extra={"sender": letter[0], "letter_id": letter_id},
                )
            return True
        return False

    def mail_arrived(self) -> None:
        """A letter was committed to our box (called by the sender's clerk)."""
        if self._waiting_mail and self._deliver():
            self._end_mail_wait()

    def _mail_wait_over(self) -> None:
        self._mail_timer = None
        if not self._waiting_mail:
            return
        if self.loop.time() < self._deadline:  # armed for an earlier GETMAIL
            self._mail_timer = self.loop.call_at(self._deadline, self._mail_wait_over)
            return
        if not self._deliver():
            self._reply(Response.MAILTIMEOUT)
        self._end_mail_wait()

    def _end_mail_wait(self) -> None:
        self._waiting_mail = False
        if not self._lost:
            self._resume()


_HANDLERS: dict[type, Callable[[Clerk, Any], None]] = {
    UnknownCommand: Clerk._on_unknown,
    Command: Clerk._on_command,
    Name: Clerk._on_name,
    InvalidName: Clerk._on_invalid_name,
    Digest: Clerk._on_digest,
    Payload: Clerk._send_letter,
    OversizedPayload: Clerk._send_letter,
    Timeout: Clerk._on_timeout,
}


def _log_failure(future: Any) -> None:
    exc = future.exception()
    if exc is not None:
        log.warning("background store write failed: %s", exc)


class ServerThread:
    """Runs a PostOffice on its own event loop thread (tests, embedding, the workbench).

    with ServerThread(ServerConfig(store_path=..., port=0)) as server:
        client = PostOfficeClient("127.0.0.1", server.port)
    """

    def __init__(
        self,
        config: ServerConfig,
        tracer: Tracer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.office = PostOffice(config, tracer, clock)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="postoffice-daemon", daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._stopped = False

    @property
    def port(self) -> int:
        return self.office.port

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.office.start())
        except BaseException as exc:
            self._error = exc
            self._started.set()
            return
        self._started.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._loop.shutdown_default_executor())
        self._loop.close()

    def start(self, timeout: float = 30.0) -> ServerThread:
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError("the PostOffice daemon did not start")
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        """Run `fn` on the daemon's loop and return its result (for inspection)."""

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self._stopped or not self._thread.is_alive():
            return
        self._stopped = True
        future = asyncio.run_coroutine_threadsafe(self.office.stop(), self._loop)
        with contextlib.suppress(Exception):
            future.result(timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def serve(config: ServerConfig, tracer: Tracer | None = None) -> None:
    """Run the daemon until cancelled (SIGINT/SIGTERM in the command line)."""
    office = PostOffice(config, tracer)
    await office.start()
    try:
        await asyncio.Event().wait()
    finally:
        await office.stop()
