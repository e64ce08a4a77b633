"""Open an MCAP file as a session: `mailbus open|replay|analyze FILE.mcap`.

`open_session` (mailbus.sessions.reader) hands a `.mcap` file (or any file starting with
MCAP's magic) to `open_mcap`, which converts it ONCE into an ordinary session directory
in a cache (`$XDG_CACHE_HOME/mailbus/mcap/<key>`, the key made of the file's path, size
and modification time) and opens that; the user's file is only ever read. The cache is
bounded (`prune_cache`): after each open, the conversions used least recently are
removed until the cache holds at most `MAILBUS_MCAP_CACHE_MB` megabytes (default
`CACHE_LIMIT_MB`), never the one just opened nor one used in the last
`RECENTLY_USED_S` seconds (another process may be opening it); the removal is said.
Last use is the entry directory's modification time, set at each open. The conversion
streams through the file's chunk index (`mcap.reader`), a chunk at a time, and writes
Parquet parts row group by row group, so memory is bounded by a chunk and a row group.

What is read: channels with JSON messages (`message_encoding` "json", with a `jsonschema`
schema, none, or any other), as Foxglove's, foxglove-sdk's and rosbag2's JSON profiles
write them.
A file `mailbus export` wrote comes back row for row (mailbus.sessions.mcap_format). Any
other message becomes a received message of the channel's topic (see `mailbus_name`) with
a fresh Message-ID, log time as its reception and publish time as its Source-Timestamp.
Channels in another encoding (protobuf, ros1/ros2 CDR, flatbuffer, ...) are refused:
named, counted, left out, said on stderr and in the session manifest's `mcap.refused`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import operator
import os
import re
import shutil
import stat
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mailbus
from mailbus.errors import InvalidNameError
from mailbus.extras import needs_extra
from mailbus.names import MAX_NAME_LENGTH, check_name
from mailbus.sessions import mcap_format as F
from mailbus.sessions.schema import (
    COLUMN_NAMES,
    MANIFEST,
    SCHEMA_VERSION,
    arrow_schema,
    part_name,
)
from mailbus.sessions.session_dir import Session, SessionError
from mailbus.sessions.session_dir import open_directory as open_session

with needs_extra("mailbus.sessions"):
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]
    import zstandard
    from mcap.exceptions import McapError
    from mcap.reader import make_reader
    from mcap.records import Channel, DataEnd, Message, Metadata, Schema
    from mcap.stream_reader import StreamReader

MAGIC = b"\x89MCAP0\r\n"
CACHE_LIMIT_MB = 4_096  # the conversion cache's default bound
CACHE_LIMIT_ENV = "MAILBUS_MCAP_CACHE_MB"
RECENTLY_USED_S = 60.0
STALE_TEMP_S = 86_400.0  # a conversion's temporary directory this old was abandoned
_KEY = re.compile(r"[0-9a-f]{32}")
# Bumped when the conversion changes, so that older conversions in the cache are redone.
CONVERSION_VERSION = "1"
ROW_GROUP_ROWS = 32_768
PART_ROWS = 1_048_576
INT64_MAX = 2**63 - 1
# Errors the mcap library and its decompressors raise on a damaged file.
_DAMAGE = (
    McapError,
    ValueError,
    struct.error,
    EOFError,
    IndexError,
    KeyError,
    OverflowError,
    zstandard.ZstdError,
)
# What names.check_name refuses inside a name: control characters and line separators.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

Report = Callable[[str], None]


class McapFileError(SessionError):
    """An MCAP file cannot be read; the message says which and why."""


def _stderr(line: str) -> None:
    print(f"mailbus: {line}", file=sys.stderr, flush=True)


def is_mcap(path: Path) -> bool:
    """Whether `open_session` should read `path` as MCAP: a file (not a directory) named
    *.mcap, or one that starts with MCAP's magic bytes whatever its name."""
    try:
        if path.is_dir():
            return False
    except OSError:  # a directory on the way that cannot be searched: open says why
        return path.suffix.lower() == ".mcap"
    if path.suffix.lower() == ".mcap":
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def mailbus_name(topic: str) -> str:
    """A valid Mailbus name for an MCAP topic: one leading `/` dropped (ROS and Foxglove
    topics start with one; `mailbus export` adds it), control characters replaced by `_`,
    surrounding white space stripped, a name longer than 255 characters cut and ended
    with a hash of the topic, an empty one named `mcap/` + that hash."""
    name = topic[1:] if topic.startswith("/") else topic
    name = _CONTROL.sub("_", name).strip()
    digest = hashlib.sha256(topic.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    if not name:
        return "mcap/" + digest
    if len(name) > MAX_NAME_LENGTH:
        name = name[: MAX_NAME_LENGTH - 13].rstrip() + "~" + digest
    return name


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mailbus" / "mcap"


def open_mcap(
    path: str | os.PathLike[str],
    *,
    allow_empty: bool = True,
    skip_bad_parts: bool = False,
    label: str = "",
    report: Report | None = _stderr,
) -> Session:
    """The session of MCAP file `path`, converted on first use (McapFileError, a
    SessionError, when the file cannot be read)."""
    source = Path(path)
    try:
        info = source.stat()
    except FileNotFoundError:
        raise McapFileError(f"no MCAP file at {source}: no such file") from None
    except OSError as exc:
        raise McapFileError(f"cannot read {source}: {exc.strerror or exc}") from None
    if source.is_dir():
        raise McapFileError(f"{source} is a directory, not an MCAP file")
    if info.st_size == 0:
        raise McapFileError(f"{source} is empty (0 bytes), not an MCAP file")
    try:
        with open(source, "rb") as handle:
            magic = handle.read(len(MAGIC))
    except OSError as exc:
        raise McapFileError(f"cannot read {source}: {exc.strerror or exc}") from None
    if magic != MAGIC:
        raise McapFileError(f"{source} is not an MCAP file (it does not start with MCAP's magic)")
    key = hashlib.sha256(
        "\0".join(
            (str(source.resolve()), str(info.st_size), str(info.st_mtime_ns), CONVERSION_VERSION)
        ).encode("utf-8", "surrogatepass")
    ).hexdigest()[:32]
    target = _cached(key)
    if target is None:
        target = _convert_into_cache(source, key, report)
    _use(target, report)
    session = open_session(
        target, allow_empty=allow_empty, skip_bad_parts=skip_bad_parts, label=label or source.name
    )
    if report is not None:
        for refused in session.manifest.get("mcap", {}).get("refused", []):
            report(_refusal_line(source, refused))
    return session


def cache_limit_bytes(report: Report | None = None) -> int:
    """The cache's bound: `MAILBUS_MCAP_CACHE_MB` (megabytes, >= 0) or CACHE_LIMIT_MB."""
    text = os.environ.get(CACHE_LIMIT_ENV, "").strip()
    if text:
        try:
            megabytes = float(text)
        except ValueError:
            megabytes = -1.0
        if megabytes >= 0 and megabytes == megabytes and megabytes != float("inf"):
            return int(megabytes * 2**20)
        if report is not None:
            report(
                f"{CACHE_LIMIT_ENV}={text!r} is not a number of megabytes (>= 0): "
                f"the MCAP cache keeps its default bound of {CACHE_LIMIT_MB} MB"
            )
    return CACHE_LIMIT_MB * 2**20


def _use(target: Path, report: Report | None) -> None:
    """Mark `target` used now, and bound the cache it is in (a failure to do either
    never fails the open: the conversion is there)."""
    with contextlib.suppress(OSError):
        os.utime(target)
    try:
        removed = prune_cache(target.parent, cache_limit_bytes(report), keep=target)
    except OSError:
        return
    if removed and report is not None:
        freed = sum(size for _, size in removed) / 2**20
        report(
            f"removed {len(removed)} MCAP conversion(s) used least recently from "
            f"{target.parent} ({freed:.1f} MB; the cache keeps at most "
            f"{cache_limit_bytes() / 2**20:.0f} MB, {CACHE_LIMIT_ENV})"
        )


def _tree_bytes(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def prune_cache(
    root: Path, limit_bytes: int, *, keep: Path | None = None, now: float | None = None
) -> list[tuple[Path, int]]:
    """Remove the conversions in `root` used least recently until those left total at
    most `limit_bytes`; `keep` (the one in use) and those used in the last
    RECENTLY_USED_S seconds stay whatever their size. Temporary directories of
    conversions abandoned STALE_TEMP_S ago go too. Returns what was removed, with sizes.
    Each is first renamed out of the way (atomically: no one opens half of it)."""
    if not _ours(root):
        return []
    now = time.time() if now is None else now
    entries: list[tuple[float, Path, int]] = []
    for child in root.iterdir():
        try:
            st = child.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        if child.name.startswith("."):
            if now - st.st_mtime > STALE_TEMP_S:
                shutil.rmtree(child, ignore_errors=True)
            continue
        if _KEY.fullmatch(child.name):
            entries.append((st.st_mtime, child, _tree_bytes(child)))
    total = sum(size for _, _, size in entries)
    removed: list[tuple[Path, int]] = []
    for used, child, size in sorted(entries, key=lambda e: e[0]):
        if total <= limit_bytes:
            break
        if child == keep or now - used < RECENTLY_USED_S:
            continue
        doomed = root / f".{child.name}.removing"
        try:
            os.replace(child, doomed)
        except OSError:
            continue
        shutil.rmtree(doomed, ignore_errors=True)
        total -= size
        removed.append((child, size))
    return removed


def _refusal_line(source: Path, refused: dict[str, Any]) -> str:
    schema = f", schema {refused['schema']!r}" if refused.get("schema") else ""
    return (
        f"{source.name}: skipped channel {refused['topic']!r} "
        f"(message encoding {refused['message_encoding']!r}{schema}): "
        f"{refused['messages']} messages; only JSON channels are read"
    )


def _roots() -> list[Path]:
    # A read-only home: the conversion goes to the temporary directory instead.
    return [cache_root(), Path(tempfile.gettempdir()) / f"mailbus-mcap-{os.getuid()}"]


def _ours(root: Path) -> bool:
    """Whether `root` is a directory of this user that no one else may write: in a
    shared temporary directory another user could have made it, to plant sessions."""
    try:
        st = root.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _cached(key: str) -> Path | None:
    for root in _roots():
        if not _ours(root):
            continue
        candidate = root / key
        if (candidate / MANIFEST).is_file():
            return candidate
    return None


def _convert_into_cache(source: Path, key: str, report: Report | None) -> Path:
    problems = []
    for root in _roots():
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _ours(root):
                problems.append(f"{root}: not a directory of this user's alone")
                continue
            temp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        except OSError as exc:
            problems.append(f"{root}: {exc.strerror or exc}")
            continue
        target = root / key
        try:
            if report is not None:
                report(f"reading {source} into a session (once; kept in {target})")
            started = time.monotonic()
            manifest = convert(source, temp)
            os.replace(temp, target)
        except OSError as exc:
            shutil.rmtree(temp, ignore_errors=True)
            if (target / MANIFEST).is_file():  # another process converted it meanwhile
                return target
            problems.append(f"{root}: {exc.strerror or exc}")
            continue
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        if report is not None:
            counts = manifest["counts"]
            report(
                f"read {counts['events']} events from {source.name} "
                f"in {time.monotonic() - started:.1f}s"
            )
        return target
    raise McapFileError(f"cannot convert {source}: no writable cache ({'; '.join(problems)})")


class _PartWriter:
    """Rows to Parquet parts of at most PART_ROWS rows, ROW_GROUP_ROWS per row group."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.schema = arrow_schema(mailbus.__version__)
        self.pending: list[tuple[Any, ...]] = []
        self._values = operator.itemgetter(*COLUMN_NAMES)
        self.parts: list[dict[str, Any]] = []
        self.by_kind: dict[str, int] = {}
        self.rows = 0
        self._writer: Any = None
        self._part_rows = 0
        self._first = self._last = 0

    def add(self, row: dict[str, Any]) -> None:
        self.pending.append(self._values(row))
        self.by_kind[row["kind"]] = self.by_kind.get(row["kind"], 0) + 1
        if len(self.pending) >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        count = len(self.pending)
        if not count:
            return
        columns = dict(zip(COLUMN_NAMES, map(list, zip(*self.pending, strict=True)), strict=True))
        self.pending = []
        times = columns["recorded_ns"]
        first, last = min(times), max(times)
        table = pa.Table.from_pydict(columns, schema=self.schema)
        if self._writer is None:
            name = part_name(len(self.parts) + 1)
            self._writer = pq.ParquetWriter(
                self.directory / name, self.schema, compression="zstd", compression_level=3
            )
            self.parts.append({"file": name})
            self._part_rows, self._first, self._last = 0, first, last
        self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self._part_rows += count
        self._first, self._last = min(self._first, first), max(self._last, last)
        self.rows += count
        if self._part_rows >= PART_ROWS:
            self._close_part()

    def _close_part(self) -> None:
        self._writer.close()
        self._writer = None
        part = self.parts[-1]
        part.update(
            rows=self._part_rows,
            bytes=(self.directory / part["file"]).stat().st_size,
            first_ns=self._first,
            last_ns=self._last,
        )

    def close(self) -> None:
        self._flush()
        if self._writer is not None:
            self._close_part()


class _Conversion:
    """One pass over an MCAP file's messages, making session rows."""

    def __init__(self, source: Path, key_text: str, writer: _PartWriter) -> None:
        self.source = source
        self.key_text = key_text
        self.writer = writer
        self.accepted: dict[int, Channel] = {}
        self.refused: dict[int, dict[str, Any]] = {}
        self.names: dict[str, str] = {}  # topic -> Mailbus name
        self.taken: set[str] = set()
        self.gids: dict[str, str] = {}
        self.pending_envelopes: dict[tuple[str, int, int], dict[str, Any]] = {}
        self.pending_bodies: dict[tuple[str, int, int], Message] = {}
        self.foreign = self.restored = self.bad_envelopes = self.missing_bodies = 0
        self.messages = 0
        self.next_index = 0

    # -- channels ------------------------------------------------------------------------
    def admit(self, channel: Channel, schema: Schema | None) -> bool:
        if channel.id in self.accepted:
            return True
        if channel.id in self.refused:
            return False
        schema_encoding = schema.encoding if schema is not None else ""
        # JSON data is read whatever describes it (jsonschema, none, or a ROS message
        # definition): the schema is not needed to keep the message.
        if channel.message_encoding == "json":
            self.accepted[channel.id] = channel
            return True
        self.refused[channel.id] = {
            "topic": channel.topic,
            "message_encoding": channel.message_encoding,
            "schema_encoding": schema_encoding,
            "schema": schema.name if schema is not None else "",
            "messages": 0,
        }
        return False

    def name_of(self, topic: str) -> str:
        name = self.names.get(topic)
        if name is None:
            base = name = mailbus_name(topic)
            n = 1
            while name in self.taken:  # two topics, one name: the later one numbered
                n += 1
                name = f"{base}~{n}"
            try:
                check_name(name, "topic")
            except InvalidNameError:  # what the rules above cannot mend
                name = "mcap/" + hashlib.sha256(topic.encode("utf-8", "replace")).hexdigest()[:12]
            self.names[topic] = name
            self.taken.add(name)
        return name

    # -- messages ------------------------------------------------------------------------
    def take(self, channel: Channel, message: Message) -> None:
        self.messages += 1
        role = channel.metadata.get(F.ROLE_KEY)
        if role == "events":
            self._envelope(message)
        elif role == "body" and F.NAME_KEY in channel.metadata:
            key = (channel.topic, message.sequence, message.log_time)
            row = self.pending_envelopes.pop(key, None)
            if row is None:
                self.pending_bodies[key] = message
            else:
                self._restore(row, message)
        else:
            self._foreign(channel, message)

    def _envelope(self, message: Message) -> None:
        try:
            env = json.loads(message.data)
            if not isinstance(env, dict):
                raise ValueError("not a JSON object")
            row = F.row_from_envelope(env)
            channel = env.get("body_channel")
            if channel is not None:
                encoding = env.get("body_encoding")
                if encoding not in F.BODY_ENCODINGS:
                    raise ValueError(f"body_encoding {encoding!r}")
                row["_body"] = (str(channel), encoding)
        except (ValueError, RecursionError, TypeError):
            self.bad_envelopes += 1
            return
        if "_body" not in row:
            self.restored += 1
            self._emit(row)
            return
        key = (row["_body"][0], message.sequence, message.log_time)
        body = self.pending_bodies.pop(key, None)
        if body is None:
            self.pending_envelopes[key] = row
        else:
            self._restore(row, body)

    def _restore(self, row: dict[str, Any], body: Message) -> None:
        _, encoding = row.pop("_body")
        try:
            row["body"] = F.body_from_message(body.data, encoding)
        except (ValueError, KeyError, TypeError):
            row["body"] = body.data
        self.restored += 1
        self._emit(row)

    def _foreign(self, channel: Channel, message: Message) -> None:
        topic = channel.topic
        name = self.name_of(topic)
        gid = self.gids.get(topic)
        if gid is None:
            gid = self.gids[topic] = hashlib.sha256(
                f"{self.key_text}\0{topic}".encode("utf-8", "surrogatepass")
            ).hexdigest()[:32]
        data = bytes(message.data)
        self.foreign += 1
        # MCAP times are uint64; past int64 (the year 2262) they are no time at all.
        log_time = min(message.log_time, INT64_MAX)
        publish_time = min(message.publish_time, INT64_MAX) or log_time
        index = self.next_index
        self._emit(
            {
                "event_index": index,
                "kind": F.RECEIVED,
                "recorded_ns": log_time,
                "source_ns": publish_time,
                "reception_ns": log_time,
                "name": name,
                "gid": None,
                "source_gid": gid,
                # MCAP: 0 means the publisher kept no sequence numbers.
                "sequence_number": message.sequence or None,
                "message_id": f"<mcap.{index}.{self.key_text[:16]}@mailbus.invalid>",
                "in_reply_to": None,
                "references": None,
                "headers": None,
                "body": data,
                "body_size": len(data),
                "body_truncated": False,
                "detail": "message",
                "extra": json.dumps(
                    {"mcap_channel": channel.id, "mcap_topic": topic}, ensure_ascii=False
                ),
                "transport": "mcap",
                "participant": None,
                "signature": None,
                "raw": None,
            }
        )

    def _emit(self, row: dict[str, Any]) -> None:
        # Rows of an exported session keep their event_index; later foreign rows follow.
        self.next_index = max(self.next_index, row["event_index"] + 1)
        self.writer.add(row)

    def finish(self) -> None:
        """What was left unpaired: envelopes keep a null body, bodies become messages."""
        for row in self.pending_envelopes.values():
            row.pop("_body", None)
            row["body"] = None
            self.missing_bodies += 1
            self._emit(row)
        self.pending_envelopes.clear()
        for (topic, _, _), message in self.pending_bodies.items():
            channel = next(c for c in self.accepted.values() if c.topic == topic)
            self._foreign(channel, message)
        self.pending_bodies.clear()


def convert(source: Path, directory: Path) -> dict[str, Any]:
    """Convert MCAP file `source` into a session in the empty `directory`; returns the
    manifest written (McapFileError when the file is damaged)."""
    writer = _PartWriter(directory)
    key_text = hashlib.sha256(str(source.resolve()).encode("utf-8", "surrogatepass")).hexdigest()
    conversion = _Conversion(source, key_text, writer)
    header_profile = header_library = ""
    original: dict[str, Any] = {}
    try:
        with open(source, "rb") as handle:
            reader = make_reader(handle, validate_crcs=True)
            header = reader.get_header()
            header_profile, header_library = header.profile, header.library
            # The footer and summary first: a truncated file is refused before any work.
            summary = reader.get_summary()
            schemas: dict[int, Schema] = dict(summary.schemas) if summary else {}
            channels: dict[int, Channel] = dict(summary.channels) if summary else {}
            handle.seek(0)
            # Then the data section front to back, one chunk decompressed at a time: all
            # of it is converted, so the chunk index would skip nothing. (The indexed
            # reader is no help here: in file order mcap 1.6 decompresses every chunk
            # before it yields a message, in log time order it pays a heap per message.)
            for record in StreamReader(handle, validate_crcs=True).records:
                if isinstance(record, Message):
                    channel = channels.get(record.channel_id)
                    if channel is None:
                        raise McapError(f"a message of channel {record.channel_id}, never defined")
                    schema = schemas.get(channel.schema_id) if channel.schema_id else None
                    if conversion.admit(channel, schema):
                        conversion.take(channel, record)
                    else:
                        conversion.refused[channel.id]["messages"] += 1
                elif isinstance(record, Channel):
                    channels[record.id] = record
                elif isinstance(record, Schema):
                    schemas[record.id] = record
                elif isinstance(record, Metadata) and record.name == F.METADATA_NAME:
                    original = _original_manifest(record)
                elif isinstance(record, DataEnd):
                    break  # the summary follows, read above
            conversion.finish()
        writer.close()
    except _DAMAGE as exc:
        raise McapFileError(_damage_line(source, exc)) from None
    manifest = _manifest(source, writer, conversion, original, header_profile, header_library)
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _original_manifest(record: Metadata) -> dict[str, Any]:
    """The manifest of the session `mailbus export` wrote (empty if unreadable)."""
    try:
        loaded = json.loads(record.metadata.get("manifest", "{}"))
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _damage_line(source: Path, exc: BaseException) -> str:
    try:
        with open(source, "rb") as handle:
            handle.seek(-len(MAGIC), os.SEEK_END)
            ends_well = handle.read() == MAGIC
    except OSError:
        ends_well = False
    what = str(exc) or type(exc).__name__
    if not ends_well:
        return (
            f"{source} is truncated: it does not end with MCAP's magic (cut off while "
            f"written?); `mcap recover` (the mcap CLI) can rewrite what it holds ({what})"
        )
    return f"{source} is corrupt: {what}"


def _manifest(
    source: Path,
    writer: _PartWriter,
    conversion: _Conversion,
    original: dict[str, Any],
    profile: str,
    library: str,
) -> dict[str, Any]:
    info = source.stat()
    kept: dict[str, Any] = {
        k: original[k]
        for k in ("participant", "transport", "body_cap", "raw_cap", "filters", "start_ns")
        if k in original
    }
    firsts = [p["first_ns"] for p in writer.parts]
    lasts = [p["last_ns"] for p in writer.parts]
    counts = original.get("counts")
    original_counts: dict[str, Any] = counts if isinstance(counts, dict) else {}
    return {
        "format": "mailbus-session",
        "schema_version": SCHEMA_VERSION,
        "engine_version": mailbus.__version__,
        "status": "complete",
        "start_ns": min(firsts) if firsts else None,
        "end_ns": max(lasts) if lasts else None,
        "participant": None,
        "transport": "mcap",
        **kept,
        "counts": {
            "events": writer.rows,
            "dropped": int(original_counts.get("dropped", 0) or 0),
            "filtered": 0,
            "fields_nulled": 0,
            "by_kind": writer.by_kind,
        },
        "parts": writer.parts,
        "mcap": {
            "file": str(source.resolve()),
            "size": info.st_size,
            "mtime_ns": info.st_mtime_ns,
            "profile": profile,
            "library": library,
            "messages_read": conversion.messages,
            "rows_restored": conversion.restored,
            "foreign_messages": conversion.foreign,
            "bad_envelopes": conversion.bad_envelopes,
            "bodies_missing": conversion.missing_bodies,
            "names": {t: n for t, n in conversion.names.items() if t != "/" + n},
            "refused": sorted(conversion.refused.values(), key=lambda r: str(r["topic"])),
        },
    }
