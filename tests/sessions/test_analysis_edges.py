"""Edges of the analysis found by an outside check: a sequence number
of -1 in a hand-written file is not a number a sender gave, and `answered` counts late
answers (the docs say so)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from mailbus.sessions import analysis
from mailbus.trace import TraceEvent
from sessions_helpers import MS, T, write_session


def _received(i: int, sequence: int) -> TraceEvent:
    return TraceEvent(
        "email.received",
        T + i * MS,
        name="a",
        source_gid="P1",
        sequence_number=sequence,
        message_id=f"<a{i}@t>",
        source_timestamp_ns=T + i * MS,
        reception_timestamp_ns=T + i * MS + MS,
        detail="message",
        body="x",
    )


def test_a_negative_sequence_number_in_a_hand_written_file_is_left_out(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s", [_received(i, i) for i in range(1, 6)])
    part = next(session.glob("part-*.parquet"))
    table = pq.read_table(part)
    column = table.column("sequence_number")
    edited = pc.if_else(pc.equal(column, 4), pa.scalar(-1, pa.int64()), column)
    schema = table.schema
    pq.write_table(
        table.set_column(
            schema.get_field_index("sequence_number"), schema.field("sequence_number"), edited
        ),
        part,
    )

    row = analysis.sequence_stats([str(session)]).row(0, named=True)
    assert row["received"] == 4  # the -1 row is not a received number
    assert row["first_sequence"] == 1 and row["last_sequence"] == 5
    assert row["missing"] == 1 and row["gaps"] == 1  # 4 is missing, not "reordered to -1"
    assert row["reordered"] == 0
