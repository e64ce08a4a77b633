"""SVG screenshots of every screen on fixed data: `python -m workbench_fixtures.screenshots
[DIRECTORY]` (default `screenshots/`), in the dark theme, and in the light one under
`DIRECTORY/light/`. The snapshot tests use the same scenes.

Screens that read something outside the model (the outbox, a broker, the PostOffice
store, a session directory) get it from `scene_app`, which makes that data with fixed ids
and times and holds it still while the picture is taken."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mailbus_workbench.textual_internals import FrameScreen
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, TextArea

from workbench_fixtures.events import fixed_app
from workbench_fixtures.sample_stores import (
    close_broker,
    sample_broker,
    sample_outbox,
    sample_postoffice,
)

if TYPE_CHECKING:
    from mailbus_workbench.app import WorkbenchApp

SIZE = (130, 38)
Scene = Callable[[Pilot[Any]], Awaitable[None]]


async def _topics(pilot: Pilot[Any], tab: str = "body", *, over_imap: bool = False) -> None:
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
    if over_imap:  # the bytes as an IMAP server hands them over (fixtures: in process)
        from dataclasses import replace

        from mailbus_workbench.model.topics import MessageRecord

        from workbench_fixtures.events import imap_bytes

        event = replace(record.event, raw=imap_bytes(record.event))
        record = MessageRecord(record.number, event)
    app.query_one(TopicsView).inspect(record)
    app.query_one(Inspector).show_tab(tab)
    await pilot.pause()


async def topics(pilot: Pilot[Any]) -> None:
    await _topics(pilot)


async def topics_raw(pilot: Pilot[Any]) -> None:
    await _topics(pilot, "raw", over_imap=True)


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


async def participants_scene(pilot: Pilot[Any]) -> None:
    from mailbus_workbench.widgets.row_table import RowTable

    await pilot.pause()
    await pilot.press("N")
    await pilot.pause()
    pilot.app.query_one("#participants-table", RowTable).move_cursor(row=2)
    await pilot.pause()


async def plot_scene(pilot: Pilot[Any]) -> None:
    from mailbus_workbench.views.plot import PlotView

    await pilot.pause()
    await pilot.press("P")
    view = pilot.app.query_one(PlotView)
    for series in ("robot/pose.x", "robot/pose.y", "robot/pose.theta", "rate(robot/pose)"):
        view.add_series(series)
    # Escape: the box keeps the keys after a series is added.
    await pilot.press("escape", "plus", *["left"] * 10)  # a 10 s window, the cursor 2 s back
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
    from mailbus_workbench.model.call_history import CallRecord
    from mailbus_workbench.views.caller import CallerView

    await pilot.pause()
    await pilot.press("5")
    app = pilot.app
    view = app.query_one(CallerView)
    view.keep_history = False  # the picture writes no history file
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


async def find_results(pilot: Pilot[Any]) -> None:
    """Find (ctrl+f): every warm reading of the fixed data, listed across topics."""
    from mailbus_workbench.find_screen import FindScreen

    await pilot.pause()
    await pilot.press("ctrl+f")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, FindScreen)
    screen.query_one(Input).value = "celsius>22.9 sensor=t1"
    await pilot.press("enter")
    for _ in range(250):  # bounded: 5 s; the search runs in a worker
        if screen.result is not None:
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def history_cap(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("h")
    await pilot.pause()


async def _wait_loaded(pilot: Pilot[Any], view: Any) -> None:
    """Until a view that lists in a worker (`loads` counts its listings) has shown one."""
    for _ in range(250):  # bounded: 5 s
        if view.loads:
            return
        await pilot.pause(0.02)
    raise TimeoutError(f"{type(view).__name__} listed nothing within 5 s")


async def queues_scene(pilot: Pilot[Any]) -> None:
    from mailbus_workbench.views.queues import QueuesView

    await pilot.pause()
    await pilot.press("6")
    await _wait_loaded(pilot, pilot.app.query_one(QueuesView))
    pilot.app.query_one("#queue-table").focus()
    await pilot.pause()


async def broker_scene(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.press("7")
    await pilot.pause()


async def mailboxes_scene(pilot: Pilot[Any]) -> None:
    from mailbus_workbench.views.mailboxes import MailboxesView

    await pilot.pause()
    await pilot.press("8")
    await _wait_loaded(pilot, pilot.app.query_one(MailboxesView))
    await pilot.pause()


def _first_row_drawn_whole(table: Any) -> bool:
    """The first row as drawn shows its whole "what" (runs 25, 27 and stop 27's CI
    pictured the rows cut to their columns' label widths: rows drawn before the table
    measured them stayed cached, which `MeasuredTable` now draws again)."""
    labels = [str(column.label) for column in table.ordered_columns]
    if table.row_count == 0 or "what" not in labels:
        return False
    what = str(table.get_row_at(0)[labels.index("what")])
    return what in table.render_line(1).text  # line 0 is the header


async def sessions_scene(pilot: Pilot[Any], analyse: bool = False) -> None:
    from mailbus_workbench.views.sessions import AnalysisScreen, SessionsView, default_directory

    await pilot.pause()
    app = pilot.app
    if app.active_view_id != "sessions":  # type: ignore[attr-defined]
        await pilot.press("9")
    view = app.query_one(SessionsView)
    for _ in range(500):  # opening runs in a worker; bounded wait (10 s)
        if view.session is not None or view.last_error:
            break
        await pilot.pause(0.02)
    if view.session is None:
        raise TimeoutError(f"the session did not open: {view.last_error or 'timed out'}")
    # The message list fills in a second worker, and the table measures its columns only
    # when idle: wait until the columns have grown past their labels (bounded, 10 s).
    table = app.query_one("#session-messages", DataTable)
    for _ in range(500):
        columns = table.ordered_columns
        # Every wide column measured, not only one (under load the first rows' widths
        # came in before the rest and the snapshot had "what" cut to its label's width).
        wide = [c for c in columns if str(c.label) in ("what", "topic / service", "body")]
        measured = bool(wide) and all(c.content_width > len(c.label) for c in wide)
        if view.listed and measured and _first_row_drawn_whole(table):
            break
        await pilot.pause(0.02)
    else:
        raise TimeoutError(
            "the session's messages were not listed within 10 s: "
            f"listed {view.listed}, error {view.last_error!r}, rows {table.row_count}, widths "
            f"{[(str(c.label), c.content_width) for c in table.ordered_columns]}, "
            f"first row {table.get_row_at(0) if table.row_count else None!r}, "
            f"drawn {table.render_line(1).text!r}, scroll {table.scroll_offset}"
        )
    from mailbus_workbench.widgets.timeline import TimelineBar

    timeline = app.query_one(TimelineBar)
    for _ in range(1500):  # read in a third worker (a cold polars query): bounded, 30 s
        if timeline.timeline is not None:
            break
        await pilot.pause(0.02)
    else:
        raise TimeoutError("the session's timeline was not read within 30 s")
    timeline.move_cursor(1.5)  # a cursor inside the session, as after a seek
    # The suggested directory is stamped with the wall clock: use the frozen one.
    app.query_one("#rec-dir", Input).value = default_directory(app.model.clock())  # type: ignore[attr-defined]
    if analyse:
        await pilot.press("f9", "f5")
        for _ in range(1500):  # bounded: 30 s
            screen = app.screen
            if isinstance(screen, AnalysisScreen) and (screen.tables or screen.error):
                break
            await pilot.pause(0.02)
        screen = app.screen
        if not (isinstance(screen, AnalysisScreen) and screen.tables):
            error = screen.error if isinstance(screen, AnalysisScreen) else ""
            raise RuntimeError(f"the analysis did not finish: {error or 'not within 30 s'}")
        screen.query_one("#analysis-table-topics").focus()
    await pilot.pause()


async def analysis_scene(pilot: Pilot[Any]) -> None:
    await sessions_scene(pilot, analyse=True)


def still(scene: Scene) -> Scene:
    """Run `scene`, then stop cursors blinking so that the picture is reproducible."""

    async def run(pilot: Pilot[Any]) -> None:
        await scene(pilot)
        for widget in pilot.app.screen.query("Input, TextArea"):
            widget.cursor_blink = False  # type: ignore[attr-defined]
        await pilot.pause()
        # A table measures its rows when idle and asks for a layout then: the picture is
        # taken once nothing is left to paint (bounded, 10 s), not from the last frame.
        screen = pilot.app.screen
        for _ in range(500):
            if not isinstance(screen, FrameScreen) or not screen.changes_to_paint():
                break
            await pilot.pause(0.02)

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
        "queues": queues_scene,
        "broker": broker_scene,
        "mailboxes": mailboxes_scene,
        "sessions": sessions_scene,
        "analysis": analysis_scene,
        "log": log,
        "participants": participants_scene,
        "plot": plot_scene,
        "help": help_screen,
        "history-cap": history_cap,
        "find": find_results,
    }.items()
}
# Scenes that need the sessions part (mailbus.sessions, with polars).
SESSION_SCENES = frozenset({"sessions", "analysis"})
# The session these scenes open, relative to the repository (the working directory).
SAMPLE_SESSION = "sample_sessions/demo"
REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def scene_app(name: str) -> Iterator[WorkbenchApp]:
    """The app for scene `name` on fixed data, with what the scene reads outside the
    model made and held still until the `with` ends. Paths are relative to a fixed
    working directory (set here), so that the directories shown are the same each run."""
    if name == "queues":
        with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
            yield fixed_app(outbox_dir=sample_outbox(Path("outbox")))
    elif name == "mailboxes":
        with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
            store = sample_postoffice(Path("postoffice.db"))
            app = fixed_app()
            app.settings = replace(app.settings, postoffice_store=store)
            yield app
    elif name == "broker":
        broker, held = sample_broker()
        try:
            yield fixed_app(brokers={"gateway": broker})
        finally:
            close_broker(broker, held)
    elif name in SESSION_SCENES:
        if not (REPO / SAMPLE_SESSION / "manifest.json").is_file():
            raise FileNotFoundError(f"no sample session at {REPO / SAMPLE_SESSION}")
        with contextlib.chdir(REPO):
            yield fixed_app(session=SAMPLE_SESSION)
    else:
        yield fixed_app()


async def _shoot(name: str, scene: Scene, directory: Path, theme: str) -> Path:
    with scene_app(name) as app:
        async with app.run_test(size=SIZE) as pilot:
            app.theme = theme
            await pilot.pause()
            await scene(pilot)
            await pilot.pause()
            path = app.save_screenshot(f"{name}.svg", str(directory))
    return Path(path)


THEMES = {"textual-dark": "", "textual-light": "light"}  # theme: subdirectory


async def shoot_all(directory: Path) -> list[Path]:
    """Every scene in the dark theme into `directory`, and in the light one into
    `directory/light`."""
    from mailbus_workbench.views.sessions import sessions_available

    directory = directory.resolve()  # the scenes change the working directory
    skip = set() if sessions_available() else SESSION_SCENES
    shots = []
    for theme, sub in THEMES.items():
        target = directory / sub if sub else directory
        target.mkdir(parents=True, exist_ok=True)
        for name, scene in SCENES.items():
            if name not in skip:
                shots.append(await _shoot(name, scene, target, theme))
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", nargs="?", default="screenshots")
    args = parser.parse_args(argv)
    for path in asyncio.run(shoot_all(Path(args.directory))):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
