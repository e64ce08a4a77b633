"""Bad MCAP input: a truncated file, corrupt bytes, a file that is no MCAP, an empty file,
a directory named x.mcap, an unreadable file. Every command that opens a session says
what is wrong in one line and exits 2, never with a traceback, and writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from mailbus.cli import main
from mailbus.sessions import mcap_format
from mailbus.sessions.mcap_export import export_mcap
from mailbus.sessions.reader import SessionError, open_session
from mcap.reader import make_reader
from mcap.writer import Writer
from mcap_helpers import run_mailbus, write_foreign
from sessions_helpers import SAMPLES


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path


def exported(tmp_path: Path) -> Path:
    path = tmp_path / "x.mcap"
    export_mcap(open_session(SAMPLES / "gaps"), path)
    return path


def truncated(tmp_path: Path) -> Path:
    path = exported(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 6 // 10])  # cut off while written
    return path


def corrupt(tmp_path: Path) -> Path:
    path = exported(tmp_path)
    with open(path, "rb") as handle:
        summary = make_reader(handle).get_summary()
    assert summary is not None
    chunk = summary.chunk_indexes[len(summary.chunk_indexes) // 2]
    data = bytearray(path.read_bytes())
    middle = chunk.chunk_start_offset + chunk.chunk_length // 2
    data[middle : middle + 64] = b"\x55" * 64  # a damaged disk block inside a chunk
    path.write_bytes(bytes(data))
    return path


def not_mcap(tmp_path: Path) -> Path:
    path = tmp_path / "x.mcap"
    path.write_text("these are my notes, not a recording\n")
    return path


def empty(tmp_path: Path) -> Path:
    path = tmp_path / "x.mcap"
    path.touch()
    return path


def directory(tmp_path: Path) -> Path:
    path = tmp_path / "x.mcap"
    path.mkdir()
    return path


CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "truncated": (truncated, "is truncated: it does not end with MCAP's magic"),
    "corrupt": (corrupt, "is corrupt: "),
    "not-mcap": (not_mcap, "is not an MCAP file (it does not start with MCAP's magic)"),
    "empty": (empty, "is empty (0 bytes), not an MCAP file"),
    "directory": (directory, "holds no mailbus session"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_mcap_input_is_one_clear_line(
    case: str, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, said = CASES[case]
    path = make(tmp_path)
    content = path.read_bytes() if path.is_file() else None
    with pytest.raises(SessionError, match=r"x\.mcap"):
        open_session(path)
    capsys.readouterr()
    for command in (
        ["analyze", str(path)],
        ["replay", str(path), "--rate", "100"],
        ["export", str(path), "--format", "mcap", "-o", str(tmp_path / "y.mcap")],
        # `mailbus open DIR` starts the app, which shows why DIR is no session.
        *([] if path.is_dir() else [["open", str(path)]]),
    ):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert "Traceback" not in err
        assert said in lines[-1], (command, err)
        assert lines[-1].startswith(f"mailbus {command[0]}: "), lines
        # Besides the error, at most the line saying the conversion began.
        assert len(lines) <= 2 and all(" reading " in line for line in lines[:-1]), lines
    # The user's file is never rewritten, nothing is left beside it or in the cache.
    assert (path.read_bytes() if path.is_file() else None) == content
    assert [p.name for p in tmp_path.iterdir() if p.name != "cache"] == ["x.mcap"]
    assert not [p for p in cache.rglob("*") if p.is_file()]


@pytest.mark.slow
def test_an_unreadable_file_is_one_clear_line() -> None:
    # Root reads any file: the command runs as nobody then, in a directory nobody can
    # search (pytest's own temporary directories are root's alone).
    user = 65534 if os.geteuid() == 0 else None
    place = Path(tempfile.mkdtemp(prefix="mailbus-mcap-test-"))
    try:
        place.chmod(0o777)
        path = place / "x.mcap"
        write_foreign(path)
        path.chmod(0)
        cache = place / "cache"
        cache.mkdir(mode=0o777)
        cache.chmod(0o777)
        done = run_mailbus("analyze", str(path), cache=cache, user=user)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"mailbus analyze: error: cannot read {path}: Permission denied"
        ]
    finally:
        shutil.rmtree(place)


def test_damaged_envelopes_are_counted_and_the_rest_is_read(tmp_path: Path) -> None:
    """A file that claims to be an export, with envelopes that are not: each bad one is
    counted in the manifest, an envelope whose body never comes keeps a null body."""
    path = tmp_path / "x.mcap"
    with open(path, "wb") as handle:
        writer = Writer(handle)
        writer.start(profile=mcap_format.PROFILE)
        events = writer.register_channel(
            mcap_format.EVENTS_TOPIC, "json", 0, {mcap_format.ROLE_KEY: "events"}
        )
        good = {"event_index": 0, "kind": "wait.started", "recorded_ns": 5}
        orphan = {
            "event_index": 3,
            "kind": "message.published",
            "recorded_ns": 7,
            "name": "a",
            "message_id": "<m@t>",
            "body_channel": "/a",
            "body_encoding": "json",
        }
        for n, data in enumerate(
            [
                json.dumps(good).encode(),
                b"{not json",
                json.dumps({"event_index": 1, "kind": 3, "recorded_ns": 6}).encode(),
                json.dumps({**good, "event_index": 2, "headers": ["x"]}).encode(),
                json.dumps(orphan).encode(),
            ]
        ):
            writer.add_message(events, 5 + n, data, 5 + n, n)
        writer.finish()
    session = open_session(path)
    assert session.manifest["mcap"]["bad_envelopes"] == 3
    assert session.manifest["mcap"]["bodies_missing"] == 1
    rows = session.read().sort("event_index")
    assert rows["event_index"].to_list() == [0, 3]
    assert rows["body"].to_list() == [None, None]
    assert rows["message_id"].to_list() == [None, "<m@t>"]
