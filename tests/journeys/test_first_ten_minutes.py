"""The first ten minutes of a new user on the demo, with keys and clicks only: start,
pick a topic, plot a field, publish, call a service, find the message published, export
it, record a session, open the recording, replay it and analyse it. Each step asserts on
what the screen shows (journey_steps)."""

from __future__ import annotations

from pathlib import Path

import pytest
from journey_steps import SIZE, first_ten_minutes, started
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings

pytestmark = pytest.mark.slow


async def test_a_new_user_walks_the_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAILBUS_WORKBENCH_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)  # where exports and recordings go by default
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=EngineHost(seed=3), settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot, "embedded demo")
        await first_ten_minutes(app, pilot, tmp_path)
