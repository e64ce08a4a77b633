"""The header's connection badge and background retries of a server that cannot be
reached: a real closed port, then a real PostOffice daemon started late."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from mailbus.options import Options, options_from_mapping
from mailbus.postoffice.server import ServerConfig, ServerThread
from mailbus.postoffice.store import HashParams
from mailbus.trace import Tracer
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.publish import PublishView
from textual.pilot import Pilot
from textual.widgets import Input, TextArea
from wb_helpers import Posted, until

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def app_for(options: Options, tmp_path: Path) -> WorkbenchApp:
    engine = EngineHost(options, demo=False)
    engine.retry_delays = (0.3, 0.6)
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml", templates_file=tmp_path / "templates.toml"
    )
    return WorkbenchApp(engine=engine, settings=settings)


def imap_options(port: int) -> Options:
    return options_from_mapping(
        {
            "transport": "email",
            "url-smtp": f"smtp://127.0.0.1:{port}",
            "url-imap": f"imap://127.0.0.1:{port}",
            "username": "user",
            "password": "secret",
            "from": "user@localhost",
        }
    )


def start_daemon(tmp_path: Path, port: int) -> ServerThread:
    daemon = ServerThread(
        ServerConfig(
            store_path=tmp_path / "store" / "postoffice.db",
            port=port,
            hash_params=HashParams(log2_n=8, r=8, p=1),  # cheap scrypt, as the PO tests
            auth_delay_s=0.01,
            auth_delay_max_s=0.05,
        ),
        Tracer(),
    )
    daemon.start()
    return daemon


async def publish(app: WorkbenchApp, pilot: Pilot[object], topic: str) -> None:
    app.query_one("#publish-topic", Input).value = topic
    app.query_one("#publish-body", TextArea).text = "1"
    await pilot.press("f5")


async def test_unreachable_imap_server_says_what_is_wrong_and_keeps_retrying(
    tmp_path: Path,
) -> None:
    port = closed_port()
    app = app_for(imap_options(port), tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await until(pilot, lambda: "retrying in" in app.sub_title, "the retrying badge")
        assert f"cannot reach IMAP server imap://127.0.0.1:{port}" in app.sub_title
        await pilot.pause()  # the initial focus settles before the view key
        await pilot.press("4")
        await publish(app, pilot, "lab/t")
        await until(pilot, lambda: posted.of(PublishView.Failed), "the refusal")
        error = posted.of(PublishView.Failed)[-1].error  # type: ignore[attr-defined]
        assert "init()" not in error
        assert f"cannot reach IMAP server imap://127.0.0.1:{port}" in error
        assert "retrying in" in error
        # The engine keeps trying in the background: the attempts are not a one-off.
        assert app.engine is not None
        first = app.engine.connection
        await until(pilot, lambda: app.engine.connection != first, "a further attempt")  # type: ignore[union-attr]
        assert app.engine.connection.state == "retrying"
        assert not app.engine_error  # not reported as a fatal start failure


async def test_postoffice_daemon_started_late_connects_and_publishing_works(
    tmp_path: Path,
) -> None:
    port = closed_port()
    options = options_from_mapping(
        {"transport": "postoffice", "postoffice": {"port": port, "box": "lab.wb", "password": "pw"}}
    )
    app = app_for(options, tmp_path)
    posted = Posted()
    daemon: ServerThread | None = None
    try:
        async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
            await until(pilot, lambda: "retrying in" in app.sub_title, "the retrying badge")
            await pilot.pause()  # the initial focus settles before the view key
            await pilot.press("4")
            await publish(app, pilot, "lab/late")
            await until(pilot, lambda: posted.of(PublishView.Failed), "the refusal")
            daemon = start_daemon(tmp_path, port)
            await until(pilot, lambda: app.sub_title.endswith("· reconnected"), "the badge")
            await publish(app, pilot, "lab/late")
            await until(pilot, lambda: posted.of(PublishView.Published), "the publish")
            await until(pilot, lambda: "lab/late" in app.model.topics.stats, "the topic")
            # An outage later: the receiver's failures show, then its recovery.
            daemon.stop()
            daemon = None
            await until(pilot, lambda: "retrying in" in app.sub_title, "the outage")
            assert "receive failed: " in app.sub_title
            daemon = start_daemon(tmp_path, port)
            await until(pilot, lambda: app.sub_title.endswith("· reconnected"), "the recovery")
    finally:
        if daemon is not None:
            daemon.stop()


async def test_an_engine_started_before_the_app_is_used_as_it_is(
    engine: EngineHost, tmp_path: Path
) -> None:
    # A notebook (or a test) starts its host first; the app's own start must not fail
    # on it with "already initialised".
    assert engine.context.is_initialized
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=engine, settings=settings)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await until(pilot, lambda: app.engine.connection.state == "connected", "connected")  # type: ignore[union-attr]
        await pilot.pause()
        assert not posted.of(WorkbenchApp.EngineFailed)
        assert not app.engine_error
        await pilot.press("4")
        await publish(app, pilot, "lab/t")
        await until(pilot, lambda: posted.of(PublishView.Published), "the publish")
