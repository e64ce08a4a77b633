"""The MCAP conversion cache is bounded: the conversions used least recently are removed
once the cache holds more than its bound, never the one being opened nor one used a
moment ago, and the removal is said; a removed one is converted again when opened."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from mailbus.sessions import mcap_import
from mailbus.sessions.mcap_export import export_mcap
from mailbus.sessions.reader import open_session
from mcap_helpers import write_foreign
from sessions_helpers import SAMPLE_NAMES, SAMPLES


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(path))
    return path


def _files(tmp_path: Path) -> list[Path]:
    """One MCAP file per sample session (and a foreign one): each a cache entry."""
    files = []
    for name in SAMPLE_NAMES:
        path = tmp_path / f"{name}.mcap"
        export_mcap(open_session(SAMPLES / name), path)
        files.append(path)
    foreign = tmp_path / "foreign.mcap"
    write_foreign(foreign)
    files.append(foreign)
    return files


def _size(entry: Path) -> int:
    return sum(p.stat().st_size for p in entry.rglob("*") if p.is_file())


def _used(entry: Path, seconds_ago: float) -> None:
    when = time.time() - seconds_ago
    os.utime(entry, (when, when))


def test_the_least_recently_used_conversions_go_beyond_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    *older, newest = _files(tmp_path)
    entries = [mcap_import.open_mcap(f, report=None).path for f in older]
    assert len(set(entries)) == len(older) >= 3
    for age, entry in enumerate(entries):  # used hours ago, the first the longest ago
        _used(entry, 3_600 * (len(entries) - age))
    # A bound of 0: everything used long ago goes, the one being opened stays.
    monkeypatch.setenv(mcap_import.CACHE_LIMIT_ENV, "0")
    said: list[str] = []
    in_use = mcap_import.open_mcap(newest, report=said.append).path
    assert in_use.is_dir() and not any(e.exists() for e in entries)
    assert [p.name for p in in_use.parent.iterdir()] == [in_use.name]
    assert any(line.startswith(f"removed {len(entries)} MCAP conversion(s)") for line in said)
    # Converted again, then used an hour apart (the one opened above longest ago); room
    # for the two used last only.
    monkeypatch.delenv(mcap_import.CACHE_LIMIT_ENV)
    entries = [mcap_import.open_mcap(f, report=None).path for f in older]
    for age, entry in enumerate(entries):
        _used(entry, 3_600 * (len(entries) - age))
    _used(in_use, 3_600 * 10)
    limit = _size(entries[-1]) + _size(entries[-2])
    monkeypatch.setenv(mcap_import.CACHE_LIMIT_ENV, str(limit / 2**20))
    said.clear()
    opened = mcap_import.open_mcap(older[-1], report=said.append).path  # in use again
    assert opened == entries[-1]
    assert {p.name for p in opened.parent.iterdir()} == {entries[-1].name, entries[-2].name}
    assert any("used least recently" in line for line in said)
    # What was removed comes back when opened: converted again.
    monkeypatch.delenv(mcap_import.CACHE_LIMIT_ENV)
    said.clear()
    again = mcap_import.open_mcap(older[0], report=said.append)
    assert any(line.startswith("reading ") for line in said)
    assert again.read().height == open_session(SAMPLES / SAMPLE_NAMES[0]).read().height


def test_conversions_used_a_moment_ago_and_the_one_in_use_stay(tmp_path: Path) -> None:
    files = _files(tmp_path)
    entries = [mcap_import.open_mcap(f, report=None).path for f in files]
    root = entries[0].parent
    removed = mcap_import.prune_cache(root, 0, keep=entries[0])
    assert removed == [] and all(e.is_dir() for e in entries)  # all used just now
    later = time.time() + mcap_import.RECENTLY_USED_S + 1
    removed = mcap_import.prune_cache(root, 0, keep=entries[0], now=later)
    assert sorted(p for p, _ in removed) == sorted(entries[1:])
    assert [p.name for p in root.iterdir()] == [entries[0].name]
    # An abandoned conversion's temporary directory goes once it is a day old; a fresh
    # one (a conversion under way) stays.
    fresh, stale = root / f".{'0' * 32}.abc", root / f".{'1' * 32}.def"
    fresh.mkdir()
    stale.mkdir()
    _used(stale, mcap_import.STALE_TEMP_S + 60)
    mcap_import.prune_cache(root, 0, keep=entries[0])
    assert fresh.is_dir() and not stale.exists() and entries[0].is_dir()


@pytest.mark.parametrize("value", ["lots", "-5", "nan", "inf"])
def test_a_bad_bound_is_said_and_the_default_kept(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(mcap_import.CACHE_LIMIT_ENV, value)
    said: list[str] = []
    assert mcap_import.cache_limit_bytes(said.append) == mcap_import.CACHE_LIMIT_MB * 2**20
    assert said == [
        f"{mcap_import.CACHE_LIMIT_ENV}={value!r} is not a number of megabytes (>= 0): "
        f"the MCAP cache keeps its default bound of {mcap_import.CACHE_LIMIT_MB} MB"
    ]
    path = tmp_path / "foreign.mcap"
    write_foreign(path)
    assert mcap_import.open_mcap(path, report=None).path.is_dir()
    shutil.rmtree(tmp_path / "cache")
