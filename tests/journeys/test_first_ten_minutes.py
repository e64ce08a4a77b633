"""The first ten minutes of a new user on the demo, with keys and clicks only: start,
pick a topic, plot a field, publish, call a service, find the message published, export
it, record a session, open the recording, replay it and analyse it. Each step asserts on
what the screen shows (journey_steps)."""

from __future__ import annotations

from pathlib import Path

import pytest
from journey_steps import (
    SIZE,
    analyse,
    call_again,
    call_service,
    find_and_export,
    open_recording,
    pick_topic,
    plot_field,
    publish,
    replay,
    start_recording,
    started,
    stop_recording,
)
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.sessions import sessions_available

pytestmark = pytest.mark.slow


async def test_a_new_user_walks_the_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAILBUS_WORKBENCH_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)  # where exports and recordings go by default
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=EngineHost(seed=3), settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot, "embedded demo")
        await pick_topic(app, pilot, "robot/pose")
        await plot_field(app, pilot, "robot/pose.x")
        await publish(app, pilot, "lab/hello", '{"hello": 1}')
        await call_service(app, pilot, "demo/add")
        await find_and_export(app, pilot, "hello>0", '{"hello": 1}', tmp_path)
        if not sessions_available():
            return
        await start_recording(app, pilot)
        await call_again(app, pilot)  # a call recorded
        await stop_recording(app, pilot)
        await open_recording(app, pilot, "robot/pose")
        await replay(app, pilot, "robot/pose")
        await analyse(app, pilot, "robot/pose", "demo/add")
