"""The first ten minutes of a new user on a PostOffice system, with keys and clicks
only: a real daemon on a loopback port, the demo's participants in a process of their
own, and the workbench attached with its config (as `mailbus --config FILE`). The same
steps as on the demo: pick a topic, plot a field, publish, call a service, find, export,
record, open the recording, replay it and analyse it."""

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
        except AssertionError as failed:
            raise AssertionError(f"{failed}\n{system.output()}") from failed
