"""A session directory: its parts and manifest checked, with clear errors for bad sessions.

A session is valid when its manifest (if any) and every complete part file name a schema
version this engine knows. Parts still being written (`*.tmp`) are ignored, so a
recording can be read while it grows and after it was killed. Each part's Parquet
footer is checked when the session is opened: a truncated or corrupt part is named in
the error rather than failing deep inside a query.

A part the session's index (`index.json`, mailbus.sessions.index) describes as it is
on disk (same name, same size, and the same modification time when the index recorded
one: a stat, not a read) is not checked again: the index was made from its footer and
rows. Opening a 100-part session then stats its parts instead of reading 100 footers.
The index file read for this is kept on the `Session` (`index_file`), so that loading
the index does not read it again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mailbus.extras import needs_extra
from mailbus.sessions.schema import (
    ADDED_COLUMNS,
    COLUMN_NAMES,
    MANIFEST,
    METADATA_VERSION_KEY,
    PART_PREFIX,
    PART_SUFFIX,
    SCHEMA_VERSION,
    arrow_schema,
)

with needs_extra("mailbus.sessions"):
    import polars as pl
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]


INDEX_FILE = "index.json"
INDEX_FORMAT = "mailbus-session-index"
INDEX_VERSION = 1


class SessionError(Exception):
    """A session cannot be read; the message says which file and why."""


class EmptySessionError(SessionError):
    """The session holds no complete part (nothing recorded yet, or killed early)."""


class NewerSchemaError(SessionError):
    """The session was written with a schema version this engine does not know."""


class TruncatedPartError(SessionError):
    """A part file is truncated or corrupt."""


@dataclass(frozen=True, slots=True)
class IndexFile:
    """The content of a session's index file as read when the session was opened, with
    the file's stat signature then (a reader re-reads it when the file has changed)."""

    signature: tuple[int, int, int]  # (inode, size, mtime_ns)
    data: Mapping[str, Any]


@dataclass(frozen=True)
class Session:
    """An opened session: its directory, manifest (empty if missing) and part files."""

    path: Path
    manifest: dict[str, Any]
    parts: tuple[Path, ...]
    skipped: tuple[tuple[Path, str], ...] = field(default=())
    label: str = ""
    index_file: IndexFile | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.label or self.path.name

    @property
    def rows(self) -> int:
        return sum(pq.ParquetFile(p).metadata.num_rows for p in self.parts)

    @property
    def complete(self) -> bool:
        return self.manifest.get("status") == "complete"

    def scan(self, *, with_session: bool = True) -> pl.LazyFrame:
        """All parts as one polars LazyFrame (an empty frame for an empty session)."""
        if not self.parts:
            frame = pl.from_arrow(arrow_schema().empty_table())
            assert isinstance(frame, pl.DataFrame)
            lazy = frame.lazy()
        else:
            # Parts written before a column was added lack it: read as null.
            lazy = pl.scan_parquet(
                [str(p) for p in self.parts], schema=_polars_schema(), missing_columns="insert"
            )
        if with_session:
            lazy = lazy.with_columns(session=pl.lit(self.name, dtype=pl.String))
        return lazy

    def read(self) -> pl.DataFrame:
        return self.scan().collect()

    def arrow(self) -> pa.Table:
        if not self.parts:
            return arrow_schema().empty_table()
        return pa.concat_tables(_with_added_columns(pq.read_table(p)) for p in self.parts)


def _polars_schema() -> pl.Schema:
    frame = pl.from_arrow(arrow_schema().empty_table())
    assert isinstance(frame, pl.DataFrame)
    return frame.schema


def _with_added_columns(table: pa.Table) -> pa.Table:
    schema = arrow_schema()
    for name in ADDED_COLUMNS:
        if name not in table.column_names:
            kind = schema.field(name).type
            table = table.append_column(name, pa.nulls(table.num_rows, type=kind))
    return table.select(list(COLUMN_NAMES))


def _version_of(value: object, where: str) -> int:
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    try:
        return int(str(value))
    except ValueError:
        raise SessionError(f"{where}: schema version {value!r} is not a number") from None


def _check_version(version: int, where: str) -> None:
    if version > SCHEMA_VERSION:
        raise NewerSchemaError(
            f"{where} was written with session schema version {version}; this mailbus "
            f"reads versions up to {SCHEMA_VERSION}. Upgrade mailbus to read it."
        )
    if version < 1:
        raise SessionError(f"{where}: schema version {version} is not valid")


