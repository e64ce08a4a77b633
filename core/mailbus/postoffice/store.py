"""Durable mailboxes: an SQLite database in WAL mode, written in group commits.

Why SQLite rather than the outbox's filesystem queue: a letter is a row, so accepting
it, taking it out after delivery and emptying a box are single transactions with no
directory of small files to fsync one by one; many letters share one commit and one
fsync; WAL mode lets other processes (the workbench, `mailbus postoffice boxes`) read
while the daemon writes; and a crash leaves either the whole transaction or none.

The daemon groups the writes that arrive together into one transaction (group commit,
see committer.Committer). A commit is written to the WAL at once, so it survives the daemon
being killed; it becomes durable against a power cut when the WAL is fsynced: before
the writes are acknowledged with `sync="full"` (the default; one fsync covers every
batch committed while the previous fsync ran), within a second with `sync="normal"`,
which is what Redis promises with `appendfsync everysec`.

Passwords: the wire carries the 16-byte MD5 digest of a password; the store keeps only
a salted scrypt hash of that digest, compared in constant time.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import hashlib
import hmac
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from mailbus.errors import MailbusError

log = logging.getLogger(__name__)
SyncMode = Literal["full", "normal"]
CheckpointMode = Literal["PASSIVE", "RESTART"]
T = TypeVar("T")
# The WAL is recycled (written again from its start) only after a checkpoint copied
# all of it while no writer added frames. Past this size, the committer holds its
# commits for one RESTART checkpoint (see committer.Committer), so steady traffic
# cannot grow the WAL without bound.
WAL_RESTART_BYTES = 8 * 1024 * 1024
# The WAL file is cut back to this size when recycled: the room it keeps is reused
# without growing the file (and needs no free disk to write).
WAL_SIZE_LIMIT = 8 * 1024 * 1024
# Letters and new boxes are refused while the disk holding the store has less than this
# free (counting the store's own free pages): the room deletes and checkpoints need to
# run on a full disk, so that taking letters frees space again.
DEFAULT_RESERVE_BYTES = 32 * 1024 * 1024
_SCHEMA = """
CREATE TABLE IF NOT EXISTS boxes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    secret TEXT NOT NULL,
    created_ns INTEGER NOT NULL
);
-- Letter ids are rowids: always above every id in the table, so arrival order. No
-- AUTOINCREMENT and no index on box_id: each would add a page to every commit, and only
-- the rare EMPTYBOX/REMOVEBOX and the start-up load would use them.
CREATE TABLE IF NOT EXISTS letters (
    id INTEGER PRIMARY KEY,
    box_id INTEGER NOT NULL,
    sender TEXT NOT NULL,
    payload BLOB NOT NULL,
    received_ns INTEGER NOT NULL
);
"""


class StoreError(MailbusError):
    """The mailbox store cannot be opened or written."""


class StoreFullError(StoreError):
    """The disk holding the store is full, or down to the reserve the daemon keeps."""


def os_error(path: Path, exc: OSError, what: str) -> StoreError:
    """A one-line StoreError for an OSError on the store's files, saying what to do."""
    where = exc.filename or path
    if exc.errno == errno.EROFS:
        return StoreError(
            f"cannot {what}: {where} is on a read-only file system; remount it read-write "
            "(after fsck if the kernel made it read-only after an error) or give --store "
            "a file on a writable disk"
        )
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError(f"cannot {what}: the disk holding {where} is full")
    return StoreError(f"cannot {what}: {where}: {exc.strerror or exc}")


@dataclass(frozen=True, slots=True)
class Checkpointed:
    """What a checkpoint did: `busy` if it could not finish, the WAL's size in frames
    and how many of them are now in the database."""

    busy: bool
    wal_frames: int
    copied_frames: int


# -- password hashing ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class HashParams:
    """scrypt cost: n = 2**log2_n. The defaults take about 0.1 s and 16 MiB."""

    log2_n: int = 14
    r: int = 8
    p: int = 1


def hash_digest(digest: bytes, params: HashParams = HashParams()) -> str:
    """A salted scrypt hash of the 16-byte password digest, with its parameters."""
    salt = secrets.token_bytes(16)
    key = _scrypt(digest, salt, params)
    encoded = [base64.b64encode(x).decode("ascii") for x in (salt, key)]
    return f"scrypt${params.log2_n}${params.r}${params.p}${encoded[0]}${encoded[1]}"


