"""Save as test on a system that publishes only in answer to inputs (issue 36, item 11):
the workbench attached to the parking-lot gate (tests/testing/parking_lot.py), a process
on a real PostOffice daemon. A person enters cars by hand in Publish, asks a fee in Call,
saves the gate's `lot/free` message from Topics and the fee call from Services with keys,
and the saved files pass as saved against a freshly started gate (they send the cars
again, and leave the time stamp out); an expected value edited makes them fail."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mailbus.errors import ServiceTimeoutError
from mailbus.testing.buses import PostOfficeDaemon, toml_text
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.model.state import WorkbenchModel
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.views import save_test
from mailbus_workbench.views.caller import CallerView
from mailbus_workbench.views.publish import PublishView
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.trace_list import TraceList
from textual.pilot import Pilot
from textual.widgets import Input, TextArea
from waiting import eventually
from wb_helpers import Posted, until

GATE = Path(__file__).parents[1] / "testing" / "parking_lot.py"
SIZE = (150, 44)
RUN_TIMEOUT_S = 120.0
WAIT_S = 30.0  # for the gate and the daemon, on a loaded machine


@pytest.fixture
def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PostOfficeDaemon]:
    started = PostOfficeDaemon(tmp_path / "postoffice")
    monkeypatch.setenv("MAILBUS_POSTOFFICE_PASSWORD", started.password)
    monkeypatch.delenv("MAILBUS_CONFIG_FILE", raising=False)
    try:
        yield started
    finally:
        started.stop()


def config(path: Path, daemon: PostOfficeDaemon, name: str) -> Path:
    """The options of one participant of the lot's system: a box of its own in the group
    `lot` (the password travels in MAILBUS_POSTOFFICE_PASSWORD)."""
    options = {**daemon.options("lot", name, name), "announce-period-s": 0.5}
    path.write_text(toml_text(options))
    return path


class Gate:
    """The gate as a process of its own, started afresh (no car parked) as often as asked."""

    def __init__(self, options: Path) -> None:
        self.options = options
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> int:
        self.stop()
        env = {**os.environ, "MAILBUS_CONFIG_FILE": str(self.options)}
        self.proc = subprocess.Popen([sys.executable, str(GATE)], env=env)
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        self.proc = None


async def gate_seen(pilot: Pilot[object], pid: int) -> None:
    """Until the workbench sees the gate's process announce its fee service."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)

    def serving() -> bool:
        return any(
            p.announcement.pid == pid
            and any(e.kind == "server" and e.name == "lot/fee" for e in p.announcement.entities)
            for p in app.model.participants.ordered()
        )

    await until(pilot, serving, "the gate's announcement", WAIT_S)


def free_places(app: WorkbenchApp) -> list[str]:
    return [r.body for r in app.model.topics.history("lot/free")]


async def publish_car(pilot: Pilot[object], posted: Posted, plate: str) -> None:
    """Publish: topic typed once, then the plate changed in the body, F5."""
    app = pilot.app
    body = app.query_one("#publish-body", TextArea)
    if not body.text:
        await pilot.click("#publish-topic")
        await pilot.press(*"lot/enter", "tab", *'{"plate": "', *plate, *'"}')
    else:
        await pilot.click("#publish-body")
        await pilot.press("end", *["backspace"] * (len(plate) + 2), *plate, *'"}')
    assert body.text == f'{{"plate": "{plate}"}}'
    before = len(posted.of(PublishView.Published))
    await pilot.press("f5")
    await until(pilot, lambda: len(posted.of(PublishView.Published)) > before, "the publish")


async def save_with_keys(pilot: Pilot[object]) -> Path:
    """t opens the save dialog; Enter takes the name it derived."""
    app = pilot.app
    await pilot.press("t")
    await until(pilot, lambda: len(app.screen_stack) > 1, "the save dialog")
    path = Path(app.screen.query_one("#export-path", Input).value)
    await pilot.press("enter")
    await until(pilot, lambda: len(app.screen_stack) == 1, "the dialog to close")
    return path


