"""The steps of a new user's first ten minutes, shared by the journeys on the demo and on
a PostOffice system: each one drives the workbench with keys and clicks only (Pilot
`press`/`click`) and waits, bounded, for what the screen draws."""

from __future__ import annotations

import re
from pathlib import Path

from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.find_screen import FindScreen
from mailbus_workbench.textual_internals import key_event
from mailbus_workbench.views.analysis import AnalysisScreen
from mailbus_workbench.views.sessions import sessions_available
from mailbus_workbench.widgets.message_list import MessageList
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static
from waiting import until

SIZE = (120, 40)
# Under load a PostOffice round trip or a worker can take seconds; a hang still fails.
WAIT_S = 30.0

REPLAY_MARK = "⟲"  # what the Topics view draws before a replayed message
REPLAY_PREFIX = "replay/"  # where a replay sends, by default


def shown(app: WorkbenchApp, selector: str) -> str:
    """A Static as drawn (rendered to plain text)."""
    return str(app.screen.query_one(selector, Static).render())


def response(app: WorkbenchApp) -> str:
    """The Call view's response pane as drawn (JSON is shown highlighted)."""
    content = app.query_one("#call-response", Static).content
    return str(getattr(content, "code", content))


def cells(table: DataTable[object], row: int) -> str:
    """One row of a table as drawn, its cells joined."""
    return " ".join(str(cell) for cell in table.get_row_at(row))


def drawn(widget: Widget) -> str:
    """The lines a widget draws itself (a table, a list, a label; a container draws only
    its background: read its children)."""
    return "\n".join(widget.render_line(y).text for y in range(widget.size.height))


def drawn_rows(table: DataTable[object]) -> list[str]:
    return [cells(table, row) for row in range(table.row_count)]


async def type_text(pilot: Pilot[object], text: str) -> None:
    """`text` typed into the focused widget: the key events `Pilot.press` sends, one per
    character, in order, without its wait for an idle process after each one (a workbench
    taking live traffic is never idle: that wait is its 1 s limit, twice a key). The app
    takes them, in order, before any key pressed after; what they do is waited for."""
    for character in text:
        pilot.app.post_message(key_event(character))
    await pilot.pause()


async def to_view(app: WorkbenchApp, pilot: Pilot[object], key: str, view_id: str) -> None:
    """Show a view with its key, then wait for the focus to be in it: the view's own
    keys (F5, F9) reach it only then (pressed at once, under load, they went to the view
    left and were lost)."""
    await pilot.press(key)
    view = app.view(view_id)
    await until(
        pilot,
        lambda: app.focused is not None and view in app.focused.ancestors_with_self,
        f"the focus in the {view_id} view",
    )


async def started(app: WorkbenchApp, pilot: Pilot[object], system: str) -> None:
    """The header says which system the workbench is attached to."""
    header = app.screen.query_one("HeaderTitle")
    await until(pilot, lambda: system in drawn(header), f"{system} in the header", WAIT_S)


async def pick_topic(app: WorkbenchApp, pilot: Pilot[object], topic: str) -> None:
    """Topics (1), the filter (/), the topic typed, Enter: its summary is drawn."""
    await until(pilot, lambda: topic in app.model.topics.stats, f"{topic}'s traffic", WAIT_S)
    await to_view(app, pilot, "1", "topics")
    await pilot.press("slash")
    await type_text(pilot, topic)
    await pilot.press("enter")
    await until(pilot, lambda: topic in shown(app, "#summary-text"), f"{topic} picked")


async def plot_field(app: WorkbenchApp, pilot: Pilot[object], series: str) -> None:
    """Plot (P), a series typed and added: its line says how many points it has."""
    await to_view(app, pilot, "P", "plot")
    await type_text(pilot, series)
    await pilot.press("enter")

    def plotted() -> bool:
        lines = drawn(app.query_one("#plot-series"))
        found = re.search(r"(\d+) points", lines)
        return series in lines and found is not None and int(found.group(1)) > 0

    await until(pilot, plotted, f"{series} plotted with points", WAIT_S)


