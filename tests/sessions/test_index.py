"""The session index: built once beside the parts, equal to what a full read computes,
extended as parts are added, rebuilt (and said so) when it disagrees with its parts, kept
in memory on a read-only directory; seeking and paging through it."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.sessions.index import (
    INDEX_FILE,
    IndexUnavailableError,
    load_index,
)
from mailbus.sessions.pages import RowGroupReader, read_rows, read_window
from mailbus.sessions.player import replay_events
from mailbus.sessions.reader import SessionError, open_session
from mailbus.sessions.recorder import Recorder
from mailbus.sessions.replay_rows import TIME, time_expr
from mailbus.trace import TraceEvent
from sessions_helpers import MS, SAMPLE_NAMES, SAMPLES, T, read_only
from waiting import eventually

from bench.synthetic_sorted import write_synthetic


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60,000 events in 4 parts of row groups of 4,096 rows."""
    path = tmp_path_factory.mktemp("index") / "s"
    write_synthetic(path, 60_000, part_rows=15_000, group_rows=4_096)
    return path


def _copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    (target / INDEX_FILE).unlink(missing_ok=True)
    return target


def _full(path: Path) -> pl.DataFrame:
    return open_session(path).read().with_columns(time_expr())


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_index_of_a_sample_matches_a_full_read(name: str, tmp_path: Path) -> None:
    path = _copy(SAMPLES / name, tmp_path)
    index = load_index(path)
    assert index.notes == ("no index: built it (1 part(s))",)
    assert (path / INDEX_FILE).exists() and index.written
    frame = _full(path)
    assert index.rows == frame.height
    assert index.first_ns == frame[TIME].min() and index.last_ns == frame[TIME].max()
    assert dict(index.counts_by_kind) == dict(Counter(frame["kind"].to_list()))
    names = Counter(n for n in frame["name"].to_list() if n is not None)
    assert index.counts_by_name == dict(names)
    # The emails a replay sends, per name, as the global replay counts them.
    emails = Counter(e.name for e in replay_events(path))
    counted = {n: s.email_count for n, s in index.names.items() if s.email_count}
    counted.pop(PARTICIPANTS_TOPIC, None)
    assert counted == dict(emails)
    assert sum(index.density(50)) == frame.height
    assert sum(index.density(7, emails=True)) == sum(s.email_count for s in index.names.values())
    # Loaded again: read from the file, nothing rebuilt.
    again = load_index(path)
    assert again.notes == () and again == index
    # The index committed beside the sample is current (regenerate it when the format
    # changes: load_index on the sample writes it); a part's modification time is not
    # content (a checkout sets its own).
    assert _content(load_index(SAMPLES / name, build=False).to_json()) == _content(index.to_json())


def _content(data: dict[str, Any]) -> dict[str, Any]:
    parts = [{k: v for k, v in p.items() if k != "mtime_ns"} for p in data["parts"]]
    return {**data, "parts": parts}


