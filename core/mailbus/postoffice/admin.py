"""Looking after mailboxes from outside the protocol: list them with their life-cycle
state, show a box's letters, empty or remove a box (`mailbus postoffice box`, the
workbench's Mailboxes view).

The protocol cannot do this: a box can only be emptied or removed by whoever checked it
out with its password. So a running daemon also listens on a Unix socket beside its
store, `<store>.admin` (mode 0600, in the store's 0700 directory): whoever may write the
store file may look after its boxes, nobody else. Requests and answers are one JSON
line each. Without a daemon, the same operations go to the store file directly (holding
its lock, so no daemon starts meanwhile). Letters are always read from the store file,
read-only (safe while the daemon writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import sqlite3
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from email.policy import default as default_policy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mailbus.errors import MailbusError
from mailbus.postoffice import store as st
from mailbus.postoffice.protocol import IDENTIFIER

if TYPE_CHECKING:
    from mailbus.postoffice.office import PostOffice

log = logging.getLogger(__name__)
MAX_REQUEST_BYTES = 4096
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, with its terminating NUL
MAX_SHOW = 1000  # letters one `show` lists at most
PREVIEW_BYTES = 8192  # of each letter, read to find its headers


class AdminError(MailbusError):
    """A mailbox operation was refused or could not be done."""


def admin_path(store: Path) -> Path:
    return Path(str(store) + ".admin")


# -- the daemon's side -------------------------------------------------------------------
class AdminServer:
    """The daemon's admin socket: `status`, `empty` and `remove` requests."""

    def __init__(self, office: PostOffice) -> None:
        self.office = office
        self.path = admin_path(office.config.store_path)
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            log.warning("no admin socket: the path %s is too long for a Unix socket", self.path)
            return
        # We hold the store's lock, so a socket file left there is a dead daemon's.
        try:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        except OSError as exc:
            log.warning("no admin socket at %s: %s", self.path, exc.strerror)
            return
        old_mask = os.umask(0o077)  # the socket is created 0600
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.path), limit=MAX_REQUEST_BYTES
            )
        except OSError as exc:
            log.warning("no admin socket at %s: %s", self.path, exc)
        finally:
            os.umask(old_mask)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), 10.0)
                answer = await self.handle(json.loads(line))
            except (ValueError, asyncio.LimitOverrunError) as exc:
                answer = {"ok": False, "error": f"bad request: {exc}"}
            except AdminError as exc:
                answer = {"ok": False, "error": str(exc)}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    async def handle(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict):
            raise AdminError("a request is a JSON object")
        op = request.get("op")
        office = self.office
        if op == "status":
            database, wal = st.store_sizes(office.config.store_path)
            return {
                "ok": True,
                "store": {
                    "database_bytes": database,
                    "wal_bytes": wal,
                    "wal_peak_bytes": office.store.wal_peak_bytes if office.store else 0,
                    "wal_restarts": office.committer.wal_restarts if office.committer else 0,
                    "held_s": round(office.committer.held_s, 3) if office.committer else 0.0,
                    "full": office.store_full,
                },
                "boxes": [
                    {
                        "name": s.name,
                        "letters": s.letters,
                        "holder": s.holder if s.checked_out else None,
                        "dropped": s.dropped,
                        "idle_s": s.idle_s,
                    }
                    for s in office.status()
                ],
            }
        if op not in ("empty", "remove"):
            raise AdminError(f"unknown operation {op!r}")
        name = check_name(request.get("box"))
        box = office.boxes.get(name)
        if box is None:
            raise AdminError(f"no mailbox {name!r}")
        if op == "empty":
            count = await office.housekeeper.empty(box, by="the administrator")
            return {"ok": True, "letters": count}
        if box.holder is not None:
            raise AdminError(
                f"mailbox {name!r} is checked out by {box.holder.peer}: stop that "
                "participant first (or empty the box)"
            )
        count = len(box.letters)
        await office.housekeeper.remove(box, "removed by the administrator")
        return {"ok": True, "letters": count}


def check_name(name: object) -> str:
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise AdminError(f"{name!r} is not a mailbox name (a.b.c)")
    return name


# -- the caller's side -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BoxInfo:
    name: str
    letters: int
    payload_bytes: int
    created_ns: int
    live: bool = False  # the fields below come from a running daemon
    holder: str | None = None  # peer holding it (None: not checked out, or unknown)
    dropped: int = 0
    idle_s: float | None = None


@dataclass(frozen=True, slots=True)
class LetterInfo:
    letter_id: int
    sender: str
    size: int
    received_ns: int
    subject: str  # of the email it carries ("" if none or not an email)
    preview: bytes  # its first bytes