def _check_part(path: Path) -> None:
    try:
        metadata = pq.read_metadata(path)
    except (pa.ArrowException, OSError) as exc:
        raise TruncatedPartError(
            f"part {path} is truncated or corrupt ({exc}); it was probably cut off "
            "while written. Move it away (or pass skip_bad_parts=True / --skip-bad-parts) "
            "to read the rest of the session."
        ) from None
    kv = metadata.metadata or {}
    if METADATA_VERSION_KEY not in kv:
        raise SessionError(f"part {path} is not a mailbus session part (no schema version)")
    _check_version(_version_of(kv[METADATA_VERSION_KEY], f"part {path}"), f"part {path}")
    names = set(metadata.schema.to_arrow_schema().names)
    missing = [c for c in COLUMN_NAMES if c not in names and c not in ADDED_COLUMNS]
    if missing:
        raise SessionError(f"part {path} lacks columns {', '.join(missing)}")


def index_signature(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime_ns) of file `path`, None when there is none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def read_index_file(directory: Path) -> IndexFile | None:
    """The index file of `directory` parsed, or None when it is missing, unreadable or
    not a mailbus index (mailbus.sessions.index then says why and rebuilds it)."""
    path = directory / INDEX_FILE
    before = index_signature(path)
    if before is None:
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        return None
    after = index_signature(path)
    if after != before:  # replaced while read: let the index's loader read it again
        return None
    return IndexFile(before, data)


def _described_parts(index: IndexFile | None, parts: Sequence[Path]) -> set[Path]:
    """The parts `index` describes as they are on disk: same position and name, same
    size, and the same modification time where the index recorded one."""
    if index is None:
        return set()
    version = index.data.get("version")
    entries = index.data.get("parts")
    if not isinstance(version, int) or version > INDEX_VERSION or not isinstance(entries, list):
        return set()
    trusted: set[Path] = set()
    for part, entry in zip(parts, entries, strict=False):
        if not isinstance(entry, dict) or entry.get("file") != part.name:
            break
        try:
            st = part.stat()
        except OSError:
            break
        mtime = entry.get("mtime_ns")
        if entry.get("bytes") != st.st_size or (mtime is not None and mtime != st.st_mtime_ns):
            continue  # this part's footer is checked; the index's loader compares it
        trusted.add(part)
    return trusted


def open_directory(
    path: str | os.PathLike[str],
    *,
    allow_empty: bool = True,
    skip_bad_parts: bool = False,
    label: str = "",
) -> Session:
    """Open the session in directory `path` (`reader.open_session` opens MCAP files too).

    Raises SessionError (with subclasses NewerSchemaError, TruncatedPartError and, when
    `allow_empty` is false, EmptySessionError). With `skip_bad_parts`, truncated parts
    are left out and listed in `Session.skipped` instead.
    """
    directory = Path(path)
    if not directory.exists():
        raise SessionError(f"no session at {directory}: no such directory")
    if not directory.is_dir():
        raise SessionError(f"{directory} is not a session directory (a session is a folder)")
    manifest: dict[str, Any] = {}
    manifest_path = directory / MANIFEST
    if manifest_path.exists():
        try:
            text = manifest_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:  # a directory, unreadable, not UTF-8
            raise SessionError(f"{manifest_path} cannot be read: {exc}") from None
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise SessionError(f"{manifest_path} is not valid JSON: {exc}") from None
        except RecursionError:  # "[[[[..." deeper than the parser's stack
            raise SessionError(
                f"{manifest_path} is not a session manifest: JSON nested too deeply"
            ) from None
        if not isinstance(loaded, dict):
            raise SessionError(f"{manifest_path} is not a JSON object")
        manifest = loaded
        if "schema_version" not in manifest:
            raise SessionError(f"{manifest_path} names no schema_version")
        _check_version(
            _version_of(manifest["schema_version"], str(manifest_path)), str(manifest_path)
        )
    parts = sorted(
        p
        for p in directory.iterdir()
        if p.name.startswith(PART_PREFIX) and p.name.endswith(PART_SUFFIX) and p.is_file()
    )
    if not manifest and not parts:
        raise SessionError(f"{directory} holds no mailbus session (no manifest, no parts)")
    index_file = read_index_file(directory)
    described = _described_parts(index_file, parts)
    good: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for part in parts:
        if part in described:
            good.append(part)
            continue
        try:
            _check_part(part)
        except TruncatedPartError as exc:
            if not skip_bad_parts:
                raise
            skipped.append((part, str(exc)))
            continue
        good.append(part)
    session = Session(directory, manifest, tuple(good), tuple(skipped), label, index_file)
    if not good and not allow_empty:
        raise EmptySessionError(
            f"session {directory} is empty: no complete part file"
            + (" (recording still running or killed before its first part)" if parts == [] else "")
        )
    return session