@pytest.mark.slow
def test_index_of_a_multi_part_session_and_its_density(synthetic: Path, tmp_path: Path) -> None:
    path = _copy(synthetic, tmp_path)
    index = load_index(path)
    frame = _full(path)
    assert [p.rows for p in index.parts] == [15_000] * 4
    assert len(index.row_groups) == 4 * 4  # 15,000 rows in groups of 4,096
    assert sum(g.rows for g in index.row_groups) == frame.height
    for group in index.row_groups:
        rows = frame.slice(group.first_row, group.rows)
        assert (group.first_ns, group.last_ns) == (rows[TIME].min(), rows[TIME].max())
    assert index.emails() == len(replay_events(path))
    # The density of each of 10 columns is the rows whose bin starts in it.
    bins = 10
    width = index.width_ns
    assert index.first_ns is not None and index.last_ns is not None
    span = index.last_ns - index.first_ns
    starts = (frame[TIME] // width) * width
    expected = Counter(
        min(bins - 1, max(0, (s - index.first_ns) * bins // span)) for s in starts.to_list()
    )
    assert index.density(bins) == [expected[i] for i in range(bins)]


def test_locate_finds_the_first_row_at_or_after_a_time(synthetic: Path, tmp_path: Path) -> None:
    path = _copy(synthetic, tmp_path)
    index = load_index(path)
    frame = _full(path)
    times = frame[TIME]
    assert index.first_ns is not None and index.last_ns is not None
    for t in [
        index.first_ns,
        index.first_ns + 1,
        (index.first_ns + index.last_ns) // 2,
        index.last_ns - 12_345,
        index.last_ns,
    ]:
        position = index.locate(t)
        assert position is not None
        row = frame.row(position.row_number, named=True)
        assert row[TIME] >= t
        # Every earlier row of its row group is earlier (parts are sorted), and no row
        # of the session between t and the found time is missing.
        assert times.filter((times >= t) & (times < row[TIME])).len() == 0
        assert position.file == index.parts[position.part].file
    assert index.locate(index.last_ns + 1) is None  # past the end


def test_read_window_and_read_rows_touch_only_what_they_need(
    synthetic: Path, tmp_path: Path
) -> None:
    path = _copy(synthetic, tmp_path)
    index = load_index(path)
    frame = _full(path).sort(TIME, "event_index")
    assert index.first_ns is not None
    start = index.first_ns + 30_000_000
    stop = start + 5_000_000
    reader = RowGroupReader(index)
    window = read_window(index, start, stop, ["name", "kind", "event_index"], reader=reader)
    expected = frame.filter((pl.col(TIME) >= start) & (pl.col(TIME) < stop))
    assert window.select("name", "kind", "event_index").equals(
        expected.select("name", "kind", "event_index")
    )
    assert 0 < reader.groups_read <= 2  # one row group of 16, maybe its neighbour
    limited = read_window(index, start, stop, ["event_index"], 7)
    assert limited["event_index"].to_list() == expected["event_index"].head(7).to_list()
    in_file_order = _full(path)
    page = read_rows(index, 4_090, 20, ["event_index", "name"])  # across two row groups
    assert page["event_index"].to_list() == in_file_order["event_index"][4_090:4_110].to_list()
    assert read_rows(index, index.rows - 3, 10, ["name"]).height == 3
    assert read_rows(index, index.rows + 5, 10, ["name"]).height == 0


def test_a_recording_in_progress_is_followed(synthetic: Path, tmp_path: Path) -> None:
    """An index of the first parts is extended with the parts added since."""
    path = _copy(synthetic, tmp_path)
    later = tmp_path / "later"
    later.mkdir()
    for part in sorted(path.glob("part-*.parquet"))[2:]:
        part.rename(later / part.name)
    first = load_index(path)
    assert len(first.parts) == 2
    for part in later.iterdir():
        part.rename(path / part.name)
    grown = load_index(path)
    assert grown.notes == ("index extended with 2 new part(s)",)
    assert grown.rows == 60_000 and [p.file for p in grown.parts] == [
        p.name for p in sorted(path.glob("part-*.parquet"))
    ]
    (path / INDEX_FILE).unlink()
    assert load_index(path) == grown  # the same as one built from scratch


def test_an_index_disagreeing_with_its_parts_is_rebuilt_and_said_so(
    synthetic: Path, tmp_path: Path
) -> None:
    path = _copy(synthetic, tmp_path)
    good = load_index(path)
    # Another part copied over the second one: same name, other rows.
    other = tmp_path / "other"
    write_synthetic(other, 5_000, part_rows=5_000, group_rows=1_000)
    shutil.copy(other / "part-00001.parquet", path / "part-00002.parquet")
    rebuilt = load_index(path)
    assert len(rebuilt.notes) == 1
    assert rebuilt.notes[0].startswith("index disagrees with part part-00002.parquet")
    assert rebuilt.notes[0].endswith("index rebuilt")
    assert rebuilt.rows == good.rows - 15_000 + 5_000 == _full(path).height
    stored = json.loads((path / INDEX_FILE).read_text())
    assert stored["rows"] == rebuilt.rows


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"format": "other"}', ""])
def test_an_unreadable_index_is_rebuilt(content: str, tmp_path: Path) -> None:
    path = _copy(SAMPLES / "demo", tmp_path)
    (path / INDEX_FILE).write_text(content)
    index = load_index(path)
    assert index.notes[0].startswith("index unreadable") and index.rows == 352
    assert load_index(path).notes == ()


def test_without_build_a_missing_index_is_an_error(tmp_path: Path) -> None:
    path = _copy(SAMPLES / "demo", tmp_path)
    with pytest.raises(IndexUnavailableError, match="no index"):
        load_index(path, build=False)
    assert not (path / INDEX_FILE).exists()
    load_index(path)
    assert load_index(path, build=False).rows == 352


def test_a_truncated_part_is_named(synthetic: Path, tmp_path: Path) -> None:
    path = _copy(synthetic, tmp_path)
    part = path / "part-00003.parquet"
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionError, match=r"part-00003\.parquet is truncated"):
        load_index(path)
    skipping = load_index(open_session(path, skip_bad_parts=True))
    assert skipping.rows == 45_000
    assert skipping.notes[-1] == "index kept in memory (parts were skipped)"
    assert not (path / INDEX_FILE).exists()
    assert part.read_bytes() == data[: len(data) // 2]  # nothing rewritten


def test_on_a_read_only_directory_the_index_is_kept_in_memory(tmp_path: Path) -> None:
    path = _copy(SAMPLES / "slow_service", tmp_path)
    before = sorted((p.name, p.read_bytes()) for p in path.iterdir())
    with read_only(path):
        index = load_index(path)
        assert not index.written
        assert index.notes[-1].startswith(f"cannot write {INDEX_FILE} beside the parts")
        assert index.notes[-1].endswith("index kept in memory")
        assert index.rows == 504
    assert sorted((p.name, p.read_bytes()) for p in path.iterdir()) == before


def _shuffled_events(count: int) -> list[TraceEvent]:
    """Received messages whose Source-Timestamps run up to 50 ms behind their reception
    (late, out of order), each also published by the sender."""
    events = []
    for i in range(count):
        sent = T + i * MS
        late = (i * 7919 % 50) * MS
        common = {"name": f"t{i % 3}", "message_id": f"<m{i}@t>", "source_gid": "P"}
        events.append(
            TraceEvent("message.published", sent, source_timestamp_ns=sent, body="x", **common)  # type: ignore[arg-type]
        )
        events.append(
            TraceEvent(
                "email.received",
                sent + late,
                source_timestamp_ns=sent,
                reception_timestamp_ns=sent + late,
                detail="message",
                body="x",
                **common,  # type: ignore[arg-type]
            )
        )
    return sorted(events, key=lambda e: e.time_ns)  # recorded as they happen


def test_the_recorder_writes_the_index_as_it_records(tmp_path: Path) -> None:
    """Every batch closes its part here (max_part_bytes=1): the index follows them."""
    path = tmp_path / "s"
    recorder = Recorder(path, batch_rows=500, max_part_bytes=1)
    events = _shuffled_events(2_000)
    assert load_index(path, build=False).rows == 0  # written at the start
    for n, event in enumerate(events, start=1):
        recorder.listener(event)
        if n == 2_000:  # halfway: the index follows the parts written so far
            eventually(lambda: recorder.status()["parts"] >= 2, timeout=60)
            session = open_session(path)
            following = load_index(session)
            assert following.rows == sum(p.rows for p in following.parts) >= 1_000
            assert [p.file for p in following.parts] == [p.name for p in session.parts]
            # A part renamed before the recorder rewrote the index is indexed in memory.
            assert following.notes in (
                (),
                (
                    "index extended with 1 new part(s)",
                    "index kept in memory (the recorder writes it)",
                ),
            )
    recorder.stop()
    written = load_index(path, build=False)
    assert written.notes == () and written.rows == len(events) and len(written.parts) >= 4
    (path / INDEX_FILE).unlink()
    rebuilt = load_index(path)  # the same as an index built from the parts afterwards
    assert rebuilt.notes[0].startswith("no index") and rebuilt == written
    assert written.emails() == len(replay_events(path)) == 2_000


def test_the_recorder_writes_row_groups_sorted_by_time(tmp_path: Path) -> None:
    path = tmp_path / "s"
    events = _shuffled_events(1_000)
    recorder = Recorder(path, batch_rows=100, row_group_rows=300)
    for event in events:
        recorder.listener(event)
    recorder.stop()
    index = load_index(path, build=False)
    (part,) = index.parts
    assert [g.rows for g in part.row_groups] == [300] * 6 + [200]
    frame = pl.read_parquet(path / part.file).with_columns(time_expr())
    recorded = pl.Series([e.source_timestamp_ns or e.time_ns for e in events])
    assert not recorded.is_sorted()  # the events came out of time order
    for group in part.row_groups:
        rows = frame.slice(group.part_row, group.rows)
        assert rows[TIME].is_sorted(), group
        assert (rows[TIME].min(), rows[TIME].max()) == (group.first_ns, group.last_ns)
    (path / INDEX_FILE).unlink()
    assert load_index(path) == index