def verify_digest(digest: bytes, stored: str) -> bool:
    """True if `digest` matches `stored` (constant-time comparison)."""
    try:
        scheme, log2_n, r, p, salt, key = stored.split("$")
        if scheme != "scrypt":
            return False
        params = HashParams(int(log2_n), int(r), int(p))
        expected = base64.b64decode(key)
        actual = _scrypt(digest, base64.b64decode(salt), params)
    except ValueError:
        return False
    return hmac.compare_digest(actual, expected)


def _scrypt(digest: bytes, salt: bytes, params: HashParams) -> bytes:
    n = 2**params.log2_n
    maxmem = 128 * params.r * n * 2 + 1024 * 1024
    return hashlib.scrypt(digest, salt=salt, n=n, r=params.r, p=params.p, maxmem=maxmem, dklen=32)


def password_digest(password: str) -> bytes:
    """What a client sends for `password`: the MD5 digest of its UTF-8 bytes, as the
    protocol requires (not used for storage)."""
    return hashlib.md5(password.encode("utf-8"), usedforsecurity=False).digest()


# -- records ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BoxRecord:
    box_id: int
    name: str
    secret: str = ""


@dataclass(frozen=True, slots=True)
class BoxSummary:
    """What the workbench lists: a mailbox and what waits in it."""

    name: str
    letters: int
    payload_bytes: int
    created_ns: int


def _connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        uri = f"{path.resolve().as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    else:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


def _open_database(path: Path) -> sqlite3.Connection:
    """Open (or create) the store with private permissions and check it is ours."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = not path.exists()
        if fresh:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
        # SQLite would open a read-only file read-only and fail later, vaguely.
        os.close(os.open(path, os.O_RDWR))
    except OSError as exc:
        raise os_error(path, exc, "open the PostOffice store") from None
    try:
        conn = _connect(path)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise StoreError(f"{path}: cannot switch to WAL mode (got {mode})")
        # Commits are not fsynced by SQLite: Store.sync_wal does it, off the loop thread.
        # Checkpoints still fsync (WAL before, database after) in NORMAL mode, and run
        # off the loop thread too (Store.checkpoint), so the writer never does one.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
        # Debian's SQLite zeroes every freed page (secure_delete on), so taking a big
        # letter out wrote its size again to the WAL: on a full disk, taking letters
        # could not free space. FAST zeroes only what costs no extra write; a freed
        # page's old bytes stay in the 0600 file until reused.
        conn.execute("PRAGMA secure_delete = FAST")
        conn.executescript(_SCHEMA)
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise StoreError(f"{path}: the database is damaged: {check}")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a usable PostOffice store: {exc}") from None
    return conn


def _lock_store(path: Path) -> int:
    """One daemon per store: each keeps the mailboxes in memory too, so a second one
    would hand out letters the first already delivered. An flock on `<store>.lock`,
    released by the kernel when the daemon dies, however it dies."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise os_error(path, exc, "lock the PostOffice store") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreError(f"{path} is in use by another PostOffice daemon") from None
    return fd


