"""Export: messages and service calls as rows written to JSON Lines, CSV or Parquet (the
format from the file's suffix), one message as JSON, and the path a dialog suggests.

Rows are what the lists show, one column per field (docs/workbench.md, "Share"). A file
is written beside its destination and renamed into place, so a failed export leaves
whatever was there before untouched."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
from mailbus.trace import TraceEvent

from mailbus_workbench.model.inspect import pretty_body
from mailbus_workbench.model.services import Trace
from mailbus_workbench.model.topics import MessageRecord

# File suffix -> format.
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}
TABLE_SUFFIXES = (".csv", ".jsonl", ".parquet")

MESSAGE_SCHEMA: dict[str, Any] = {
    "topic": pl.String,
    "number": pl.Int64,
    "time_utc": pl.String,
    "reception_timestamp_ns": pl.Int64,
    "source_timestamp_ns": pl.Int64,
    "message_id": pl.String,
    "publisher_gid": pl.String,
    "size": pl.Int64,
    "headers": pl.String,  # a JSON object: the email's Mailbus headers
    "body": pl.String,
}

CALL_SCHEMA: dict[str, Any] = {
    "service": pl.String,
    "sequence": pl.Int64,
    "status": pl.String,
    "started_utc": pl.String,
    "latency_ms": pl.Float64,
    "client_gid": pl.String,
    "server_gid": pl.String,
    "request_id": pl.String,
    "response_id": pl.String,
    "request_body": pl.String,
    "response_body": pl.String,
}


class ExportError(Exception):
    """An export that cannot be written; the message says why."""


class ExportExists(ExportError):
    """The file exists: write it again with `overwrite=True` once the user agrees."""


def utc_text(seconds: float) -> str:
    """A time as ISO 8601 UTC with milliseconds: 2027-01-15T08:00:00.250Z."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def message_rows(records: Iterable[MessageRecord]) -> list[dict[str, Any]]:
    rows = []
    for record in records:
        event = record.event
        rows.append(
            {
                "topic": event.name,
                "number": record.number,
                "time_utc": utc_text(record.time_s),
                "reception_timestamp_ns": event.reception_timestamp_ns,
                "source_timestamp_ns": event.source_timestamp_ns,
                "message_id": event.message_id,
                "publisher_gid": event.source_gid,
                "size": event.size,
                "headers": json.dumps(dict(event.headers), ensure_ascii=False),
                "body": record.body,
            }
        )
    return rows


def call_rows(traces: Iterable[Trace], now: float, timeout_s: float) -> list[dict[str, Any]]:
    rows = []
    for trace in traces:
        latency = trace.latency_s
        rows.append(
            {
                "service": trace.service,
                "sequence": trace.sequence,
                "status": trace.status(now, timeout_s).value,
                "started_utc": utc_text(trace.started_s),
                "latency_ms": None if latency is None else round(latency * 1000, 6),
                "client_gid": trace.client_gid,
                "server_gid": trace.server_gid,
                "request_id": trace.request.message_id if trace.request else None,
                "response_id": trace.response.message_id if trace.response else None,
                "request_body": trace.request.body if trace.request else None,
                "response_body": trace.response.body if trace.response else None,
            }
        )
    return rows


