"""`mailbus open PATH` opens the session on a thread started with the app: the view's
open takes it once (an open asked for later reads afresh), and its failure is the same
error the view's own open would show."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus.sessions.reader import SessionError
from mailbus_workbench.model.session_control import EarlyOpen, open_session
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.model.state import WorkbenchModel
from mailbus_workbench.parts import WorkbenchParts

from bench.sessions import synthetic_session


def test_the_early_open_is_the_open_and_is_taken_once(tmp_path: Path) -> None:
    session = tmp_path / "s"
    synthetic_session(session, 2_000, part_rows=1_000)  # no index: the early open builds it
    parts = WorkbenchParts(
        model=WorkbenchModel(),
        settings=Settings(keymap_file=tmp_path / "k", templates_file=tmp_path / "t"),
    )
    parts.early_open = early = EarlyOpen(str(session))
    assert parts.take_early_open(str(tmp_path / "other")) is None  # another path: not it
    parts.early_open = early
    assert parts.take_early_open(str(session)) is early
    assert parts.take_early_open(str(session)) is None  # once
    opened = early.result()
    direct = open_session(str(session))
    assert opened.rows == direct.rows > 0
    assert opened.index.parts == direct.index.parts
    assert (session / "index.json").exists()


def test_an_early_open_that_fails_raises_what_the_open_raises(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "manifest.json").write_text("{not json")
    with pytest.raises(SessionError) as direct:
        open_session(str(junk))
    with pytest.raises(SessionError) as early:
        EarlyOpen(str(junk)).result()
    assert str(early.value) == str(direct.value) and str(junk) in str(early.value)
