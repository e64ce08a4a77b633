"""Services: the highlighted call and the detail panes stay on the same call when old
rows are trimmed from the top of the list."""

from __future__ import annotations

import pytest
from mailbus_workbench import textual_internals
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.widgets.email_pair import EmailPair
from mailbus_workbench.widgets.trace_list import SHOWN, TraceList
from textual.pilot import Pilot
from wb_helpers import Posted, layouts_of, until
from workbench_fixtures.clock import T0
from workbench_fixtures.events import fixed_app, request_event, response_event

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)


def requests(first: int, count: int) -> list:  # type: ignore[type-arg]
    return [
        request_event("demo/add", f"[{n}]", T0 + 20 + n * 0.001, n, f"<trim{n:05d}@localhost>")
        for n in range(first, first + count)
    ]


def add_and_refresh(app: WorkbenchApp, events: list) -> None:  # type: ignore[type-arg]
    """New calls arrive and the Services view repaints (as the app's timer would)."""
    app.model.feed_events(events)
    app.model.pump()
    app.view("services").refresh_view(app.model.clock())


async def held_selection(pilot: Pilot[object], row: int) -> tuple[TraceList, EmailPair, str]:
    """A full list with the cursor on `row` (not the newest: the list does not follow)."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    await pilot.pause()
    await pilot.press("2")
    await until(pilot, lambda: app.focused is app.query_one(TraceList), "the Services view")
    add_and_refresh(app, requests(1000, SHOWN))
    traces, pair = app.query_one(TraceList), app.query_one(EmailPair)
    await pilot.pause()
    assert traces.row_count == SHOWN
    traces.move_cursor(row=row)
    selected = traces.selected()
    assert selected is not None
    await until(pilot, lambda: pair.shown is selected, "the panes to show the call")
    return traces, pair, selected.key


async def following_full_list(pilot: Pilot[object]) -> TraceList:
    """A full list with the cursor on the newest call (the list follows new calls)."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    await pilot.pause()
    await pilot.press("2")
    traces = app.query_one(TraceList)
    await until(pilot, lambda: app.focused is traces, "the Services view")
    add_and_refresh(app, requests(1000, SHOWN))
    await pilot.press("end")
    await until(pilot, lambda: traces.cursor_row == SHOWN - 1, "the newest call")
    await pilot.pause()
    return traces


async def test_the_highlight_stays_on_the_selected_call_when_rows_are_trimmed() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        traces, pair, key = await held_selection(pilot, 60)
        add_and_refresh(app, requests(5000, 25))  # 25 old rows leave the top
        await pilot.pause()
        selected = traces.selected()
        assert selected is not None and selected.key == key, "the highlight moved"
        assert traces.cursor_row == 35
        assert pair.shown is not None and pair.shown.key == key
        assert "trimmed" not in str(pair.query_one("#pair-request").border_title)


async def test_a_trimmed_selection_moves_highlight_and_panes_together() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        traces, pair, key = await held_selection(pilot, 10)
        trimmed = traces.selected()
        assert trimmed is not None
        add_and_refresh(app, requests(5000, 25))  # the selected call leaves the list
        await pilot.pause()
        selected = traces.selected()
        assert selected is not None and selected.key != key
        assert traces.cursor_row == 0, "on the oldest call kept"
        assert pair.shown is selected, "the panes show the highlighted call"
        title = str(pair.query_one("#pair-request").border_title)
        assert f"#{trimmed.sequence} was trimmed" in title, title
        assert app.focused is traces
        await pilot.press("down")  # moving on clears the notice
        await until(
            pilot,
            lambda: traces.cursor_row == 1 and pair.shown is traces.selected(),
            "the next call",
        )
        assert "trimmed" not in str(pair.query_one("#pair-request").border_title)


async def test_rows_trimmed_under_a_flow_of_calls_lay_nothing_out() -> None:
    """A full list that follows the newest call trims old rows at each refresh: only the
    list is redone (Textual's remove_row laid the whole screen out for each row, 20-60 ms
    a refresh with calls flowing), and the newest call is drawn at the bottom."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        traces = await following_full_list(pilot)
        screen = app.screen
        assert isinstance(screen, textual_internals.FrameScreen)
        layouts = layouts_of(screen)
        for first in (5000, 6000, 7000):
            add_and_refresh(app, requests(first, 25))  # 25 old rows leave the top

            def newest_drawn(n: int = first + 24) -> bool:
                lines = [traces.render_line(y).text for y in range(traces.size.height)]
                return any(f" {n} " in line for line in lines)

            await until(pilot, newest_drawn, f"call #{first + 24} in the list")
            await pilot.pause()  # the list's refresh reaches the screen
            await until(pilot, lambda: not screen.changes_to_paint(), "the frame painted")
        assert traces.row_count == SHOWN
        assert layouts == []


async def test_a_refresh_that_trims_rows_draws_the_chosen_call_once() -> None:
    """Following the newest call, each refresh trims old rows; Textual highlights a row
    again at every row removed, and each highlight drew the chosen call's two emails
    (64 times a refresh under 200 calls/s). Now the call highlighted at the end is
    announced once, and a call already shown is not drawn again."""
    app = fixed_app()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        traces, pair = await following_full_list(pilot), app.query_one(EmailPair)
        before = len(posted.of(TraceList.TraceChosen))
        add_and_refresh(app, requests(5000, 25))  # 25 old rows leave the top
        newest = traces.selected()
        assert newest is not None and newest.sequence == 5024
        await until(pilot, lambda: pair.shown is newest, "the panes on the newest call")
        await pilot.pause()
        chosen = posted.of(TraceList.TraceChosen)[before:]
        assert [m.trace.sequence for m in chosen] == [5024]  # type: ignore[attr-defined]
        app.view("services").refresh_view(app.model.clock())  # nothing new
        await pilot.pause()
        assert len(posted.of(TraceList.TraceChosen)) == before + 1


async def test_the_chosen_call_is_drawn_again_when_its_response_arrives() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("2")
        traces = app.query_one(TraceList)
        await until(pilot, lambda: app.focused is traces, "the Services view")
        add_and_refresh(app, requests(1000, 1))
        await pilot.press("end")
        right = app.query_one("#pair-response-text")
        await until(pilot, lambda: "no response yet" in str(right.render()), "a pending call")
        reply = response_event(
            "demo/add", "[7]", T0 + 21, 1000, "<re1000@localhost>", "<trim01000@localhost>"
        )
        add_and_refresh(app, [reply])
        await until(
            pilot,
            lambda: "In-Reply-To: <trim01000@localhost>" in str(right.render()),
            "the response drawn beside its request",
        )
