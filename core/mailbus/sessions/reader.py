"""Open a session (a directory, or an MCAP file) as one lazy dataset, with clear errors
for bad sessions.

A session is valid when its manifest (if any) and every complete part file name a schema
version this engine knows. Parts still being written (`*.tmp`) are ignored, so a
recording can be read while it grows and after it was killed. Each part's Parquet
footer is checked when the session is opened (mailbus.sessions.session_dir): a
truncated or corrupt part is named in the error rather than failing deep inside a query.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mailbus.extras import needs_extra
from mailbus.sessions import mcap_import
from mailbus.sessions.session_dir import (
    EmptySessionError,
    NewerSchemaError,
    Session,
    SessionError,
    TruncatedPartError,
    open_directory,
)

with needs_extra("mailbus.sessions"):
    import polars as pl

__all__ = [
    "EmptySessionError",
    "NewerSchemaError",
    "Session",
    "SessionError",
    "TruncatedPartError",
    "expand_paths",
    "open_session",
    "open_sessions",
    "scan",
    "scan_parts",
]


def open_session(
    path: str | os.PathLike[str],
    *,
    allow_empty: bool = True,
    skip_bad_parts: bool = False,
    label: str = "",
) -> Session:
    """Open the session in directory `path`, or the MCAP file `path` (converted once into
    a cached session, mailbus.sessions.mcap_import).

    Raises SessionError (with subclasses NewerSchemaError, TruncatedPartError and, when
    `allow_empty` is false, EmptySessionError). With `skip_bad_parts`, truncated parts
    are left out and listed in `Session.skipped` instead.
    """
    if mcap_import.is_mcap(Path(path)):
        return mcap_import.open_mcap(
            Path(path), allow_empty=allow_empty, skip_bad_parts=skip_bad_parts, label=label
        )
    return open_directory(path, allow_empty=allow_empty, skip_bad_parts=skip_bad_parts, label=label)


def open_sessions(paths: Iterable[str | os.PathLike[str]], **kwargs: Any) -> list[Session]:
    """Open several sessions; labels are made unique when directory names repeat."""
    sessions = [open_session(p, **kwargs) for p in paths]
    seen: dict[str, int] = {}
    result: list[Session] = []
    for s in sessions:
        n = seen.get(s.name, 0)
        seen[s.name] = n + 1
        result.append(
            s
            if n == 0
            else Session(s.path, s.manifest, s.parts, s.skipped, f"{s.name}#{n}", s.index_file)
        )
    return result


def scan(paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str]) -> pl.LazyFrame:
    """One polars LazyFrame over one or more sessions, with a `session` column."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    if not paths:
        raise SessionError("no session given")
    return pl.concat([s.scan() for s in open_sessions(paths)], how="vertical")


GLOB_CHARACTERS = frozenset("*?[")


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """Paths as given, except that one which does not exist and holds `*`, `?` or `[` is
    a glob pattern (for a shell that did not expand it): replaced by the directories (and
    MCAP files) it matches, sorted; a pattern matching none is an error."""
    result: list[str | os.PathLike[str]] = []
    for path in paths:
        text = os.fspath(path)
        if os.path.exists(text) or not GLOB_CHARACTERS & set(text):
            result.append(path)
            continue
        matches = sorted(
            m for m in glob.glob(text) if os.path.isdir(m) or m.lower().endswith(".mcap")
        )
        if not matches:
            raise SessionError(f"no session matches {text}")
        result.extend(matches)
    return result


def scan_parts(sessions: Sequence[Session], columns: Sequence[str]) -> pl.LazyFrame:
    """`columns` of every part of every session as ONE polars scan (the files are read in
    parallel) plus `session`, mapped back from each row's file."""
    owner = {str(p): s.name for s in sessions for p in s.parts}
    if not owner:
        return pl.concat([s.scan().select(*columns, "session") for s in sessions])
    return (
        pl.scan_parquet(list(owner), glob=False, include_file_paths="_file", extra_columns="ignore")
        .select(*columns, "_file")
        .with_columns(session=pl.col("_file").replace_strict(owner, return_dtype=pl.String))
        .drop("_file")
    )
