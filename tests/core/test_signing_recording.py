"""The `signature` column was added to row schema version 1 (a compatible change):
sessions recorded before it still open, with the column null, through both readers."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from mailbus.sessions.reader import open_session
from mailbus.sessions.schema import COLUMN_NAMES

DEMO = Path(__file__).resolve().parents[2] / "sample_sessions" / "demo"


def test_a_session_recorded_before_the_signature_column_reads_it_as_null() -> None:
    session = open_session(DEMO)
    assert all("signature" not in pq.read_schema(p).names for p in session.parts)
    frame = session.read()
    assert frame.height > 0
    assert frame["signature"].null_count() == frame.height
    table = session.arrow()
    assert tuple(table.column_names) == COLUMN_NAMES
    assert table.column("signature").null_count == table.num_rows
