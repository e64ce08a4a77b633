"""Synthetic sessions written part by part in bounded memory, as the recorder writes them
(each part a time slice, sorted by time, row groups of `group_rows` rows).

The shape of a busy system, in blocks of 20 events every 2 ms: 13 received messages on
20 topics, 3 of them also recorded by their publisher (message.published, recorded
first), a request (request.sent, its received copy at the server, unanswered every
50th), its response received (`detail` response, In-Reply-To and References the request)
and the client's response.matched (missing every 97th).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from mailbus.sessions.schema import SCHEMA_VERSION, arrow_schema, part_name

T0 = 1_700_000_000_000_000_000
BLOCK = 20
BLOCK_NS = 2_000_000
BODY = b'{"x": 0.5, "y": 1.25, "theta": 3.14159, "note": "a typical body."}'


def _block_frame(first_block: int, blocks: int) -> pl.DataFrame:
    b = pl.int_range(first_block, first_block + blocks, eager=True, dtype=pl.Int64).alias("b")
    base = pl.DataFrame(b)
    frames = []
    for j in range(13):
        m = pl.col("b") * 13 + j
        received = base.with_columns(
            kind=pl.lit("email.received"),
            detail=pl.lit("message"),
            name=pl.format("robot/topic{}", m % 20),
            source_gid=pl.format("pub{}", m % 20),
            sequence_number=m // 20 + 1,
            message_id=pl.format("<m{}@b>", m),
            source_ns=T0 + pl.col("b") * BLOCK_NS + j * 100_000,
            slot=pl.lit(j * 2 + 1),
        ).with_columns(reception_ns=pl.col("source_ns") + 200_000 + (m * 7919 % 5000) * 100)
        frames.append(received)
        if j < 3:  # the publisher's own event, recorded before the reception
            frames.append(
                received.with_columns(
                    kind=pl.lit("message.published"),
                    detail=pl.lit(None, pl.String),
                    reception_ns=pl.lit(None, pl.Int64),
                    slot=pl.lit(j * 2),
                )
            )
    request_ns = T0 + pl.col("b") * BLOCK_NS + 1_350_000
    request = base.with_columns(
        kind=pl.lit("request.sent"),
        detail=pl.lit(None, pl.String),
        name=pl.format("svc{}", pl.col("b") % 5),
        source_gid=pl.format("client{}", pl.col("b") % 5),
        sequence_number=pl.col("b") // 5 + 1,
        message_id=pl.format("<r{}@b>", pl.col("b")),
        source_ns=request_ns,
        reception_ns=pl.lit(None, pl.Int64),
        slot=pl.lit(40),
    )
    taken = request.with_columns(
        kind=pl.lit("email.received"),
        detail=pl.lit("request"),
        reception_ns=request_ns + 150_000,
        slot=pl.lit(41),
    )
    response = request.with_columns(
        kind=pl.lit("email.received"),
        detail=pl.lit("response"),
        in_reply_to=pl.col("message_id"),
        message_id=pl.format("<s{}@b>", pl.col("b")),
        source_gid=pl.lit("server"),
        source_ns=request_ns + 300_000,
        reception_ns=request_ns + 450_000,
        slot=pl.lit(42),
    )
    matched = response.with_columns(
        kind=pl.lit("response.matched"),
        detail=pl.lit(None, pl.String),
        message_id=pl.lit(None, pl.String),
        reception_ns=request_ns + 460_000,
        slot=pl.lit(43),
    )
    # Unanswered requests stand in for the missing response with a second reception of
    # the request (the server received it twice: a duplicate); every 97th match missing.
    response = response.with_columns(
        kind=pl.when(pl.col("b") % 50 == 0).then(pl.lit("email.received")).otherwise("kind"),
        detail=pl.when(pl.col("b") % 50 == 0).then(pl.lit("request")).otherwise("detail"),
        message_id=pl.when(pl.col("b") % 50 == 0)
        .then(pl.format("<r{}@b>", pl.col("b")))
        .otherwise("message_id"),
        in_reply_to=pl.when(pl.col("b") % 50 == 0).then(None).otherwise("in_reply_to"),
    )
    matched = matched.with_columns(
        kind=pl.when(pl.col("b") % 97 == 0).then(pl.lit("response.discarded")).otherwise("kind")
    )
    frames += [request, taken, response, matched]
    frame = pl.concat(frames, how="diagonal_relaxed")
    return frame.with_columns(
        event_index=pl.col("b") * 44 + pl.col("slot"),
        recorded_ns=pl.coalesce("reception_ns", "source_ns"),
        references=pl.when(pl.col("in_reply_to").is_not_null())
        .then(pl.concat_list(pl.col("in_reply_to")))
        .otherwise(None),
        body=pl.lit(BODY, pl.Binary),
        body_size=pl.lit(len(BODY), pl.Int64),
        body_truncated=pl.lit(False),
        transport=pl.lit("synthetic"),
        participant=pl.lit("bench@localhost"),
    ).drop("b", "slot")


def write_synthetic(
    path: Path,
    total: int,
    *,
    part_rows: int = 1_000_000,
    group_rows: int = 16_384,  # the recorder's DEFAULT_ROW_GROUP_ROWS
    sort: bool = True,
) -> None:
    """A session of about `total` events (a whole number of 20-event blocks) in parts of
    about `part_rows` rows, each generated, sorted by time (with `sort`) and written on
    its own, so memory holds one part."""
    path.mkdir(parents=True)
    schema = arrow_schema("bench")
    blocks_total = max(total // BLOCK, 1)
    per_part = max(part_rows // BLOCK, 1)
    parts = []
    for n, first in enumerate(range(0, blocks_total, per_part), start=1):
        frame = _block_frame(first, min(per_part, blocks_total - first))
        if sort:
            frame = frame.sort(pl.coalesce("source_ns", "recorded_ns"), "event_index")
        chunk = frame.to_arrow()
        columns = {
            f.name: (
                chunk.column(f.name).cast(f.type)
                if f.name in chunk.column_names
                else pa.nulls(chunk.num_rows, f.type)
            )
            for f in schema
        }
        table = pa.table(columns, schema=schema)
        temp = path / (part_name(n) + ".tmp")
        pq.write_table(table, temp, compression="zstd", row_group_size=group_rows)
        os.replace(temp, path / part_name(n))
        parts.append({"file": part_name(n), "rows": table.num_rows})
    (path / "manifest.json").write_text(
        json.dumps({"schema_version": SCHEMA_VERSION, "status": "complete", "parts": parts})
    )
