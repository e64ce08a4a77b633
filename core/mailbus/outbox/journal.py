"""The outbox's write-ahead journal: one fsync makes a commit durable.

The queue layout (`fs_storage`) needs a file or directory fsync for every name it makes
durable: seven for an enqueue, two for a send_done. Instead, the journal records what
must survive a power cut, in one append and one fsync:

- `Enqueued`: a mail's contents and, per destination, its ids, metadata and schedule,
  written before the queue links are made (the commit point of `send()`);
- `Gone`: entries moved to cleanup (sent or dropped) or set aside, which must never
  come back.

The layout is written as before but not fsynced; a checkpoint (`replay.checkpoint`)
later fsyncs what the records cover and empties the journal, only once those fsyncs
succeeded. At every start the records are replayed onto the layout (`replay.replay`,
idempotent): not only a power cut loses unsynced writes, a file system that turns
read-only after an error drops its dirty pages too, and fsck then leaves empty files
within the same boot. Records carry the kernel's boot id, for inspection only.

File format: records one after another, each `MAGIC`, the body's length and CRC-32
(big-endian), then the body: a JSON header line and, for `Enqueued`, the contents. A
record cut short or damaged ends the journal (it was never acknowledged).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import zlib
from dataclasses import dataclass
from functools import cache

from mailbus.outbox.files import fsync_dir

MAGIC = b"OBJ1"
_HEAD = struct.Struct(">4sII")


@cache
def boot_id() -> str:
    """This boot of the kernel ('' where the system does not say: replay always)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


@dataclass(frozen=True, slots=True)
class JournaledEntry:
    id: str
    dest: str
    metadata: bytes
    schedule: bytes


@dataclass(frozen=True, slots=True)
class Enqueued:
    mail: str
    entries: tuple[JournaledEntry, ...]
    contents: bytes
    boot: str = ""


@dataclass(frozen=True, slots=True)
class Gone:
    ids: tuple[str, ...]
    boot: str = ""


Record = Enqueued | Gone


def encode(record: Record) -> bytes:
    if isinstance(record, Enqueued):
        header = {
            "k": "E",
            "boot": boot_id(),
            "mail": record.mail,
            "entries": [
                {
                    "id": e.id,
                    "dest": e.dest,
                    "metadata": e.metadata.decode("ascii"),
                    "schedule": e.schedule.decode("ascii"),
                }
                for e in record.entries
            ],
        }
        tail = record.contents
    else:
        header = {"k": "D", "boot": boot_id(), "ids": list(record.ids)}
        tail = b""
    body = json.dumps(header, ensure_ascii=True).encode("ascii") + b"\n" + tail
    return _HEAD.pack(MAGIC, len(body), zlib.crc32(body)) + body


def decode(data: bytes) -> list[Record]:
    """The records in `data`, up to the first one that is cut short or damaged."""
    records: list[Record] = []
    offset = 0
    while offset + _HEAD.size <= len(data):
        magic, length, crc = _HEAD.unpack_from(data, offset)
        body = data[offset + _HEAD.size : offset + _HEAD.size + length]
        if magic != MAGIC or len(body) != length or zlib.crc32(body) != crc:
            break
        try:
            records.append(_record(body))
        except (ValueError, KeyError, TypeError):
            break
        offset += _HEAD.size + length
    return records


def _record(body: bytes) -> Record:
    line, _, tail = body.partition(b"\n")
    header = json.loads(line)
    boot = str(header["boot"])
    if header["k"] == "D":
        return Gone(tuple(str(i) for i in header["ids"]), boot)
    entries = tuple(
        JournaledEntry(str(e["id"]), str(e["dest"]), e["metadata"].encode(), e["schedule"].encode())
        for e in header["entries"]
    )
    return Enqueued(str(header["mail"]), entries, tail, boot)


class Journal:
    """The journal file `<root>/journal`. Not thread-safe: FsStorage serialises its use."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1
        self.size = 0  # the file's size after this object's last write or read
        self.records = 0  # appended by this object since its last reset

    def _open(self) -> int:
        if self._fd < 0:
            created = not os.path.exists(self.path)
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            self._fd = os.open(self.path, flags, 0o600)
            if created:  # an outbox made by an older version: its name must last too
                fsync_dir(os.path.dirname(self.path))
        return self._fd

    def append(self, record: Record) -> int:
        """Append `record` and fsync: durable when this returns; the journal's size
        before it. On OSError the journal is cut back to what it was, so no damaged
        record sits before later ones."""
        fd = self._open()
        data = encode(record)
        # The file's own size, not a count kept here: another FsStorage of this process
        # (tests, the admin path) may have appended or reset it meanwhile.
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise
        self.size = start + len(data)
        self.records += 1
        return start

    def withdraw(self, size_before: int) -> None:
        """Take back the records appended since the file had `size_before` bytes (their
        commit failed afterwards)."""
        fd = self._open()
        os.ftruncate(fd, size_before)
        os.fsync(fd)
        self.size = size_before
        self.records = max(0, self.records - 1)

    def read(self) -> list[Record]:
        fd = self._open()
        size = os.fstat(fd).st_size
        chunks = []
        offset = 0
        while offset < size:
            chunk = os.pread(fd, size - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        self.size = offset
        return decode(b"".join(chunks))

    def reset(self) -> None:
        """Empty the journal, durably (after a checkpoint made its records redundant)."""
        fd = self._open()
        os.ftruncate(fd, 0)
        os.fsync(fd)
        self.size = 0
        self.records = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
