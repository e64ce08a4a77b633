"""Export a session as an MCAP file that Foxglove and Lichtblick open
(`mailbus export SESSION --format mcap --output FILE.mcap`).

The mapping is mailbus.sessions.mcap_format's. Two streaming passes over the parts, row
group by row group, so memory is bounded by one batch and the channels' schemas, never
by the session: the first reads the email rows' names and bodies and infers each
channel's JSON Schema from every body (a channel's schema has to be written before its
first message, so it cannot widen afterwards); the second writes the messages. The file
is written beside the output under a temporary name and renamed when complete.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mailbus
from mailbus.extras import needs_extra
from mailbus.json_shape import Shape, object_schema
from mailbus.sessions import mcap_format as F
from mailbus.sessions.reader import Session
from mailbus.sessions.schema import COLUMN_NAMES

with needs_extra("mailbus.sessions"):
    import pyarrow.parquet as pq  # type: ignore[import-untyped]
    from mcap.writer import CompressionType, Writer

# Chunks of 1 MiB (uncompressed): a seek decompresses at most one (about a millisecond
# with zstd) and a file of a million emails has a few hundred chunk index entries.
CHUNK_SIZE = 1024 * 1024
BATCH_ROWS = 16_384
MAX_NAMES = 65_534  # MCAP channel ids are uint16, 0 unused, one for the events channel

# Where the export reads each column in a row's values (COLUMN_NAMES order).
INDEX, KIND, RECORDED, SOURCE, RECEPTION, NAME, DETAIL, BODY = (
    COLUMN_NAMES.index(c)
    for c in (
        "event_index",
        "kind",
        "recorded_ns",
        "source_ns",
        "reception_ns",
        "name",
        "detail",
        "body",
    )
)
Progress = Callable[[str, int, int], None]  # (phase, rows done, rows in all)


class ExportError(Exception):
    """The session cannot be exported there; the message says why."""


@dataclass
class ChannelPlan:
    """What the first pass learnt of one name's channel."""

    name: str
    shape: Shape = field(default_factory=Shape)
    kinds: set[str] = field(default_factory=set)
    messages: int = 0


@dataclass(frozen=True)
class ExportResult:
    path: Path
    rows: int
    emails: int
    channels: int
    bytes: int
    seconds: float


def _batches(session: Session, columns: tuple[str, ...]) -> Iterator[dict[str, list[Any]]]:
    """The session's rows, a batch at a time, as lists per column (a column an older
    part lacks reads as nulls)."""
    for part in session.parts:
        handle = pq.ParquetFile(part)
        present = set(handle.schema_arrow.names)
        wanted = [c for c in columns if c in present]
        for batch in handle.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
            lists = {c: batch.column(c).to_pylist() for c in wanted}
            for c in columns:
                if c not in lists:
                    lists[c] = [None] * batch.num_rows
            yield lists


def plan_channels(session: Session, progress: Progress | None = None) -> dict[str, ChannelPlan]:
    """The first pass: every name that carries emails, with the shape of its bodies."""
    plans: dict[str, ChannelPlan] = {}
    total, done = session.rows, 0
    for batch in _batches(session, ("kind", "detail", "name", "body")):
        for kind, detail, name, body in zip(
            batch["kind"], batch["detail"], batch["name"], batch["body"], strict=True
        ):
            what = F.email_what(kind, detail)
            if what is None or name is None:
                continue
            plan = plans.get(name)
            if plan is None:
                plan = plans[name] = ChannelPlan(name)
            plan.kinds.add(what)
            plan.messages += 1
            plan.shape.widen(F.body_message(body)[2])
        done += len(batch["kind"])
        if progress is not None:
            progress("reading bodies", done, total)
    return plans


def export_mcap(
    session: Session,
    output: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> ExportResult:
    """Write `session` to `output` as MCAP (ExportError when `output` cannot be written,
    or exists and `overwrite` is false)."""
    started = time.monotonic()
    out = Path(output)
    if out.is_dir():
        raise ExportError(f"{out} is a directory; give a file name such as {out}/session.mcap")
    if out.exists() and not overwrite:
        raise ExportError(f"{out} exists; pass --force to replace it")
    if not out.parent.is_dir():
        raise ExportError(f"cannot write {out}: no directory {out.parent}")
    plans = plan_channels(session, progress)
    if len(plans) > MAX_NAMES:
        raise ExportError(
            f"the session has {len(plans)} topics and services; an MCAP file holds at most "
            f"{MAX_NAMES + 1} channels (one is the events channel)"
        )
    temp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as handle:
            rows, emails = _write(session, handle, plans, progress)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, out)
    except OSError as exc:
        raise ExportError(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        if temp.exists():
            temp.unlink()
    return ExportResult(
        out, rows, emails, len(plans), out.stat().st_size, time.monotonic() - started
    )


def _write(
    session: Session, handle: Any, plans: dict[str, ChannelPlan], progress: Progress | None
) -> tuple[int, int]:
    writer = Writer(handle, chunk_size=CHUNK_SIZE, compression=CompressionType.ZSTD)
    writer.start(profile=F.PROFILE, library=f"mailbus {mailbus.__version__}")
    writer.add_metadata(
        F.METADATA_NAME,
        {
            "format_version": F.FORMAT_VERSION,
            "session": session.name,
            "manifest": json.dumps(session.manifest, sort_keys=True, default=str),
        },
    )
    events_schema = writer.register_schema(
        F.EVENTS_SCHEMA, "jsonschema", json.dumps(F.EVENTS_JSON_SCHEMA).encode()
    )
    events_channel = writer.register_channel(
        F.EVENTS_TOPIC, "json", events_schema, {F.ROLE_KEY: "events"}
    )
    channels: dict[str, tuple[int, str]] = {}
    for name in sorted(plans):
        plan = plans[name]
        topic = F.channel_topic(name)
        schema_id = writer.register_schema(
            name, "jsonschema", json.dumps(object_schema(plan.shape, name)).encode()
        )
        kinds = ",".join(k for k in ("message", "request", "response") if k in plan.kinds)
        channel_id = writer.register_channel(
            topic, "json", schema_id, {F.ROLE_KEY: "body", F.NAME_KEY: name, F.KINDS_KEY: kinds}
        )
        channels[name] = (channel_id, topic)
    total, rows, emails = session.rows, 0, 0
    add = writer.add_message
    for batch in _batches(session, COLUMN_NAMES):
        count = len(batch["kind"])
        columns = [batch[c] for c in COLUMN_NAMES]
        for values in zip(*columns, strict=True):
            what = F.email_what(values[KIND], values[DETAIL])
            channel = channels.get(values[NAME]) if what is not None else None
            # Log time: when the email was received (or, for what was sent and for other
            # events, when it happened); publish time: its Source-Timestamp.
            log_time = max(values[RECEPTION] or values[RECORDED] or 0, 0)
            publish_time = max(values[SOURCE] or log_time, 0)
            sequence = (values[INDEX] or 0) & F.SEQUENCE_MASK
            if channel is None:
                data = F.envelope(values, body_channel=None, body_encoding=F.BODY_NONE)
                add(events_channel, log_time, data, publish_time, sequence)
                continue
            body, encoding, _ = F.body_message(values[BODY])
            data = F.envelope(values, body_channel=channel[1], body_encoding=encoding)
            add(events_channel, log_time, data, publish_time, sequence)
            add(channel[0], log_time, body, publish_time, sequence)
            emails += 1
        rows += count
        if progress is not None:
            progress("writing", rows, total)
    writer.finish()  # type: ignore[no-untyped-call]
    return rows, emails
