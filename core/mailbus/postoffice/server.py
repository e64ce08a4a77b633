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

The parts, one module each: `config` (ServerConfig), `office` (PostOffice: mailboxes,
store, socket), `mailbox` (Box), `routing` (addressing rules, pure), `clerk` and
`getmail` (one connection), `auth` (password checks, back-off, scrypt pool),
`committer` (group commit); this module runs an office on a thread or until cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from mailbus.postoffice.config import ServerConfig
from mailbus.postoffice.office import PostOffice
from mailbus.trace import Tracer

__all__ = ["ServerConfig", "ServerThread", "serve"]  # ServerConfig: what ServerThread takes

log = logging.getLogger(__name__)
T = TypeVar("T")


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
