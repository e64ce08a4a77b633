"""Bad sessions: each gives a clear error naming the file, or an empty result; the CLI
reports them without a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from mailbus.cli import main
from mailbus.sessions.reader import (
    EmptySessionError,
    NewerSchemaError,
    SessionError,
    TruncatedPartError,
    open_session,
    scan,
)
from mailbus.sessions.recorder import Recorder
from mailbus.sessions.schema import METADATA_VERSION_KEY, SCHEMA_VERSION
from sessions_helpers import tiny_events, write_session


def _two_parts(path: Path) -> Path:
    events = tiny_events()
    return write_session(path, events, batch_rows=len(events) // 2 + 1, max_part_bytes=1)


def test_truncated_part_is_named_and_can_be_skipped(tmp_path: Path) -> None:
    path = _two_parts(tmp_path / "s")
    parts = sorted(path.glob("part-*.parquet"))
    assert len(parts) == 2
    full = open_session(path).read().height
    data = parts[1].read_bytes()
    parts[1].write_bytes(data[: len(data) // 2])
    with pytest.raises(TruncatedPartError, match=r"part-00002\.parquet is truncated"):
        open_session(path)
    session = open_session(path, skip_bad_parts=True)
    assert [p for p, _ in session.skipped] == [parts[1]]
    assert 0 < session.read().height < full


def test_garbage_named_like_a_part(tmp_path: Path) -> None:
    path = _two_parts(tmp_path / "s")
    (path / "part-00003.parquet").write_bytes(b"PAR1 not really\x00\xff" * 10)
    with pytest.raises(TruncatedPartError, match="part-00003"):
        open_session(path)


def test_newer_schema_version_in_manifest_or_part(tmp_path: Path) -> None:
    path = _two_parts(tmp_path / "s")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["schema_version"] = SCHEMA_VERSION + 1
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(NewerSchemaError, match=f"version {SCHEMA_VERSION + 1}.*Upgrade"):
        open_session(path)
    # A part from a newer writer, in a directory without manifest.
    other = tmp_path / "o"
    other.mkdir()
    table = pq.read_table(next(path.glob("part-*.parquet")))
    table = table.replace_schema_metadata({METADATA_VERSION_KEY: b"99"})
    pq.write_table(table, other / "part-00001.parquet")
    with pytest.raises(NewerSchemaError, match="99"):
        open_session(other)


def test_foreign_parquet_and_bad_manifest(tmp_path: Path) -> None:
    foreign = tmp_path / "f"
    foreign.mkdir()
    pq.write_table(pa.table({"x": [1]}), foreign / "part-00001.parquet")
    with pytest.raises(SessionError, match="not a mailbus session part"):
        open_session(foreign)
    broken = tmp_path / "b"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    with pytest.raises(SessionError, match="not valid JSON"):
        open_session(broken)
    (broken / "manifest.json").write_text("[]")
    with pytest.raises(SessionError, match="not a JSON object"):
        open_session(broken)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[" * 100_000, "JSON nested too deeply"),
        ('{"a":' * 100_000, "JSON nested too deeply"),
        (b"\xff\xfe{}", "cannot be read"),
        (None, "cannot be read"),  # manifest.json is a directory
    ],
    ids=["deep-list", "deep-object", "not-utf8", "a-directory"],
)
def test_unreadable_manifest_is_a_session_error(
    tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    broken = tmp_path / "b"
    broken.mkdir()
    manifest = broken / "manifest.json"
    if content is None:
        manifest.mkdir()
    elif isinstance(content, bytes):
        manifest.write_bytes(content)
    else:
        manifest.write_text(content)
    with pytest.raises(SessionError, match=message) as caught:
        open_session(broken)
    assert "manifest.json" in str(caught.value)


def test_missing_and_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="no such directory"):
        open_session(tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(SessionError, match="not a session directory"):
        open_session(tmp_path / "file")
    (tmp_path / "empty-dir").mkdir()
    with pytest.raises(SessionError, match="holds no mailbus session"):
        open_session(tmp_path / "empty-dir")
    with pytest.raises(SessionError, match="no session given"):
        scan([])


def test_empty_session_reads_as_empty_frame(tmp_path: Path) -> None:
    Recorder(tmp_path / "e").stop()
    session = open_session(tmp_path / "e")
    assert session.complete and session.parts == ()
    frame = session.read()
    assert frame.height == 0 and "kind" in frame.columns
    with pytest.raises(EmptySessionError, match="empty"):
        open_session(tmp_path / "e", allow_empty=False)


def test_leftover_temporary_part_is_ignored(tmp_path: Path) -> None:
    path = _two_parts(tmp_path / "s")
    rows = open_session(path).read().height
    shutil.copy(next(path.glob("part-*.parquet")), path / "part-00009.parquet.tmp")
    assert open_session(path).read().height == rows


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncate", "truncated"),
        ("newer", "Upgrade mailbus"),
        ("missing", "no such directory"),
        ("nested", "nested too deeply"),
    ],
)
def test_cli_reports_bad_sessions_without_traceback(
    tmp_path: Path, damage: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _two_parts(tmp_path / "s")
    if damage == "truncate":
        part = sorted(path.glob("part-*.parquet"))[0]
        part.write_bytes(part.read_bytes()[:100])
    elif damage == "newer":
        manifest = json.loads((path / "manifest.json").read_text())
        manifest["schema_version"] = 7
        (path / "manifest.json").write_text(json.dumps(manifest))
    elif damage == "nested":
        (path / "manifest.json").write_text("[" * 100_000)
    else:
        path = tmp_path / "missing"
    for command in (["analyze", str(path)], ["replay", str(path)]):
        # In process: an exception escaping main() fails the test with its traceback.
        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"mailbus {command[0]}: error:" in err and message in err
