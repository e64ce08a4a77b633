"""The recorder: trace events of a context into a session directory of Parquet parts.

The trace listener runs on the engine's threads, so it only filters, caps the body and
appends a tuple to a bounded deque; a background thread turns batches into Arrow tables
and writes them. Memory stays bounded whatever the rate: at most `max_queued` events of
at most `body_cap` body bytes wait, plus the one batch being written (raw bytes are
written up to `raw_cap`). When the queue is full the event is dropped and counted
(manifest `dropped`, a `recorder.dropped` row once the writer catches up), never lost
in silence.

A part is written under a temporary name and renamed when complete, and the manifest
is replaced atomically after each part, so a killed recording is readable up to its
last complete part.

Rows are gathered into row groups of `row_group_rows` rows (or `row_group_bytes` of
Arrow data, whichever comes first), each sorted by time (`coalesce(source_ns,
recorded_ns)`, the replay's axis), so that a reader seeks to a time by row group. The
session's index (mailbus.sessions.index) is kept as the parts are written: each row
group is counted as it is written, and `index.json` is replaced atomically after each
part, so it follows the recording part by part.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from mailbus.extras import needs_extra
from mailbus.sessions.fitting import coerced, fitted_table, with_notes
from mailbus.sessions.index import INDEX_FILE, IndexBuilder, write_index
from mailbus.sessions.kinds import SessionKind
from mailbus.sessions.replay_rows import LIGHT_COLUMNS
from mailbus.sessions.schema import (
    MANIFEST,
    SCHEMA_VERSION,
    TEMP_SUFFIX,
    EventRow,
    Redactor,
    arrow_schema,
    cap_body,
    event_columns,
    part_name,
)
from mailbus.sessions.secrets import context_secrets
from mailbus.trace import TraceEvent

with needs_extra("mailbus.sessions"):
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from mailbus.context import Context

log = logging.getLogger(__name__)

DEFAULT_BODY_CAP = 64 * 1024
# Received emails' raw bytes are recorded whole when at most this many, else not at all
# (a cut source is not what arrived); 0 records none. See docs/sessions.md.
DEFAULT_RAW_CAP = 64 * 1024
DEFAULT_MAX_QUEUED = 20_000
DEFAULT_BATCH_ROWS = 5_000
DEFAULT_PART_BYTES = 64 * 1024 * 1024
DEFAULT_PART_SECONDS = 300.0
# Row groups: large enough to read fast, small enough that a seek reads little. A seek
# reads one whole group: at 16 Ki rows the workbench's seek p95 on the benchmark's
# sessions was half what it was at 64 Ki (bench.replay_open, same run), and a full
# replay reads about as fast (docs/benchmarks.md).
DEFAULT_ROW_GROUP_ROWS = 16_384
DEFAULT_ROW_GROUP_BYTES = 8 * 1024 * 1024  # of Arrow data held while a group fills
DROPPED_KIND = SessionKind.RECORDER_DROPPED
_NAME_CACHE_LIMIT = 10_000

# What the listener queues: one tuple per event (cheaper than a dict or an object).
_Row = EventRow


class RecorderError(Exception):
    """The recorder cannot write its session (directory exists, disk full...)."""


def engine_version() -> str:
    from mailbus import __version__

    return __version__


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    temp = path.with_name(path.name + TEMP_SUFFIX)
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)


class Recorder:
    """Record trace events into `directory` (created; it must not hold a session yet).

    Use `attach(context)` (or pass `context=`) and `stop()`, or `with Recorder(...)`.
    `include`/`exclude` are regular expressions searched in the topic or service name
    (events without a name, such as wait events, are kept unless `kinds` excludes
    them); `kinds` limits the event kinds recorded.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        context: Context | None = None,
        include: str | None = None,
        exclude: str | None = None,
        kinds: Collection[str] | None = None,
        body_cap: int = DEFAULT_BODY_CAP,
        raw_cap: int = DEFAULT_RAW_CAP,
        max_queued: int = DEFAULT_MAX_QUEUED,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
        max_part_bytes: int = DEFAULT_PART_BYTES,
        max_part_seconds: float | None = DEFAULT_PART_SECONDS,
        flush_interval: float = 0.5,
        compression_level: int = 3,
        participant: str = "",
        transport: str = "",
        secrets: Collection[str] = (),
    ) -> None:
        if body_cap < 0 or max_queued < 1 or batch_rows < 1 or max_part_bytes < 1:
            raise ValueError("body_cap >= 0, max_queued, batch_rows, max_part_bytes >= 1")
        if raw_cap < 0:
            raise ValueError("raw_cap >= 0 (0 records no raw bytes)")
        if row_group_rows < 1 or row_group_bytes < 1:
            raise ValueError("row_group_rows, row_group_bytes >= 1")
        self.directory = Path(directory)
        if (self.directory / MANIFEST).exists() or any(self.directory.glob("part-*")):
            raise RecorderError(f"{self.directory} already holds a session; choose a new one")
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._include = re.compile(include) if include else None
            self._exclude = re.compile(exclude) if exclude else None
        except re.error as exc:
            raise ValueError(f"bad topic filter: {exc}") from None
        self._kinds = frozenset(kinds) if kinds is not None else None
        self.body_cap = body_cap
        self.raw_cap = raw_cap
        self.max_queued = max_queued
        self.batch_rows = batch_rows
        self.row_group_rows = row_group_rows
        self.row_group_bytes = row_group_bytes
        self.max_part_bytes = max_part_bytes
        self.max_part_seconds = max_part_seconds
        self.flush_interval = flush_interval
        self.compression_level = compression_level
        self.participant = participant
        self.transport = transport
        self._secrets: set[str] = set(secrets)
        self._redactor: Redactor | None = None
        self._engine_version = engine_version()
        self._schema = arrow_schema(self._engine_version)

        self._queue: deque[_Row] = deque()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._index = itertools.count()
        self._name_ok: dict[str, bool] = {}
        self._detach: list[Callable[[], None]] = []
        self._lock = threading.Lock()  # manifest counters, read by `status`
        self._count_lock = threading.Lock()
        # Held by the listener to check `_stopped` and queue a row, and by stop() to set
        # it: once stop() holds it, no row can join the queue behind the writer's final
        # drain (a row queued is a row written, or counted as dropped). stop() detaches
        # the listener first, so only a call already running can still get there.
        self._append_lock = threading.Lock()
        self.dropped = 0
        self.filtered = 0
        self.fields_nulled = 0  # values that did not fit their column (stored null)
        self.queue_high_water = 0
        self.written = 0
        self.by_kind: Counter[str] = Counter()
        self._dropped_reported = 0
        self.parts: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self.start_ns = time.time_ns()
        self.end_ns = 0
        self._part_number = 0
        self._writer: pq.ParquetWriter | None = None
        self._part_path: Path | None = None
        self._part_rows = 0
        self._part_first_ns = 0
        self._part_last_ns = 0
        self._part_started = 0.0
        self._group: list[pa.Table] = []  # the row group being gathered
        self._group_rows = 0
        self._group_bytes = 0
        self._session_index = IndexBuilder(self.directory)
        self._stopped = False
        self._write_manifest("recording")
        self._write_index()
        self._thread = threading.Thread(target=self._run, name="mailbus-recorder", daemon=True)
        self._thread.start()
        if context is not None:
            self.attach(context)

    # -- attaching ------------------------------------------------------------------------
    def attach(self, context: Context) -> None:
        """Record this context's trace events (transport, participant, and the password
        to redact are taken from it)."""
        options = context.options
        found = context_secrets(options) - self._secrets
        if found:
            self._secrets |= found
            self._redactor = None
        if not self.transport:
            self.transport = options.transport
        if not self.participant:
            self.participant = options.address
        self._detach.append(context.tracer.add_listener(self.listener))

    @property
    def redactor(self) -> Redactor:
        if self._redactor is None:  # built once (it caches), again when secrets change
            self._redactor = Redactor(self._secrets)
        return self._redactor

    def _wanted(self, name: str) -> bool:
        ok = self._name_ok.get(name)
        if ok is None:
            ok = not (
                (self._include is not None and not self._include.search(name))
                or (self._exclude is not None and self._exclude.search(name))
            )
            if len(self._name_ok) >= _NAME_CACHE_LIMIT:
                self._name_ok.clear()
            self._name_ok[name] = ok
        return ok

    def listener(self, event: TraceEvent) -> None:
        """The trace listener: cheap, never blocks for long, never raises for a full queue.
        An event whose call is still running when stop() begins counts as after the stop:
        it is not recorded (as the events after stop() are not)."""
        if (self._kinds is not None and event.kind not in self._kinds) or (
            event.name and not self._wanted(event.name)
        ):
            with self._count_lock:  # engine threads call concurrently; += is not atomic
                self.filtered += 1
            return
        queue = self._queue
        if len(queue) >= self.max_queued:  # full: drop before capping the body
            self._drop()
            return
        body = event.body
        if body is None:
            row: _Row = (next(self._index), event, None, -1, False)
        else:
            data, size, cut = cap_body(body, self.body_cap)
            row = (next(self._index), event, data, size, cut)
        lock = self._append_lock
        lock.acquire()  # cheaper than `with` on this hot path
        try:
            if self._stopped:
                return
            length = len(queue)
            queue.append(row)
        finally:
            lock.release()
        if length >= self.queue_high_water:
            self.queue_high_water = length + 1
        if length + 1 >= self.batch_rows:
            self._wake.set()

    def _drop(self) -> None:
        with self._count_lock:  # engine threads call concurrently; += is not atomic
            self.dropped += 1
        self._wake.set()

    # -- life cycle -----------------------------------------------------------------------
    def stop(self, timeout: float = 30.0) -> dict[str, Any]:
        """Detach, write what is queued, close the last part, write the final manifest.
        Return the manifest. Safe to call twice."""
        for detach in self._detach:
            detach()
        self._detach.clear()
        with self._append_lock:  # waits for a listener queueing a row right now
            self._stopped = True
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RecorderError(f"recorder did not finish writing within {timeout} s")
        if self.error is not None:
            raise RecorderError(f"recording failed: {self.error}") from self.error
        return self.manifest()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def status(self) -> dict[str, int]:
        """Live counts for a progress display."""
        with self._lock:
            return {
                "written": self.written,
                "queued": len(self._queue),
                "dropped": self.dropped,
                "filtered": self.filtered,
                "fields_nulled": self.fields_nulled,
                "parts": len(self.parts),
            }

    # -- writer thread --------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                self._wake.wait(self.flush_interval)
                self._wake.clear()
                stopping = self._stopping.is_set()
                self._drain()
                self._maybe_roll()
                if stopping:
                    break
            self._close_part()
            self.end_ns = time.time_ns()
            self._write_manifest("complete")
        except BaseException as exc:  # report through stop(); keep the complete parts
            self.error = exc
            log.exception("session recorder failed")
            with self._append_lock:  # no row joins the queue after it is cleared
                self._stopped = True
                self._queue.clear()
            with contextlib.suppress(OSError):
                self._write_manifest("failed")

    def _drain(self) -> None:
        queue = self._queue
        while queue or self.dropped != self._dropped_reported:
            batch: list[_Row] = []
            while queue and len(batch) < self.batch_rows:
                batch.append(queue.popleft())
            dropped = self.dropped
            if dropped != self._dropped_reported:
                # One row says how many events were lost since the last report.
                lost = dropped - self._dropped_reported
                self._dropped_reported = dropped
                note = TraceEvent(
                    DROPPED_KIND,
                    time.time_ns(),
                    detail=f"queue full: {lost} events dropped",
                    extra={"dropped": lost, "max_queued": self.max_queued},
                )
                batch.append((next(self._index), note, None, -1, False))
            self._write_batch(batch)

    def _write_batch(self, rows: list[_Row]) -> None:
        if not rows:
            return
        table = self._table(rows)
        if self._writer is None and not self._group:  # a part's age counts from its first row
            self._part_started = time.monotonic()
        self._group.append(table)
        self._group_rows += table.num_rows
        self._group_bytes += table.nbytes
        if self._group_rows >= self.row_group_rows or self._group_bytes >= self.row_group_bytes:
            self._flush_group()
        first = min(row[1].time_ns for row in rows)
        last = max(row[1].time_ns for row in rows)
        kinds = Counter(str(row[1].kind) for row in rows)
        with self._lock:
            self._part_rows += len(rows)
            self._part_first_ns = min(self._part_first_ns or first, first)
            self._part_last_ns = max(self._part_last_ns, last)
            self.written += len(rows)
            self.by_kind.update(kinds)
        self._maybe_roll()

    def _flush_group(self) -> None:
        """Write the rows gathered as one row group, sorted by time, and count it in the
        index."""
        if not self._group:
            return
        table = pa.concat_tables(self._group)
        self._group, self._group_rows, self._group_bytes = [], 0, 0
        time_ns = pc.coalesce(table.column("source_ns"), table.column("recorded_ns"))
        order = pc.sort_indices(
            pa.table({"t": time_ns, "i": table.column("event_index")}),
            sort_keys=[("t", "ascending"), ("i", "ascending")],
        )
        table = table.take(order)
        if self._writer is None:
            self._open_part()
        assert self._writer is not None
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self._session_index.add_row_group(table.select(list(LIGHT_COLUMNS)))

    def _table(self, rows: list[_Row]) -> pa.Table:
        try:
            columns = self._columns(rows)
        except Exception:  # one odd event: build row by row, coercing only that one
            columns = self._columns_row_by_row(rows)
        table, replaced = fitted_table(columns, self._schema)
        if replaced:
            with self._lock:
                self.fields_nulled += replaced
        return table

    def _columns_row_by_row(self, rows: list[_Row]) -> dict[str, list[Any]]:
        merged: dict[str, list[Any]] = {}
        for row in rows:
            try:
                one = self._columns([row])
            except Exception:
                event, notes = coerced(row[1])
                event = dataclasses.replace(event, detail=with_notes(event.detail, notes))
                one = self._columns([(row[0], event, row[2], row[3], row[4])])
                with self._lock:
                    self.fields_nulled += len(notes)
            for name, values in one.items():
                merged.setdefault(name, []).extend(values)
        return merged

    def _columns(self, rows: list[_Row]) -> dict[str, list[Any]]:
        return event_columns(
            rows,
            self.redactor,
            redact_bodies=bool(self._secrets),
            transport=self.transport,
            participant=self.participant,
            raw_cap=self.raw_cap,
        )

    def _open_part(self) -> None:
        self._part_number += 1
        self._part_path = self.directory / (part_name(self._part_number) + TEMP_SUFFIX)
        self._writer = pq.ParquetWriter(
            self._part_path,
            self._schema,
            compression="zstd",
            compression_level=self.compression_level,
        )

    def _maybe_roll(self) -> None:
        if self._writer is None or self._part_path is None:
            # A quiet recording writes what it has; a part that must stay smaller than
            # its first row group (tests, tiny sessions) is written at once.
            if self._group and (self._too_old() or self._group_bytes >= self.max_part_bytes):
                self._close_part()
                self._write_manifest("recording")
            return
        too_big = self._part_path.stat().st_size >= self.max_part_bytes
        if too_big or self._too_old():
            self._close_part()
            self._write_manifest("recording")

    def _too_old(self) -> bool:
        return (
            self.max_part_seconds is not None
            and time.monotonic() - self._part_started >= self.max_part_seconds
        )

    def _close_part(self) -> None:
        self._flush_group()
        if self._writer is None or self._part_path is None:
            return
        self._writer.close()
        self._writer = None
        temp = self._part_path
        final = temp.with_name(temp.name[: -len(TEMP_SUFFIX)])
        with open(temp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, final)
        self._part_path = None
        with self._lock:
            self.parts.append(
                {
                    "file": final.name,
                    "rows": self._part_rows,
                    "bytes": final.stat().st_size,
                    "first_ns": self._part_first_ns,
                    "last_ns": self._part_last_ns,
                }
            )
        with self._lock:  # the next part counts from zero
            self._part_rows = 0
            self._part_first_ns = 0
            self._part_last_ns = 0
        st = final.stat()
        self._session_index.finish_part(final.name, st.st_size, st.st_mtime_ns)
        self._write_index()

    def manifest(self, status: str = "") -> dict[str, Any]:
        with self._lock:
            return {
                "format": "mailbus-session",
                "schema_version": SCHEMA_VERSION,
                "engine_version": self._engine_version,
                "status": status or ("complete" if self.end_ns else "recording"),
                "start_ns": self.start_ns,
                "end_ns": self.end_ns or None,
                "participant": self.participant,
                "transport": self.transport,
                "body_cap": self.body_cap,
                "raw_cap": self.raw_cap,
                "filters": {
                    "include": self._include.pattern if self._include else None,
                    "exclude": self._exclude.pattern if self._exclude else None,
                    "kinds": sorted(self._kinds) if self._kinds is not None else None,
                },
                "counts": {
                    "events": self.written - self.by_kind.get(DROPPED_KIND, 0),
                    "dropped": self.dropped,
                    "filtered": self.filtered,
                    "fields_nulled": self.fields_nulled,
                    "by_kind": dict(sorted(self.by_kind.items())),
                },
                "parts": list(self.parts),
            }

    def _write_manifest(self, status: str) -> None:
        write_json_atomic(self.directory / MANIFEST, self.manifest(status))

    def _write_index(self) -> None:
        """Replace index.json with the parts complete so far. The index is derived from
        the parts (a reader rebuilds it), so failing to write it does not stop the
        recording."""
        try:
            write_index(self.directory / INDEX_FILE, self._session_index.snapshot(complete=False))
        except OSError as exc:
            log.warning("session index not written (%s); readers will build it", exc)
