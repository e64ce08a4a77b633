"""The message list on its own: cursor, following, clicks and what a line shows."""

from __future__ import annotations

from mailbus.trace import Kind, TraceEvent
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.widgets.message_list import MessageList
from textual.app import App, ComposeResult
from wb_helpers import Posted

SIZE = (100, 12)  # the list: a header line and 11 rows


def records(first: int, last: int, body: str = '{"v": 1}') -> list[MessageRecord]:
    return [
        MessageRecord(
            n,
            TraceEvent(
                Kind.RECEIVED.value,
                1_795_000_000_000_000_000 + n * 1_000_000,
                name="t",
                message_id=f"<{n}@x>",
                body=body,
                size=len(body),
            ),
        )
        for n in range(first, last + 1)
    ]


class ListApp(App[None]):
    def compose(self) -> ComposeResult:
        yield MessageList(id="list")


def chosen(posted: Posted) -> list[int]:
    return [m.record.number for m in posted.of(MessageList.MessageChosen)]  # type: ignore[attr-defined]


async def test_follows_new_messages_until_the_cursor_leaves_the_last_row() -> None:
    app = ListApp()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        view = app.query_one(MessageList)
        view.focus()
        view.show("t", records(1, 30))
        await pilot.pause()
        assert view.row_count == 30 and view.selected().number == 30  # type: ignore[union-attr]
        assert view.scroll_y > 0  # the last row is in view
        view.show("t", records(1, 31))
        assert view.selected().number == 31  # type: ignore[union-attr]
        await pilot.press("up", "up")
        assert view.selected().number == 29  # type: ignore[union-attr]
        view.show("t", records(5, 40))  # older ones fell out of the cap, newer came
        assert view.selected().number == 29  # type: ignore[union-attr]
        await pilot.press("end")
        assert view.selected().number == 40  # type: ignore[union-attr]
        await pilot.press("home")
        assert view.selected().number == 5 and view.scroll_y == 0  # type: ignore[union-attr]
        await pilot.press("pagedown")
        assert view.cursor_row == 10  # a page: the 11 rows in view less one
        await pilot.pause()
        assert chosen(posted)[-4:] == [29, 40, 5, 15]


async def test_a_new_topic_starts_at_its_newest_message() -> None:
    app = ListApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MessageList)
        view.show("a", records(1, 20))
        view.move_cursor(row=3)
        view.show("b", records(100, 104))
        await pilot.pause()
        assert view.topic == "b" and view.selected().number == 104  # type: ignore[union-attr]
        view.show(None, [])
        assert view.row_count == 0 and view.selected() is None and view.newest == 0


async def test_click_selects_the_row_under_the_pointer() -> None:
    app = ListApp()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        view = app.query_one(MessageList)
        view.show("t", records(1, 5))
        await pilot.pause()
        await pilot.click(MessageList, offset=(20, 3))  # line 0 is the header
        assert view.selected().number == 3  # type: ignore[union-attr]
        await pilot.click(MessageList, offset=(20, 0))
        await pilot.click(MessageList, offset=(20, 9))  # below the last row
        assert view.selected().number == 3  # type: ignore[union-attr]
        await pilot.pause()
        assert chosen(posted)[-1] == 3


async def test_a_line_shows_the_cells_with_control_characters_as_pictures() -> None:
    app = ListApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MessageList)
        view.show("t", records(7, 7, body="a\x1b[2Jb\x07 [bold]c\n  d"))
        await pilot.pause()
        header = view.render_line(0).text
        assert header.split() == ["#", "time", "(UTC)", "size", "body"]
        line = view.render_line(1).text
        assert len(line) == view.scrollable_content_region.width
        number, time, size, body = view.get_row_at(0)
        assert number == "7" and size == "19 B" and time.count(":") == 2
        assert body == "a\u241b[2Jb\u2407 [bold]c d"  # ESC and BEL drawn, never sent
        assert body in line and "\x1b" not in line


async def test_chosen_is_posted_only_when_the_message_under_the_cursor_changes() -> None:
    app = ListApp()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        view = app.query_one(MessageList)
        view.show("a", records(1, 5))
        view.show("a", records(1, 5))  # a refresh with nothing new: the inspector stays
        view.show("a", records(2, 5))  # the oldest fell out; the cursor is still on 5
        await pilot.pause()
        assert chosen(posted) == [5]
        view.show("b", records(1, 5))  # same number, another topic: another message
        await pilot.pause()
        assert chosen(posted) == [5, 5]
        assert posted.of(MessageList.MessageChosen)[-1].record.event.name == "t"  # type: ignore[attr-defined]
