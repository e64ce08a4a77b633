"""Opening an indexed session: the index stands in for the parts' footers while it
describes the parts as they are (a stat: size, and modification time where it recorded
one); a part touched but not changed in size has its footer compared; a part that
disagrees gets the index rebuilt, and that is said; a truncated part is still named."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from mailbus.sessions.index import INDEX_FILE, load_index
from mailbus.sessions.reader import SessionError, open_session
from sessions_helpers import read_only

from bench.synthetic_sorted import write_synthetic


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24,000 events in 4 parts of row groups of 2,048 rows, indexed."""
    path = tmp_path_factory.mktemp("open") / "s"
    write_synthetic(path, 24_000, part_rows=6_000, group_rows=2_048)
    load_index(path)
    return path


@pytest.fixture
def session(indexed: Path, tmp_path: Path) -> Path:
    path = tmp_path / "s"
    shutil.copytree(indexed, path)  # times kept, as the index recorded them
    return path


@pytest.fixture
def footers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the part files whose footer is read (pyarrow's metadata readers)."""
    read: list[str] = []
    metadata, parquet_file = pq.read_metadata, pq.ParquetFile

    def counting_metadata(where: object, *args: object, **kwargs: object) -> object:
        read.append(Path(str(where)).name)
        return metadata(where, *args, **kwargs)

    class CountingFile(parquet_file):  # type: ignore[misc]
        def __init__(self, source: object, *args: object, **kwargs: object) -> None:
            read.append(Path(str(source)).name)
            super().__init__(source, *args, **kwargs)

    monkeypatch.setattr(pq, "read_metadata", counting_metadata)
    monkeypatch.setattr(pq, "ParquetFile", CountingFile)
    yield read


def _parts(path: Path) -> list[str]:
    return sorted(p.name for p in path.glob("part-*.parquet"))


def test_an_index_that_describes_its_parts_stands_in_for_their_footers(
    session: Path, footers: list[str]
) -> None:
    opened = open_session(session)
    index = load_index(opened)
    assert footers == []  # four parts, not one footer read
    assert [p.name for p in opened.parts] == _parts(session)
    assert index.notes == () and index.rows == 24_000
    assert all(p.mtime_ns == (session / p.file).stat().st_mtime_ns for p in index.parts)
    # Without the index, each part's footer is checked at open, as always.
    (session / INDEX_FILE).unlink()
    open_session(session)
    assert sorted(footers) == _parts(session)


def test_an_index_made_before_times_were_kept_is_trusted_on_sizes(
    session: Path, footers: list[str]
) -> None:
    data = json.loads((session / INDEX_FILE).read_text())
    for part in data["parts"]:
        del part["mtime_ns"]
    (session / INDEX_FILE).write_text(json.dumps(data))
    index = load_index(session)
    assert footers == [] and index.notes == () and index.rows == 24_000


def test_a_part_touched_but_the_same_has_its_footer_compared_and_the_index_kept(
    session: Path, footers: list[str]
) -> None:
    part = session / "part-00002.parquet"
    st = part.stat()
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # copied without its times
    before = json.loads((session / INDEX_FILE).read_text())
    index = load_index(session)
    assert index.notes == () and index.rows == 24_000
    assert set(footers) == {"part-00002.parquet"}  # that part's footer only
    # The index is kept, with the part's new time: the next open trusts a stat again.
    after = json.loads((session / INDEX_FILE).read_text())
    assert after["parts"][1]["mtime_ns"] == part.stat().st_mtime_ns
    after["parts"][1]["mtime_ns"] = before["parts"][1]["mtime_ns"]
    assert after == before
    footers.clear()
    assert load_index(open_session(session)).notes == ()
    assert footers == []


def test_a_touched_part_on_a_read_only_disk_has_its_footer_compared_each_time(
    session: Path, footers: list[str]
) -> None:
    part = session / "part-00002.parquet"
    st = part.stat()
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    before = (session / INDEX_FILE).read_bytes()
    with read_only(session):  # the index cannot be replaced
        for _ in range(2):
            footers.clear()
            index = load_index(open_session(session))
            assert index.notes == () and index.rows == 24_000
            assert set(footers) == {"part-00002.parquet"}
    assert (session / INDEX_FILE).read_bytes() == before


def test_a_touched_part_whose_footer_disagrees_gets_the_index_rebuilt(
    session: Path, footers: list[str]
) -> None:
    # The index says other rows for part 3 than its footer has (a part replaced by one
    # of the same size): touched, its footer is compared.
    data = json.loads((session / INDEX_FILE).read_text())
    data["parts"][2]["rows"] += 1
    (session / INDEX_FILE).write_text(json.dumps(data))
    part = session / "part-00003.parquet"
    st = part.stat()
    os.utime(part, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    index = load_index(session)
    assert index.notes == (
        "index disagrees with part part-00003.parquet (6001 rows in 3 row groups indexed,"
        " 6000 in 3 found): index rebuilt",
    )
    assert index.rows == 24_000 and json.loads((session / INDEX_FILE).read_text())["rows"] == 24_000
    assert load_index(session).notes == ()


def test_a_part_rewritten_with_another_size_gets_the_index_rebuilt_and_said(
    session: Path, tmp_path: Path, footers: list[str]
) -> None:
    other = tmp_path / "other"
    write_synthetic(other, 4_000, part_rows=4_000, group_rows=1_000)
    shutil.copy(other / "part-00001.parquet", session / "part-00004.parquet")
    opened = open_session(session)
    assert footers == ["part-00004.parquet"]  # the part the index no longer describes
    index = load_index(opened)
    assert len(index.notes) == 1
    assert index.notes[0].startswith("index disagrees with part part-00004.parquet (")
    assert index.notes[0].endswith("found): index rebuilt")
    assert index.rows == 18_000 + 4_000 == open_session(session).read().height


def test_a_truncated_part_is_named_though_the_index_lists_it(session: Path) -> None:
    part = session / "part-00003.parquet"
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionError, match=r"part-00003\.parquet is truncated"):
        open_session(session)
    with pytest.raises(SessionError, match=r"part-00003\.parquet is truncated"):
        load_index(session)
    assert part.read_bytes() == data[: len(data) // 2]  # nothing rewritten