def run_saved(folder: Path, options: Path) -> subprocess.CompletedProcess[str]:
    """As the user runs them against their own system: `mailbus test --config`."""
    return subprocess.run(
        [sys.executable, "-m", "mailbus", "test", str(folder), "--config", str(options)],
        cwd=folder.parent,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


@pytest.mark.slow
async def test_tests_saved_from_the_workbench_send_the_inputs_and_pass_as_saved(
    tmp_path: Path, daemon: PostOfficeDaemon
) -> None:
    gate = Gate(config(tmp_path / "gate.toml", daemon, "gate"))
    bench = config(tmp_path / "bench.toml", daemon, "bench")
    folder = tmp_path / "tests"
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml",
        templates_file=tmp_path / "templates.toml",
        tests_folder=folder,
    )
    app = WorkbenchApp(engine=EngineHost.from_config(bench), settings=settings)
    posted = Posted()
    try:
        async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
            await gate_seen(pilot, gate.start())
            # Publish: two cars enter; the gate answers each on lot/free.
            await pilot.press("4")
            await until(pilot, lambda: app.active_view_id == "publish", "the Publish view")
            await publish_car(pilot, posted, "AB-1")
            await until(pilot, lambda: len(free_places(app)) == 1, "the gate's answer", WAIT_S)
            await publish_car(pilot, posted, "CD-2")
            await until(pilot, lambda: len(free_places(app)) == 2, "the gate's answer", WAIT_S)
            assert '"free": 1' in free_places(app)[-1]

            # Call: the fee of the first car, which the gate answers from what entered.
            await pilot.press("escape", "5")  # out of the body, where 5 is typed
            await until(pilot, lambda: app.active_view_id == "call", "the Call view")
            await pilot.click("#call-service")
            await pilot.press(*"lot/fee")
            app.query_one("#call-body", TextArea).focus()
            await pilot.press("end", "shift+home", *'{"plate": "AB-1"}', "f5")
            caller = app.query_one(CallerView)
            await until(pilot, lambda: caller.history, "the call", WAIT_S)
            assert '"fee": 2.5' in caller.history[-1].response

            # Topics: lot/free, its latest message (one place free), saved with t.
            await pilot.press("1")
            topics = app.query_one(TopicsView)
            await pilot.press("escape")  # from wherever the focus is, to the tree
            await pilot.press("slash", *"lot/free", "enter")
            await until(pilot, lambda: topics.topic == "lot/free", "the topic")
            inspector = app.query_one(Inspector)
            await pilot.click("#message-list", offset=(4, 1))
            await until(pilot, lambda: inspector.record is not None, "a message")
            if '"free": 1' not in inspector.record.body:  # type: ignore[union-attr]
                await pilot.click("#message-list", offset=(4, 2))
            await until(
                pilot,
                lambda: inspector.record is not None and '"free": 1' in inspector.record.body,
                "the latest message",
            )
            free_test = await save_with_keys(pilot)
            assert free_test == folder / "test_lot_free.py"

            # Services: the fee call, saved with t.
            await pilot.press("2")
            traces = app.query_one(TraceList)
            await until(pilot, lambda: traces.row_count >= 1, "the call", WAIT_S)
            await pilot.click("#trace-list", offset=(4, 1))
            await until(
                pilot,
                lambda: (s := traces.selected()) is not None and s.response is not None,
                "the answered call",
            )
            fee_test = await save_with_keys(pilot)
            assert fee_test == folder / "test_lot_fee.py"

            free_source, fee_source = free_test.read_text(), fee_test.read_text()
            # The cars are sent again, in order; the gate's answers are not inputs.
            entered = [
                "bus.publisher('lot/enter').publish('{\"plate\": \"AB-1\"}')",
                "bus.publisher('lot/enter').publish('{\"plate\": \"CD-2\"}')",
            ]
            assert free_source.index(entered[0]) < free_source.index(entered[1])
            assert entered[0] in fee_source and entered[1] in fee_source
            for source in (free_source, fee_source):
                assert "publisher('lot/free')" not in source
            # The places left are checked, the time stamp is left out and shown.
            assert "expect.topic('lot/free', where={'free': 1}, within=10.0)" in free_source
            assert "    #     'stamp': " in free_source
            assert "responds(where={'plate': 'AB-1', 'fee': 2.5})" in fee_source

            # As saved, against a gate started afresh: both pass.
            await gate_seen(pilot, gate.start())
            done = run_saved(folder, bench)
            assert done.returncode == 0, done.stdout + done.stderr
            assert "2 passed" in done.stdout

            # Edited to what this gate does not say, they fail, and say why.
            # (The message test waits 5 s, not 10, for the message that never comes.)
            edited = "{'free': 0}, within=5.0)"
            free_test.write_text(free_source.replace("{'free': 1}, within=10.0)", edited))
            fee_test.write_text(fee_source.replace("'fee': 2.5", "'fee': 3.0"))
            await gate_seen(pilot, gate.start())
            failed = run_saved(folder, bench)
            assert failed.returncode == 1, failed.stdout + failed.stderr
            assert "2 failed" in failed.stdout
            assert "fee: expected 3.0, got 2.5" in failed.stdout
            assert "expected 1 message on 'lot/free'" in failed.stdout
    finally:
        gate.stop()


def test_inputs_end_at_the_saved_call_or_message_and_skip_unanswered_calls(
    engine: EngineHost, tmp_path: Path
) -> None:
    """The inputs of a call another participant made end where it was seen (the saved
    test makes that call itself); the workbench's own message saved is sent by the test,
    last; a call nobody answered is no input (sent again, it would fail the test)."""
    model = WorkbenchModel(wait_sets=engine.wait_sets)
    engine.add_listener(model.feed.listener)
    parts = WorkbenchParts(model, Settings(tests_folder=tmp_path), engine)

    def seen(what: Callable[[], object]) -> None:
        eventually(lambda: model.pump() >= 0 and what())

    engine.publish("lot/enter", '{"plate": "A"}')
    seen(lambda: model.topics.history("lot/enter"))
    other = engine.context.client("echo")
    assert other.call("theirs", 5.0).body == "srieht"
    with pytest.raises(ServiceTimeoutError):
        engine.call("nobody/serves", "lost", 0.2)
    assert engine.call("echo", "mine", 5.0).response.body == "enim"
    engine.publish("lot/enter", '{"plate": "B"}')
    seen(lambda: len(model.topics.history("lot/enter")) == 2)
    seen(lambda: sum(t.response is not None for t in model.services.traces()) == 2)
    assert other.gid not in engine.sender_gids()
    assert len(engine.sender_gids()) == 3  # the closed client of the lost call too

    theirs = next(t for t in model.services.traces() if t.client_gid == other.gid)
    source = save_test.call_source(parts, "echo", "theirs", "srieht", seen=theirs.request)
    assert "bus.publisher('lot/enter').publish('{\"plate\": \"A\"}')" in source
    assert "'mine'" not in source and '"B"' not in source
    assert "bus.client('echo').call('theirs', timeout=10.0)" in source

    own = model.topics.history("lot/enter")[-1]
    source = save_test.message_source(parts, own)
    # Nothing but the test would send it: the test sends it last, then waits for it.
    assert "bus.client('echo').call('mine', timeout=10.0)" in source
    assert "lost" not in source
    assert source.endswith("""publish('{"plate": "B"}')\n    seen.wait()\n""")