def _ask(store: Path, request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any] | None:
    """The running daemon's answer, or None if no daemon listens for this store."""
    path = admin_path(store)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        except OSError as exc:
            raise AdminError(f"cannot reach the daemon at {path}: {exc}") from None
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            raise AdminError(f"the daemon at {path} did not answer: {exc}") from None
    try:
        answer = json.loads(data)
    except ValueError:
        raise AdminError(f"the daemon at {path} gave no usable answer") from None
    if not isinstance(answer, dict):
        raise AdminError(f"the daemon at {path} gave no usable answer")
    if not answer.get("ok"):
        raise AdminError(str(answer.get("error", "refused")))
    return answer


def _require(store: Path) -> None:
    if not store.exists():
        raise AdminError(f"no PostOffice store at {store}")


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """The store's files on disk, and, if a daemon runs, whether it refuses letters
    for lack of room (None: no daemon answered)."""

    database_bytes: int
    wal_bytes: int
    full: bool | None = None


def store_info(store: Path) -> StoreInfo:
    _require(store)
    database, wal = st.store_sizes(store)
    answer = _ask(store, {"op": "status"})
    live = answer.get("store") if answer is not None else None
    full = bool(live.get("full")) if isinstance(live, dict) else None
    return StoreInfo(database, wal, full)


def list_boxes(store: Path) -> list[BoxInfo]:
    """Every mailbox: letters and bytes from the store, and, if a daemon runs, who
    holds it, how long it has been idle and how many letters it dropped."""
    _require(store)
    try:
        summaries = st.list_mailboxes(store)
    except st.StoreError as exc:
        raise AdminError(str(exc)) from None
    answer = _ask(store, {"op": "status"})
    if answer is None:
        return [BoxInfo(s.name, s.letters, s.payload_bytes, s.created_ns) for s in summaries]
    live = {b["name"]: b for b in answer.get("boxes", []) if isinstance(b, dict)}
    infos = []
    for s in summaries:
        state = live.get(s.name, {})
        infos.append(
            BoxInfo(
                s.name,
                s.letters,
                s.payload_bytes,
                s.created_ns,
                live=s.name in live,
                holder=state.get("holder"),
                dropped=int(state.get("dropped", 0)),
                idle_s=state.get("idle_s"),
            )
        )
    return infos


def show_letters(store: Path, name: str, limit: int = 20) -> list[LetterInfo]:
    """The first `limit` (at most MAX_SHOW) letters waiting in box `name`, oldest first,
    read-only from the store."""
    check_name(name)
    _require(store)
    limit = max(0, min(limit, MAX_SHOW))
    try:
        conn = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = conn.execute("SELECT id FROM boxes WHERE name = ?", (name,)).fetchone()
            if found is None:
                raise AdminError(f"no mailbox {name!r}")
            rows = conn.execute(
                "SELECT id, sender, LENGTH(payload), received_ns, SUBSTR(payload, 1, ?) "
                "FROM letters WHERE box_id = ? ORDER BY id LIMIT ?",
                (PREVIEW_BYTES, found[0], limit),
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise AdminError(f"{store} is not a usable PostOffice store: {exc}") from None
    return [
        LetterInfo(i, sender, size, received, _subject(bytes(head)), bytes(head))
        for i, sender, size, received, head in rows
    ]


def _subject(head: bytes) -> str:
    if b"\n\n" not in head and b"\r\n\r\n" not in head:
        return ""  # not the whole header block: not an email, or headers too long
    try:
        subject = BytesHeaderParser(policy=default_policy).parsebytes(head).get("Subject", "")
    except Exception:  # any header the parser cannot make sense of: no subject
        return ""
    return str(subject)


def empty_box(store: Path, name: str) -> int:
    """Delete every letter of box `name`; how many there were."""
    return _change(store, name, "empty")


def remove_box(store: Path, name: str) -> int:
    """Remove box `name` and its letters; how many letters it had. A box checked out by
    a participant is refused (it would only create it again)."""
    return _change(store, name, "remove")


def _change(store: Path, name: str, op: str) -> int:
    check_name(name)
    _require(store)
    answer = _ask(store, {"op": op, "box": name})
    if answer is not None:
        return int(answer.get("letters", 0))
    try:  # no daemon: the store itself, under its lock
        opened = st.Store(store)
    except st.StoreError as exc:
        raise AdminError(f"{exc} (and its admin socket does not answer)") from None
    try:
        letters = {s.name: s.letters for s in opened.summaries()}
        box_id = opened.box_id(name)
        if box_id is None:
            raise AdminError(f"no mailbox {name!r}")
        operation = st.op_empty_box(box_id) if op == "empty" else st.op_remove_box(box_id)
        opened.apply(operation)
        return letters.get(name, 0)
    finally:
        opened.close()
