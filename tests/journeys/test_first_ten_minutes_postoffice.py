"""The first ten minutes of a new user on a PostOffice system, with keys and clicks
only: a real daemon on a loopback port, the demo's participants in a process of their
own, and the workbench attached with its config (as `mailbus --config FILE`). The same
steps as on the demo: pick a topic, plot a field, publish, call a service, find, export,
record, open the recording, replay it and analyse it."""

from __future__ import annotations

from pathlib import Path

import pytest
from journey_steps import SIZE, first_ten_minutes, started
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from postoffice_system import environment, postoffice_demo

pytestmark = pytest.mark.slow


async def test_a_new_user_walks_a_postoffice_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # where exports and recordings go by default
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    with postoffice_demo(tmp_path) as system:
        app = WorkbenchApp(
            engine=EngineHost.from_config(system.workbench_config), settings=settings
        )
        try:
            async with app.run_test(size=SIZE) as pilot:
                await started(app, pilot, "postoffice as box lab.wb")  # its own box
                await first_ten_minutes(app, pilot, tmp_path)
        except AssertionError as failed:
            raise AssertionError(f"{failed}\n{system.output()}") from failed