def frame(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row")


MESSAGE_JSON_HOLDS = (
    "A JSON document: topic, number, time received (UTC), the email's headers as they"
    " came (raw values; every header of the bytes that arrived, Date, From and"
    " Content-Type too, when they were kept), the body as text and, when it is JSON, parsed."
)


def raw_headers(event: TraceEvent) -> dict[str, str | list[str]]:
    """The email's headers with their values as they came (no UI formatting): the
    Mailbus headers, then, when the bytes that arrived were kept, every other header in
    them (Date, From, MIME-Version, Content-Type, Received...; a repeated one as a list)."""
    headers: dict[str, str | list[str]] = {"Subject": event.name}
    if event.message_id:
        headers["Message-ID"] = event.message_id
    if event.in_reply_to:
        headers["In-Reply-To"] = event.in_reply_to
    headers.update((str(k), str(v)) for k, v in event.headers.items())
    if event.raw is not None:
        known = {name.lower() for name in headers}
        for name, value in _headers_in(event.raw):
            if name.lower() in known:
                continue
            kept = headers.get(name)
            if kept is None:
                headers[name] = value
            elif isinstance(kept, list):
                kept.append(value)
            else:
                headers[name] = [kept, value]
    return headers


def _headers_in(raw: bytes) -> list[tuple[str, str]]:
    """The header fields of an RFC 5322 message in order, unfolded, decoded as UTF-8 (a
    byte that is not becomes U+FFFD, so the JSON stays valid)."""
    head = re.split(rb"\r?\n\r?\n", raw, maxsplit=1)[0].decode("utf-8", "replace")
    unfolded = re.sub(r"\r?\n(?=[ \t])", "", head)
    fields = []
    for line in unfolded.splitlines():
        name, colon, value = line.partition(":")
        if colon and name and not any(c.isspace() for c in name):
            fields.append((name, value.strip(" \t")))
    return fields


def message_json(record: MessageRecord) -> str:
    """One message as a JSON document (MESSAGE_JSON_HOLDS)."""
    event = record.event
    is_json, _ = pretty_body(record.body)
    document: dict[str, Any] = {
        "topic": event.name,
        "number": record.number,
        "time_utc": utc_text(record.time_s),
        "headers": raw_headers(event),
        "body": record.body,
    }
    if is_json:
        document["json"] = json.loads(record.body)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def table_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ExportError(
            f"{path.name}: the file name must end with {', '.join(TABLE_SUFFIXES)} "
            "(the format follows the suffix)"
        )
    return fmt


def write_table(
    rows: list[dict[str, Any]], schema: dict[str, Any], path: Path, *, overwrite: bool = False
) -> int:
    """Write `rows` to `path` in the format its suffix names; return how many."""
    _not_a_folder(path)
    fmt = table_format(path)
    data = frame(rows, schema)
    writers: dict[str, Callable[[Path], None]] = {
        "jsonl": lambda p: data.write_ndjson(p),
        "csv": lambda p: data.write_csv(p),
        "parquet": lambda p: data.write_parquet(p),
    }
    _write(path, writers[fmt], overwrite)
    return data.height


def write_json(text: str, path: Path, *, overwrite: bool = False) -> None:
    _not_a_folder(path)
    if path.suffix.lower() != ".json":
        raise ExportError(f"{path.name}: a message is exported as JSON: end the name with .json")

    def write(temporary: Path) -> None:
        temporary.write_text(text, encoding="utf-8")

    _write(path, write, overwrite)


def read_table(path: Path, schema: dict[str, Any]) -> pl.DataFrame:
    """A file `write_table` wrote, as a frame of `schema` (for tests and notebooks)."""
    fmt = table_format(path)
    if fmt == "parquet":
        return pl.read_parquet(path)
    if fmt == "jsonl":
        return pl.read_ndjson(path, schema=schema)
    return pl.read_csv(path, schema=schema)


def _not_a_folder(path: Path) -> None:
    if path.expanduser().is_dir():
        raise ExportError(f"{path} is a folder: add a file name")


def _write(path: Path, write: Callable[[Path], None], overwrite: bool) -> None:
    path = path.expanduser()
    folder = path.parent
    if not folder.is_dir():
        raise ExportError(f"no folder {folder}: create it first or choose another")
    if path.exists() and not overwrite:
        raise ExportExists(f"{path} exists")
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as exc:
        raise ExportError(f"cannot write in {folder}: {exc.strerror or exc}") from None
    os.close(handle)
    try:
        write(Path(temporary))
        # mkstemp makes the file private (0600): give it the mode a new file gets here,
        # or the mode of the file it replaces.
        os.chmod(temporary, path.stat().st_mode & 0o7777 if path.exists() else _new_file_mode())
        os.replace(temporary, path)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _new_file_mode() -> int:
    umask = os.umask(0o022)  # reading the umask means setting it: put it back at once
    os.umask(umask)
    return 0o666 & ~umask


def suggest_path(name: str, when: float, suffix: str) -> str:
    """`./robot_pose-20270115-080012.csv` for topic `robot/pose` at `when` (UTC)."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "export"
    stamp = datetime.fromtimestamp(when, UTC).strftime("%Y%m%d-%H%M%S")
    return f"./{safe}-{stamp}{suffix}"