async def publish(app: WorkbenchApp, pilot: Pilot[object], topic: str, body: str) -> None:
    """Publish (4): topic, Tab, body, F5: the form says where it went."""
    await pilot.press("escape")
    await to_view(app, pilot, "4", "publish")
    await type_text(pilot, topic)
    await pilot.press("tab")
    await type_text(pilot, body)
    await pilot.press("f5")
    await until(pilot, lambda: f"published on {topic}" in shown(app, "#publish-status"), "publish")


async def call_service(app: WorkbenchApp, pilot: Pilot[object], service: str) -> None:
    """Call (5): the service named, F5 with the body offered: the answer is drawn."""
    await pilot.press("escape")
    await to_view(app, pilot, "5", "call")
    await pilot.click("#call-service")
    await type_text(pilot, service)
    await pilot.press("f5")  # the body offered for demo/add: [1, 2, 3]
    await until(pilot, lambda: '"sum": 6' in response(app), "the answer", WAIT_S)


async def find_and_export(
    app: WorkbenchApp, pilot: Pilot[object], query: str, body: str, exported: Path
) -> None:
    """Find (ctrl+f) the message published, Enter lands on it, e exports it as .eml."""
    await pilot.press("ctrl+f")
    await type_text(pilot, query)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, FindScreen), "Find")
    table = app.screen.query_one("#find-results", DataTable)
    await until(pilot, lambda: table.row_count == 1, "the one result", WAIT_S)
    await pilot.press("enter")
    await until(pilot, lambda: app.active_view_id == "topics", "back in Topics")
    messages = app.query_one(MessageList)
    await until(
        pilot, lambda: messages.get_row_at(messages.cursor_row)[3] == body, "on the message"
    )
    await pilot.press("e")
    await until(pilot, lambda: list(exported.glob("*.eml")), "the .eml")


async def start_recording(app: WorkbenchApp, pilot: Pilot[object]) -> None:
    """Sessions (9), F5 records to the directory offered: the status says so."""
    await to_view(app, pilot, "9", "sessions")
    await pilot.press("f5")
    await until(pilot, lambda: "recording to" in shown(app, "#rec-status"), "recording", WAIT_S)


async def call_again(app: WorkbenchApp, pilot: Pilot[object]) -> None:
    """Call (5), F5 sends the call typed before again: a new response is shown, under a
    title of its own."""
    await to_view(app, pilot, "5", "call")
    box = app.query_one("#call-response-box")
    before = str(box.border_title)
    await pilot.press("f5")

    def answered_again() -> bool:
        title = str(box.border_title)
        return title != before and title.startswith("response #") and '"sum"' in response(app)

    await until(pilot, answered_again, "the call answered again", WAIT_S)


async def stop_recording(app: WorkbenchApp, pilot: Pilot[object]) -> str:
    """Sessions (9), F5 stops once events are written: the status says what was
    recorded, and the playback pane offers it. Returns the session's directory, as
    drawn."""
    await to_view(app, pilot, "9", "sessions")

    def written() -> int:
        found = re.search(r"(\d+) written", shown(app, "#rec-status"))
        return int(found.group(1)) if found else 0

    await until(pilot, lambda: written() > 0, "events written", WAIT_S)
    await pilot.press("f5")
    await until(pilot, lambda: "Recorded " in shown(app, "#rec-status"), "stopped", WAIT_S)
    status = shown(app, "#rec-status")
    found = re.search(r"Recorded (\d+) events to (\S+) \(", status)
    assert found is not None, status
    assert int(found.group(1)) > 0, status
    directory = found.group(2)
    path = app.query_one("#play-path", Input)
    await until(pilot, lambda: path.value == directory, "the recording offered for playback")
    return directory