class Store:
    """Mailboxes and letters on disk, used from one thread (the daemon's event loop).

    `run_batch` runs write operations (the `op_*` helpers) in one transaction; with
    synchronous=NORMAL a commit is written to the WAL without fsync. `sync_wal` makes
    every commit so far durable; the daemon calls it off its loop thread, per group of
    batches ("full") or within a second ("normal"). SQLite itself fsyncs the WAL
    before a checkpoint and the database after, so checkpointed data is durable too.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        sync: SyncMode = "full",
        reserve_bytes: int = DEFAULT_RESERVE_BYTES,
    ) -> None:
        if sync not in ("full", "normal"):
            raise ValueError(f"sync must be 'full' or 'normal', not {sync!r}")
        self.path = Path(path)
        self.sync = sync
        self.reserve_bytes = reserve_bytes
        self._lock_fd = _lock_store(self.path)
        try:
            self._conn = _open_database(self.path)
            self.page_size = int(self._conn.execute("PRAGMA page_size").fetchone()[0])
            try:
                self._wal_fd = os.open(str(self.path) + "-wal", os.O_RDONLY | os.O_CREAT, 0o600)
            except OSError as exc:
                raise os_error(self.path, exc, "open the store's WAL") from None
        except BaseException:
            os.close(self._lock_fd)
            raise
        # A second connection, used only by `checkpoint` (from another thread).
        self._checkpointer = _connect(self.path)
        self._checkpointer.execute("PRAGMA synchronous = NORMAL")
        # A RESTART checkpoint waits this long at most for readers of the WAL (another
        # process listing boxes), while the daemon holds its commits; if they are not
        # done by then it gives up and the next one tries again.
        self._checkpointer.execute("PRAGMA busy_timeout = 200")
        self.wal_peak_bytes = 0  # the WAL's largest size seen at a checkpoint
        self.batches = 0
        self.operations = 0
        self.syncs = 0

    def close(self) -> None:
        """Sync the WAL (StoreError if that fails: commits may not be durable) and
        checkpoint it; a checkpoint that fails (a full disk) is only logged: the WAL,
        synced, keeps every commit and the next start copies it."""
        if self._wal_fd < 0:
            return
        try:
            self.sync_wal()
            try:
                self.checkpoint()
            except StoreError as exc:
                log.warning("%s (the WAL keeps every letter: the next start copies it)", exc)
        finally:
            os.close(self._wal_fd)
            self._wal_fd = -1
            self._checkpointer.close()
            self._conn.close()
            os.close(self._lock_fd)  # releases the lock

    def checkpoint(self, mode: CheckpointMode = "PASSIVE") -> Checkpointed:
        """Copy committed pages from the WAL into the database (fsyncing the WAL first
        and the database after). PASSIVE never waits for the writer, which may go on
        committing meanwhile, so under steady traffic it never copies all of the WAL
        and the WAL is never recycled. RESTART waits for the writer and for readers of
        the WAL, copies all of it, and the next commit writes the WAL from its start:
        call it while no commit runs (the committer holds them). Run either off the loop
        thread."""
        try:
            row = self._checkpointer.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"checkpoint of {self.path} failed: {exc}") from exc
        done = Checkpointed(bool(row[0]), max(0, int(row[1])), max(0, int(row[2])))
        self.wal_peak_bytes = max(self.wal_peak_bytes, self.wal_bytes())
        return done

    def wal_bytes(self) -> int:
        """The WAL file's size now."""
        try:
            return os.fstat(self._wal_fd).st_size
        except OSError:
            return 0

    def room(self) -> int:
        """Bytes the store can still grow by: free space on its disk (what an
        unprivileged user may use) plus its own free pages, which new letters reuse."""
        try:
            disk = os.statvfs(self.path.parent)
        except OSError as exc:
            raise os_error(self.path, exc, "measure the free space of the store's disk") from None
        row = self._conn.execute("PRAGMA freelist_count").fetchone()
        return disk.f_bavail * disk.f_frsize + int(row[0]) * self.page_size

    def sizes(self) -> tuple[int, int]:
        """The store's database and WAL files' sizes, in bytes."""
        return _file_sizes(self.path)

    def run_batch(self, operations: list[Callable[[sqlite3.Connection], Any]]) -> list[Any]:
        """Run `operations` in one transaction and return their results; if one fails,
        none of them took effect (StoreError)."""
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            results = [operation(conn) for operation in operations]
            conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(f"store write failed: {exc}") from exc
        self.batches += 1
        self.operations += len(operations)
        return results

    def apply(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """One operation in its own transaction (and durable, whatever the mode)."""
        result: T = self.run_batch([operation])[0]
        self.sync_wal()
        return result

    def sync_wal(self) -> None:
        """Sync the WAL to disk: every commit made before this call survives a power cut.
        Safe to call from another thread than the one writing."""
        try:
            os.fdatasync(self._wal_fd)  # the data and the size; what SQLite itself uses
        except OSError as exc:
            raise StoreError(f"cannot fsync {self.path}-wal: {exc}") from exc
        self.syncs += 1

    # -- reads --------------------------------------------------------------------------
    def load(self) -> tuple[list[BoxRecord], dict[int, list[int]]]:
        """Every box and, per box id, the ids of its letters in arrival order."""
        boxes = [
            BoxRecord(row[0], row[1], row[2])
            for row in self._conn.execute("SELECT id, name, secret FROM boxes ORDER BY id")
        ]
        letters: dict[int, list[int]] = {box.box_id: [] for box in boxes}
        for letter_id, box_id in self._conn.execute(
            "SELECT id, box_id FROM letters ORDER BY box_id, id"
        ):
            if box_id in letters:
                letters[box_id].append(letter_id)
        return boxes, letters

    def fetch(self, letter_id: int) -> tuple[str, bytes] | None:
        row = self._conn.execute(
            "SELECT sender, payload FROM letters WHERE id = ?", (letter_id,)
        ).fetchone()
        return None if row is None else (row[0], bytes(row[1]))

    def summaries(self) -> list[BoxSummary]:
        return _summaries(self._conn)

    def box_id(self, name: str) -> int | None:
        row = self._conn.execute("SELECT id FROM boxes WHERE name = ?", (name,)).fetchone()
        return None if row is None else int(row[0])


# -- write operations (run inside a transaction of Store.run_batch) ------------------
def op_create_box(name: str, secret: str) -> Callable[[sqlite3.Connection], int | None]:
    """Create a box; its id, or None if the name is taken."""

    def run(conn: sqlite3.Connection) -> int | None:
        cursor = conn.execute(
            "INSERT OR IGNORE INTO boxes (name, secret, created_ns) VALUES (?, ?, ?)",
            (name, secret, time.time_ns()),
        )
        return cursor.lastrowid if cursor.rowcount == 1 else None

    return run


def op_remove_box(box_id: int) -> Callable[[sqlite3.Connection], bool]:
    """Remove exactly the box with this id (not whatever now has its name)."""

    def run(conn: sqlite3.Connection) -> bool:
        conn.execute("DELETE FROM letters WHERE box_id = ?", (box_id,))
        return conn.execute("DELETE FROM boxes WHERE id = ?", (box_id,)).rowcount == 1

    return run


def op_add_letter(
    box_ids: list[int], sender: str, payload: bytes
) -> Callable[[sqlite3.Connection], list[int | None]]:
    """Store one letter in each of `box_ids` (a group letter goes to several boxes in
    one transaction); per box the letter's id, or None if that box is gone."""

    def run(conn: sqlite3.Connection) -> list[int | None]:
        now = time.time_ns()
        ids: list[int | None] = []
        for box_id in box_ids:
            cursor = conn.execute(
                "INSERT INTO letters (box_id, sender, payload, received_ns) "
                "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM boxes WHERE id = ?)",
                (box_id, sender, payload, now, box_id),
            )
            ids.append(cursor.lastrowid if cursor.rowcount == 1 else None)
        return ids

    return run


def op_delete_letters(letter_ids: Iterable[int]) -> Callable[[sqlite3.Connection], int]:
    ids = [(i,) for i in letter_ids]

    def run(conn: sqlite3.Connection) -> int:
        return conn.executemany("DELETE FROM letters WHERE id = ?", ids).rowcount

    return run


def op_empty_box(box_id: int) -> Callable[[sqlite3.Connection], int]:
    def run(conn: sqlite3.Connection) -> int:
        return conn.execute("DELETE FROM letters WHERE box_id = ?", (box_id,)).rowcount

    return run


def _summaries(conn: sqlite3.Connection) -> list[BoxSummary]:
    rows = conn.execute(
        "SELECT b.name, COUNT(l.id), COALESCE(SUM(LENGTH(l.payload)), 0), b.created_ns "
        "FROM boxes b LEFT JOIN letters l ON l.box_id = b.id GROUP BY b.id ORDER BY b.name"
    )
    return [BoxSummary(name, count, size, created) for name, count, size, created in rows]


def _file_sizes(path: Path) -> tuple[int, int]:
    sizes = []
    for name in (str(path), str(path) + "-wal"):
        try:
            sizes.append(os.stat(name).st_size)
        except OSError:
            sizes.append(0)
    return sizes[0], sizes[1]


def store_sizes(path: str | os.PathLike[str]) -> tuple[int, int]:
    """A store file's database and WAL sizes in bytes (0 for a file that is not there)."""
    return _file_sizes(Path(path))


def list_mailboxes(path: str | os.PathLike[str]) -> list[BoxSummary]:
    """Mailboxes with their letter counts, read from a store file (for the workbench).

    Opens the database read-only, so it is safe while the daemon runs."""
    target = Path(path)
    if not target.exists():
        raise StoreError(f"no PostOffice store at {target}")
    try:
        conn = _connect(target, readonly=True)
        try:
            return _summaries(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{target} is not a usable PostOffice store: {exc}") from None
