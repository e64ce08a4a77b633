"""SVG screenshots of every screen on fixed data: `python -m mailbus_workbench.screenshots
[DIRECTORY]` (default `screenshots/`). The snapshot tests use the same scenes."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from mailbus_workbench.fixtures import fixed_app

if TYPE_CHECKING:
    from mailbus.broker import Broker

SIZE = (130, 38)
Scene = Callable[[Pilot[Any]], Awaitable[None]]


async def _topics(pilot: Pilot[Any], tab: str = "body") -> None:
    from mailbus_workbench.views.topics import TopicsView
    from mailbus_workbench.widgets.inspector import Inspector
    from mailbus_workbench.widgets.message_list import MessageList
    from mailbus_workbench.widgets.topic_tree import TopicTree

    await pilot.pause()
    app = pilot.app
    app.query_one(TopicTree).select_topic("sensors/temperature")
    await pilot.pause()
    messages = app.query_one(MessageList)
    messages.focus()
    messages.move_cursor(row=messages.row_count - 2, animate=False)
    await pilot.pause()
    record = messages.selected()
    assert record is not None
    app.query_one(TopicsView).inspect(record)
    app.query_one(Inspector).show_tab(tab)
    await pilot.pause()


async def topics(pilot: Pilot[Any]) -> None:
    await _topics(pilot)


async def topics_raw(pilot: Pilot[Any]) -> None:
    await _topics(pilot, "raw")


async def topics_diff(pilot: Pilot[Any]) -> None:
    await _topics(pilot, "diff")


async def topics_filter(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("slash", *"rbt")
    await pilot.pause()


async def services(pilot: Pilot[Any]) -> None:
    from mailbus_workbench.widgets.trace_list import TraceList

    await pilot.pause()
    await pilot.press("2")
    traces = pilot.app.query_one(TraceList)
    traces.move_cursor(row=3, animate=False)  # the request answered twice
    await pilot.pause()


async def log(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("0")
    await pilot.pause()


async def wait_sets(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("3")
    await pilot.pause()


async def publish(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("4")
    app = pilot.app
    app.query_one("#publish-topic", Input).value = "sensors/temperature"
    app.query_one("#publish-body", TextArea).text = '{"sensor": "t1", "celsius": 22.5}'
    app.query_one("#publish-rate", Input).value = "5"
    app.query_one("#publish-once").focus()  # no blinking cursor in the picture
    await pilot.pause()


async def call(pilot: Pilot[Any]) -> None:
    from mailbus_workbench.views.caller import CallerView, CallRecord

    await pilot.pause()
    await pilot.press("5")
    app = pilot.app
    view = app.query_one(CallerView)
    app.query_one("#call-service", Input).value = "demo/add"
    view._finished(CallRecord(1, "demo/add", "[1, 2, 3]", 2.0, True, '{"sum": 6}', 0.00042))
    view._finished(
        CallRecord(2, "demo/add", "[40, 2]", 0.5, False, "no response within 0.5 s", None)
    )
    view._finished(CallRecord(3, "demo/add", "[4, 51, 33]", 2.0, True, '{"sum": 88}', 0.0031))
    app.query_one("#call-history").focus()  # no blinking cursor in the picture
    await pilot.pause()


async def help_screen(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("f1")
    await pilot.pause()


async def history_cap(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("h")
    await pilot.pause()


def still(scene: Scene) -> Scene:
    """Run `scene`, then stop cursors blinking so that the picture is reproducible."""

    async def run(pilot: Pilot[Any]) -> None:
        await scene(pilot)
        for widget in pilot.app.screen.query("Input, TextArea"):
            widget.cursor_blink = False  # type: ignore[attr-defined]
        await pilot.pause()

    return run


SCENES: dict[str, Scene] = {
    name: still(scene)
    for name, scene in {
        "topics": topics,
        "topics-raw": topics_raw,
        "topics-diff": topics_diff,
        "topics-filter": topics_filter,
        "services": services,
        "wait-sets": wait_sets,
        "publish": publish,
        "call": call,
        "log": log,
        "help": help_screen,
        "history-cap": history_cap,
    }.items()
}


def sample_outbox(directory: Path) -> Path:
    """An outbox with a queued, a retried and a dead mail, at the fixed clock's times."""
    from mailbus.outbox.fs_storage import FsStorage
    from mailbus.outbox.storage import Destination, Metadata, Schedule

    from mailbus_workbench.fixtures import T0

    storage = FsStorage(directory)
    rows = [
        ("sensors/temperature", "ops@example.org", 0, 0, ""),
        ("demo/add", "lab@example.org", 3, 45, "SMTP 451 try again later"),
        ("robot/log", "archive@example.net", 30, 0, "SMTP 550 mailbox unavailable"),
    ]
    entries = []
    for n, (subject, to, attempts, due_s, error) in enumerate(rows):
        data = f"Message-ID: <out{n}@localhost>\r\nSubject: {subject}\r\n\r\nbody\r\n".encode()
        enqueuer = storage.enqueue()
        enqueuer.write(data)
        created = int((T0 - 3600 * n - 42) * 1e9)
        meta = Metadata(
            f"<out{n}@localhost>", "mailbus@localhost", (to,), subject, len(data), created
        )
        due = int((T0 + 12 + due_s) * 1e9)
        (entry,) = enqueuer.commit([Destination(meta, Schedule(attempts, due, 0, error))])
        entries.append(entry)
    storage.dead_letter(storage.send_start(entries[2]))
    return directory