async def open_recording(app: WorkbenchApp, pilot: Pilot[object], topic: str) -> None:
    """F6 opens the session offered: its events are counted and its first messages
    listed (the topic recorded among them), without playing it."""
    await pilot.press("f6")
    await until(
        pilot, lambda: "status complete" in shown(app, "#play-status"), "the session open", WAIT_S
    )
    table = app.query_one("#session-messages", DataTable)
    await until(pilot, lambda: table.row_count > 0, "the session's messages listed", WAIT_S)
    assert any(topic in row for row in drawn_rows(table)), drawn_rows(table)[:5]


async def replay(app: WorkbenchApp, pilot: Pilot[object], topic: str) -> None:
    """F7 plays the session under replay/: the player's line counts the emails sent, and
    the Topics view, filtered to "replay", draws a replayed topic's messages marked as
    replayed."""
    await pilot.press("f7")

    def sent() -> int:
        found = re.search(r"email (\d+) of (\d+)", shown(app, "#play-status"))
        return int(found.group(1)) if found else 0

    await until(pilot, lambda: sent() > 0, "emails replayed", WAIT_S)
    replayed = f"{REPLAY_PREFIX}{topic}"
    await until(pilot, lambda: replayed in app.model.topics.stats, "the replayed topic", WAIT_S)
    await to_view(app, pilot, "1", "topics")
    await pilot.press("slash")
    await type_text(pilot, "replay")
    await pilot.press("enter")
    await until(
        pilot, lambda: REPLAY_PREFIX in shown(app, "#summary-text"), "a replayed topic picked"
    )
    messages = app.query_one(MessageList)
    await until(pilot, lambda: messages.row_count > 0, "the replayed messages", WAIT_S)
    assert all(REPLAY_MARK in cells(messages, row) for row in range(messages.row_count))


async def analyse(app: WorkbenchApp, pilot: Pilot[object], topic: str, service: str) -> None:
    """Sessions (9), F9 opens the analysis of the open session, F5 runs it on polars:
    every table's rows are counted, the topics table lists the topic recorded and the
    services tab (clicked) the service called."""
    await to_view(app, pilot, "9", "sessions")
    await pilot.press("f9")
    await until(pilot, lambda: isinstance(app.screen, AnalysisScreen), "the analysis")
    await pilot.press("f5")
    await until(
        pilot, lambda: "topics: " in shown(app, "#analysis-status"), "the analysis run", WAIT_S
    )
    assert "failed" not in shown(app, "#analysis-status")
    table = app.screen.query_one("#analysis-table-topics", DataTable)
    assert any(topic in row for row in drawn_rows(table)), drawn_rows(table)[:5]
    await pilot.click("#--content-tab-analysis-services")
    table = app.screen.query_one("#analysis-table-services", DataTable)
    await until(pilot, lambda: table.is_on_screen, "the services tab")
    assert any(service in row for row in drawn(table).splitlines()), drawn(table)
    await pilot.press("escape")
    await until(pilot, lambda: not isinstance(app.screen, AnalysisScreen), "back")


async def first_ten_minutes(app: WorkbenchApp, pilot: Pilot[object], exports: Path) -> None:
    """Every step after the start, in a new user's order: pick a topic, plot a field,
    publish, call a service, find and export, then (with the sessions extra) record with
    a call in it, stop, open the recording, replay it and analyse it."""
    await pick_topic(app, pilot, "robot/pose")
    await plot_field(app, pilot, "robot/pose.x")
    await publish(app, pilot, "lab/hello", '{"hello": 1}')
    await call_service(app, pilot, "demo/add")
    await find_and_export(app, pilot, "hello>0", '{"hello": 1}', exports)
    if not sessions_available():
        return
    await start_recording(app, pilot)
    await call_again(app, pilot)  # a call recorded
    await stop_recording(app, pilot)
    await open_recording(app, pilot, "robot/pose")
    await replay(app, pilot, "robot/pose")
    await analyse(app, pilot, "robot/pose", "demo/add")
