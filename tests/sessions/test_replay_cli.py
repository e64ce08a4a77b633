"""`mailbus replay` on sessions without an index, on a read-only disk, with a window from
the middle of a large session and with bad input: one line on stderr, nothing
rewritten."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mailbus.cli import main
from mailbus.sessions.index import INDEX_FILE
from mailbus.sessions.player import replay_events
from sessions_helpers import SAMPLES, read_only

from bench.synthetic_sorted import write_synthetic


def _copy(name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    shutil.copytree(SAMPLES / name, path)
    (path / INDEX_FILE).unlink()
    return path


def test_replay_builds_a_missing_index_once_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy("demo", tmp_path)
    assert main(["replay", str(path), "--rate", "1000"]) == 0
    err = capsys.readouterr().err
    assert "mailbus replay: demo: no index: built it (1 part(s))" in err
    assert "replayed 170 of 170 emails" in err
    assert (path / INDEX_FILE).exists()
    assert main(["replay", str(path), "--rate", "1000", "--stop", "0.5"]) == 0
    assert "no index" not in capsys.readouterr().err


def test_replay_on_a_read_only_session_keeps_the_index_in_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy("gaps", tmp_path)
    before = sorted((p.name, p.read_bytes()) for p in path.iterdir())
    with read_only(path):
        assert main(["replay", str(path), "--rate", "1000", "--stop", "1"]) == 0
    err = capsys.readouterr().err
    assert f"cannot write {INDEX_FILE} beside the parts" in err and "kept in memory" in err
    assert sorted((p.name, p.read_bytes()) for p in path.iterdir()) == before


@pytest.mark.slow
def test_replay_of_one_second_from_the_middle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s"
    write_synthetic(path, 100_000, part_rows=25_000, group_rows=4_096)  # 10 s
    assert main(["replay", str(path), "--start", "5", "--stop", "5.2", "--rate", "1e6"]) == 0
    err = capsys.readouterr().err
    window = [e for e in replay_events(path) if 5e9 <= e.offset_ns <= 5.2e9]
    assert len(window) > 1_000
    assert f"replayed {len(window)} of {len(window)} emails" in err


@pytest.mark.parametrize("value", ["0", "-3", "x", "1e9"])
def test_a_bad_read_ahead_is_one_line(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(SAMPLES / "demo"), "--read-ahead", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--read-ahead" in err[-1] and "Traceback" not in "".join(err)


def test_a_truncated_part_is_one_line_and_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy("slow_service", tmp_path)
    part = path / "part-00001.parquet"
    cut = part.read_bytes()[:5_000]
    part.write_bytes(cut)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "part-00001.parquet is truncated or corrupt" in err[0]
    assert part.read_bytes() == cut and not (path / INDEX_FILE).exists()