async def queues_scene(pilot: Pilot[Any]) -> None:
    from mailbus_workbench.views.queues import QueuesView

    await pilot.pause()
    await pilot.press("6")
    view = pilot.app.query_one(QueuesView)
    for _ in range(200):  # the listing runs in a worker; bounded wait
        if view.loads:
            break
        await pilot.pause(0.02)
    pilot.app.query_one("#queue-table").focus()
    await pilot.pause()


async def broker_scene(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("7")
    await pilot.pause()


def sample_broker() -> tuple[Broker, Any]:
    """A broker whose slow sink holds its queue, so that depths show."""
    import threading

    from mailbus.broker import Broker, Message

    class Held:
        def __init__(self) -> None:
            self.release = threading.Event()
            self.entered = threading.Event()

        def receive(self, message: Message) -> None:
            self.entered.set()
            self.release.wait(30)

        def destroy(self) -> None:
            self.release.set()

    class Quiet:
        def receive(self, message: Message) -> None:
            pass

        def destroy(self) -> None:
            pass

    broker = Broker.create()
    sensor, held = Quiet(), Held()
    broker.add_module("from robot/pose", sensor)
    broker.add_module("archive", held, capacity=100)
    broker.add_module("tally", Quiet(), capacity=1000)
    broker.add_link("*", "tally")
    broker.add_link("from robot/pose", "archive")
    for i in range(38):
        broker.publish(sensor, Message(f"pose {i}"))
        if i == 0:
            held.entered.wait(10)
    return broker, held


def sample_session(directory: Path) -> Path:
    """A short real recording: the demo's topics and service for about a second."""
    import time

    import mailbus
    from mailbus.demo import DemoSystem
    from mailbus.sessions.recorder import Recorder

    with mailbus.Context(mailbus.Options()) as context:
        recorder = Recorder(directory, context=context)
        demo = DemoSystem(context, seed=5)
        demo.start()
        time.sleep(1.5)  # what is recorded: the demo's own pace
        demo.stop()
        recorder.stop()
    return directory


async def sessions_scene(pilot: Pilot[Any], analyse: bool = False) -> None:
    from mailbus_workbench.views.sessions import AnalysisScreen, SessionsView

    await pilot.pause()
    if pilot.app.active_view_id != "sessions":  # type: ignore[attr-defined]
        await pilot.press("9")
    view = pilot.app.query_one(SessionsView)
    for _ in range(500):  # opening runs in a worker; bounded wait
        if view.session is not None:
            break
        await pilot.pause(0.02)
    if analyse:
        await pilot.press("f9", "f5")
        for _ in range(1500):
            screen = pilot.app.screen
            if isinstance(screen, AnalysisScreen) and screen.tables:
                break
            await pilot.pause(0.02)
    await pilot.pause()


async def _shoot(name: str, scene: Scene, directory: Path, **kwargs: object) -> Path:
    app = fixed_app(**kwargs)
    async with app.run_test(size=SIZE) as pilot:
        await scene(pilot)
        await pilot.pause()
        path = app.save_screenshot(f"{name}.svg", str(directory))
    return Path(path)


async def shoot_all(directory: Path) -> list[Path]:
    import tempfile

    directory.mkdir(parents=True, exist_ok=True)
    paths = [await _shoot(name, scene, directory) for name, scene in SCENES.items()]
    # Outbox entries get random ids: a screenshot, not a snapshot.
    with tempfile.TemporaryDirectory() as scratch:
        outbox = sample_outbox(Path(scratch) / "outbox")
        paths.append(await _shoot("queues", still(queues_scene), directory, outbox_dir=outbox))
    from mailbus_workbench.views.sessions import sessions_available

    if sessions_available():
        with tempfile.TemporaryDirectory() as scratch:
            session = str(sample_session(Path(scratch) / "demo-run"))

            async def opened(pilot: Pilot[Any]) -> None:
                await sessions_scene(pilot)

            async def analysed(pilot: Pilot[Any]) -> None:
                await sessions_scene(pilot, analyse=True)

            from mailbus_workbench.engine import EngineHost

            for name, scene in (("sessions", opened), ("analysis", analysed)):
                engine = EngineHost(demo=False)
                paths.append(
                    await _shoot(name, still(scene), directory, engine=engine, session=session)
                )
    broker, held = sample_broker()
    try:
        paths.append(
            await _shoot("broker", still(broker_scene), directory, brokers={"gateway": broker})
        )
    finally:
        held.release.set()
        for name in ("from robot/pose", "archive", "tally"):
            broker.remove_module(name, timeout=5)
        broker.dec_ref()
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", nargs="?", default="screenshots")
    args = parser.parse_args(argv)
    for path in asyncio.run(shoot_all(Path(args.directory))):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
