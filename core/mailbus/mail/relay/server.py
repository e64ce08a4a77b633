"""`MailRelay`: the host relay's process. One ImapReceiver (the adaptive one, from the
options file's `[mail]` table) reads the inbox on a thread; the asyncio loop on the main
thread serves the Unix socket (`hub`). After every batch the reader saves its position
(`state`), so a restarted relay goes on from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import stat
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mailbus.errors import ConfigError, TransportError
from mailbus.mail.fetch_items import SIZE_ITEMS, body_items, body_of, size_of
from mailbus.mail.imap_receiver import ImapSettings
from mailbus.mail.imap_session import open_session, shut, uid_fetch
from mailbus.mail.kinds import MailKind
from mailbus.mail.receiver_options import imap_settings, receiver_parameters
from mailbus.mail.relay.config import DEFAULT_QUEUE_BYTES, DEFAULT_RING_BYTES, account_key
from mailbus.mail.relay.hub import Hub
from mailbus.mail.relay.reader import RelayImapReceiver
from mailbus.mail.relay.state import RelayState, load_state, save_state
from mailbus.mail.uids import uid_set
from mailbus.options import Options
from mailbus.trace import Tracer
from mailbus.transport import RawEmail

log = logging.getLogger(__name__)
CATCH_UP_BYTES = 16 * 1024 * 1024


def imap_receiver(
    options: Options, section: Mapping[str, Any], tracer: Tracer
) -> RelayImapReceiver:
    """The relay's reader, tuned by the same `[mail]` keys as a participant's own."""
    return RelayImapReceiver(
        imap_settings(options, section), tracer, **receiver_parameters(options, section)
    )


def fetch_range(
    settings: ImapSettings,
    tracer: Tracer,
    counters: Counter[str],
    max_bytes: int,
    uidvalidity: int,
    first: int,
    last: int,
) -> tuple[list[tuple[int, bytes]], int]:
    """The mails with UIDs first..last, read again on a connection of their own (the
    reader's may be in IDLE), and the last UID they cover: no more than
    CATCH_UP_BYTES of bodies at a time (at least one mail), so a catch-up holds a
    bounded amount in memory. None if the mailbox was recreated meanwhile."""
    client = open_session(settings, tracer)
    try:
        info = client.select_folder(settings.mailbox, readonly=True)
        if int(info[b"UIDVALIDITY"]) != uidvalidity:
            return [], last
        sizes = uid_fetch(client, f"{first}:{last}", SIZE_ITEMS, counters)
        through, total = last, 0
        wanted: list[int] = []
        for uid in sorted(u for u in sizes if first <= u <= last):
            size = size_of(sizes[uid])
            if size > max_bytes:
                continue  # reported by the reader when it read it (mail.oversized)
            if wanted and total + size > CATCH_UP_BYTES:
                through = uid - 1
                break
            wanted.append(uid)
            total += size
        if not wanted:
            return [], through
        bodies = uid_fetch(client, uid_set(wanted), body_items(max_bytes), counters)
        out = []
        for uid in wanted:
            body = body_of(bodies[uid]) if uid in bodies else None
            if body is not None:
                out.append((uid, body))
        return out, through
    finally:
        try:
            client.logout()
        except Exception:
            shut(client)


class MailRelay:
    def __init__(
        self,
        options: Options,
        section: Mapping[str, Any],
        socket_path: Path,
        state_dir: Path,
        tracer: Tracer | None = None,
        *,
        queue_bytes: int | None = None,
        ring_bytes: int = DEFAULT_RING_BYTES,
    ) -> None:
        self.tracer = tracer or Tracer()
        self.socket_path = socket_path
        mailbox = section.get("mailbox", "INBOX")
        self.state_path = state_dir / f"relay-{account_key(options, mailbox)}.json"
        self.state_dir = state_dir
        self.receiver = imap_receiver(options, section, self.tracer)
        self.queue_bytes = queue_bytes or section.get("relay-queue-bytes", DEFAULT_QUEUE_BYTES)
        self.ring_bytes = ring_bytes
        self.stopping = threading.Event()
        self.hub: Hub | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._failure: BaseException | None = None

    @property
    def counters(self) -> Counter[str]:
        out = Counter(self.receiver.counters)
        if self.hub is not None:
            out.update({f"relay_{k}": v for k, v in self.hub.counters.items()})
        return out

    def stop(self) -> None:
        self.stopping.set()
        self.receiver.wake()
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stopped.set)

    def run(self, ready: Callable[[], None] | None = None) -> None:
        """Connect, serve until `stop()` (or SIGTERM/SIGINT when on the main thread)."""
        asyncio.run(self._main(ready))
        if self._failure is not None:
            raise self._failure

    # -- the loop ------------------------------------------------------------------------
    async def _main(self, ready: Callable[[], None] | None) -> None:
        self._loop = loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        state = load_state(self.state_path)
        cursor = self.receiver.cursor
        if state is not None:
            # As if this receiver had read up to there: EXAMINE then resumes (or starts
            # again from UID 1 if the mailbox was recreated meanwhile).
            cursor.uidvalidity, cursor.next_uid = state.uidvalidity, state.next_uid
        self._claim_socket()
        await asyncio.to_thread(self.receiver.connect)
        assert cursor.uidvalidity is not None and cursor.next_uid is not None
        s = self.receiver.settings
        self.hub = hub = Hub(
            lambda v, a, b: fetch_range(
                s, self.tracer, self.receiver.counters, self.receiver.max_message_bytes, v, a, b
            ),
            self.tracer,
            uidvalidity=cursor.uidvalidity,
            next_uid=cursor.next_uid,
            queue_bytes=self.queue_bytes,
            ring_bytes=self.ring_bytes,
            on_nudge=self.receiver.nudge,
        )
        save_state(self.state_path, RelayState(cursor.uidvalidity, cursor.next_uid))
        old_umask = os.umask(0o177)  # the socket is the user's alone: it carries all mail
        try:
            server = await asyncio.start_unix_server(
                hub.serve, path=str(self.socket_path), backlog=1024
            )
        finally:
            os.umask(old_umask)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
        reader = threading.Thread(target=self._read, name="mailbus-relay-imap", daemon=True)
        reader.start()
        self.tracer.event(
            MailKind.RELAY_STARTED,
            detail=str(self.socket_path),
            extra={"next_uid": cursor.next_uid, "state": str(self.state_path)},
        )
        if ready is not None:
            ready()
        try:
            if not self.stopping.is_set():
                await self._stopped.wait()
        finally:
            self.stopping.set()
            self.receiver.wake()
            server.close()
            hub.close("the relay is stopping")
            await asyncio.to_thread(reader.join, 10.0)
            self.receiver.close()
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()

    def _claim_socket(self) -> None:
        """Make the socket's directory (the user's only); refuse if a relay answers on
        the socket, remove it if it is a leftover of a relay that died."""
        directory = self.socket_path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
        shared = info.st_uid != os.getuid() or info.st_mode & 0o022
        if shared and not info.st_mode & stat.S_ISVTX:
            # Others could swap our socket for theirs. (In a sticky directory such as
            # /tmp they cannot, and a participant refuses a socket that is not ours.)
            raise ConfigError(
                "mail.relay-socket",
                f"{directory} must belong to this user and be writable by no one else "
                "(or be sticky, like /tmp)",
            )
        if not self.socket_path.exists():
            return
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(self.socket_path))
        except OSError:
            self.socket_path.unlink()  # nobody listens: a dead relay's socket
            return
        finally:
            probe.close()
        raise ConfigError("mail.relay-socket", f"a relay already runs on {self.socket_path}")

    # -- the reading thread ---------------------------------------------------------------
    def _read(self) -> None:
        loop, hub = self._loop, self.hub
        assert loop is not None and hub is not None
        try:
            self._read_until_stopped(loop, hub)
        except BaseException as exc:
            self._failure = exc
        finally:
            self.stop()

    def _read_until_stopped(self, loop: asyncio.AbstractEventLoop, hub: Hub) -> None:
        cursor = self.receiver.cursor
        position = (cursor.uidvalidity, cursor.next_uid)
        while not self.stopping.is_set():
            try:
                items = self.receiver.receive(1.0)
            except TransportError:
                if self.stopping.is_set():
                    break
                raise
            mails = [
                (int(item.origin.removeprefix("uid:")), item.data)
                for item in items
                if isinstance(item, RawEmail)
            ]
            now = (cursor.uidvalidity, cursor.next_uid)
            if not mails and now == position:
                continue
            assert now[0] is not None and now[1] is not None
            position = now
            loop.call_soon_threadsafe(hub.publish, now[0], mails, now[1])
            try:
                save_state(self.state_path, RelayState(now[0], now[1]))
            except OSError as exc:
                log.warning("cannot save the relay state to %s: %s", self.state_path, exc)
