"""The palette's "Serve to Foxglove": the workbench's own system over the Foxglove
WebSocket protocol (docs/foxglove.md), reached by a client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mailbus.foxglove import protocol as P
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from textual.command import CommandPalette
from wb_helpers import until
from websockets.asyncio.client import connect

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)


async def test_the_palette_serves_the_workbench_system_to_foxglove(
    engine: EngineHost, tmp_path: Path
) -> None:
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml", templates_file=tmp_path / "templates.toml"
    )
    app = WorkbenchApp(engine=engine, settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p", *"serve to foxglove")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.pause()
        await pilot.press("enter")
        await until(pilot, lambda: app.foxglove is not None, "the Foxglove server")
        assert app.foxglove is not None
        async with connect(app.foxglove.url, subprotocols=[P.SUBPROTOCOLS[0]]) as ws:  # type: ignore[list-item]
            info = P.decode_server(await asyncio.wait_for(ws.recv(), 10))
            assert isinstance(info, P.ServerInfo)
            assert "clientPublish" not in info.capabilities  # loopback, read-only
            engine.context.publisher("lab/t").publish('{"a": 1}')
            while True:
                message = P.decode_server(await asyncio.wait_for(ws.recv(), 10))
                if isinstance(message, P.Advertise) and message.channels:
                    break
            assert [c.topic for c in message.channels] == ["lab/t"]
    assert app.foxglove.stats["connected"] == 1
