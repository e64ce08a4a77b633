"""Textual's private names, in one place.

The workbench paints a key's answer without waiting for the 60 Hz frame timer (it
overrides `Screen._on_idle` and calls `Screen._on_timer_update`, Textual's own frame),
and the tests and the benchmark read what Textual does not expose: the notifications
shown, an Input's suggestion, every frame written. These are Textual 8.x internals: this
module is the only one that touches them (tests/contracts/test_private_names.py refuses
them anywhere else), and pyproject.toml bounds textual to the major version the suite
runs, so an upgrade that moves them fails here, in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Self, TypeVar

from textual import events
from textual.app import App
from textual.dom import DOMNode
from textual.geometry import Region, Size
from textual.notifications import Notification
from textual.reactive import Reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable, Input, TabbedContent, TabPane, Tree
from textual.widgets.data_table import CellKey, RowKey

TreeData = TypeVar("TreeData")
CellType = TypeVar("CellType")


class FrameScreen(Screen[object]):
    """A screen that paints its pending changes as soon as it is idle, rather than at
    the frame timer's next slot (up to 16.7 ms later), whenever `paint_when_idle()`
    says so.

    Its focus is not a repaint of its own: Textual repainted the whole screen at each
    change of focus (every view key), although a screen draws only its background and
    the widgets that gain and lose the focus restyle and repaint themselves."""

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def paint_when_idle(self) -> bool:
        """Whether a change pending now is painted at once. False: Textual's pace."""
        return False

    def changes_to_paint(self) -> bool:
        """Whether a change is waiting for a frame (else the screen shows the latest)."""
        return self._frame_pending()

    def _frame_pending(self) -> bool:
        return (
            not self.app._batch_count
            and self.is_current
            and bool(
                self._layout_required
                or self._scroll_required
                or self._repaint_required
                or self._dirty_widgets
            )
            and not self._recompose_required
        )

    async def _on_idle(self, event: events.Idle) -> None:
        if self.paint_when_idle() and self._frame_pending():
            event.prevent_default()
            self._on_timer_update()  # the frame now, not at the timer's next slot
            return
        await super()._on_idle(event)


def frame_timer(screen: Screen[Any]) -> Timer | None:
    """The screen's 60 Hz frame timer."""
    timer: Timer | None = screen._update_timer
    return timer


def notifications(app: App[Any]) -> Iterable[Notification]:
    """The notifications the app shows now."""
    return list(app._notifications)


def suggestion(field: Input) -> str:
    """The completion an Input offers now ("" for none)."""
    return str(field._suggestion)


Display = Callable[[Screen[Any], Any], None]


def wrap_display(app: App[Any], wrapper: Callable[[Display, Screen[Any], Any], None]) -> None:
    """Route every frame the app writes (`update` None: nothing to write) through
    `wrapper(original, screen, update)`, which calls `original` to write it."""
    original = app._display

    def display(screen: Screen[Any], update: Any) -> None:
        wrapper(original, screen, update)

    app._display = display  # type: ignore[method-assign,assignment]


def wrap_screen_steps(screen: Screen[Any], wrap: Callable[[str, Callable[..., Any]], Any]) -> None:
    """Wrap the screen's layout pass and its paint (`wrap(name, method)` returns the
    replacement), for a benchmark's timeline."""
    for name in ("_refresh_layout", "_compositor_refresh"):
        setattr(screen, name, wrap(name.strip("_"), getattr(screen, name)))


def screen_lines(screen: Screen[Any]) -> list[str]:
    """What the terminal shows of `screen` now, as lines of text (its last composition):
    for tests that read the screen as a person does."""
    return [
        "".join(segment.text for segment in strip) for strip in screen._compositor.render_strips()
    ]


def key_event(character: str) -> events.Key:
    """The key event `Pilot.press` sends for one printable character (its key name from
    Textual's private table: "/" is "slash")."""
    from textual.keys import _character_to_key

    return events.Key(_character_to_key(character), character)


def resize_content(widget: Widget, virtual_size: Size) -> None:
    """What Textual does when a scrollable widget's content grows or shrinks, without the
    whole screen's layout and repaint: its scrollbars take the new size and the scroll
    offset stays in range (a scrollbar that must appear or go still asks for a layout,
    through its display). A widget sized by its content is laid out as Textual would."""
    if widget.styles.auto_dimensions:
        widget.refresh(layout=True)
        return
    widget._scroll_update(virtual_size)
    widget.refresh()


class FixedPlace:
    """For a widget whose place on the screen never depends on its content (its size
    comes from its container): Textual lays out and repaints the whole screen at each
    change of a widget's virtual size (15-60 ms with a flow on screen); with this first
    among its bases, only the widget and its scrollbar are redone (`resize_content`)."""

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        assert isinstance(self, Widget)
        resize_content(self, size)


class FixedTree(FixedPlace, Tree[TreeData]):
    """A Tree of a fixed place: a node added, a label set or a group opened redoes only
    the tree (Textual's `_invalidate` asks for the whole screen's layout); shown again
    at the same size, or focused again, it keeps its lines."""

    _lines_size: Size | None = None
    _restyled_by_focus = False

    def watch_has_focus(self, has_focus: bool) -> None:
        self._restyled_by_focus = True
        try:
            super().watch_has_focus(has_focus)  # restyles the tree, now
        finally:
            self._restyled_by_focus = False

    def notify_style_update(self) -> None:
        if not self._restyled_by_focus:
            super().notify_style_update()
            return
        # Textual's Tree drops its drawn lines and rebuilds them at any restyle; its lines
        # are cached per pseudo-class state (focus included), so a change of focus alone
        # can draw from them (the Topics key's frame 2-10 ms sooner with 10,000 topics).
        super(Tree, self).notify_style_update()
        self.refresh()

    _batched = False  # inside `changing_nodes`: invalidated once, at its end
    _invalidated = False

    @contextmanager
    def changing_nodes(self) -> Iterator[None]:
        """Nodes added, removed or relabelled in here invalidate the tree once, at the
        end: Textual drops its lines at each node (230 times at a filter letter)."""
        self._batched, self._invalidated = True, False
        try:
            yield
        finally:
            self._batched = False
            if self._invalidated:
                self._invalidate()

    def _invalidate(self) -> None:
        if self._batched:
            self._invalidated = True
            return
        self._clear_line_cache()
        self._updates += 1
        self.root._reset()
        self.refresh()

    def _on_resize(self, event: events.Resize) -> None:
        # Textual sends a Resize to a widget shown again, its size unchanged; the tree's
        # handler then recomputed and drew all its lines a second time after each view key.
        if event.size == self._lines_size:
            event.prevent_default()  # Textual's handler, a base class's, is not run
            return
        self._lines_size = event.size


class MeasuredTable(DataTable[CellType]):
    """A DataTable whose rows are drawn again at their columns' new widths.

    Textual measures new rows and updated cells when the table is idle, which can come
    after a frame has drawn them (the screen paints on its own idle, and under load the
    table's comes later). Its drawn rows are cached by an update count that neither
    measure moves, so the rows stayed cut to their columns' label widths until something
    else (a resize) moved it: here, a measure that changes a width moves the count."""

    def _widths(self) -> list[int]:
        return [column.content_width for column in self.ordered_columns]

    def _update_column_widths(self, updated_cells: set[CellKey]) -> None:
        widths = self._widths()
        super()._update_column_widths(updated_cells)
        self._redraw_if_changed(widths)

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        widths = self._widths()
        super()._update_dimensions(new_rows)
        self._redraw_if_changed(widths)

    def _redraw_if_changed(self, widths: list[int]) -> None:
        if widths != self._widths():
            self._update_count += 1
            self.refresh()


class FixedTable(FixedPlace, MeasuredTable[CellType]):
    """A DataTable of a fixed place: a row removed redoes only the table (Textual's
    `remove_row` asks for the whole screen's layout, and a list trimmed at each refresh
    under a flow of calls asked for one at every row)."""

    _removing = False

    def remove_row(self, row_key: RowKey | str) -> None:
        self._removing = True
        try:
            super().remove_row(row_key)
        finally:
            self._removing = False

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if self._removing and not self.styles.auto_dimensions:
            layout = False  # its rows moved up; its place did not change
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


class FixedInput(FixedPlace, Input):
    """An Input of a fixed width: a typed letter changes what it scrolls over, never its
    place (Textual lays the whole screen out again at each letter)."""


class ViewTabs(TabbedContent):
    """Tabs whose shown pane is not a repaint of their own: they draw only their
    background, and the tabs and the panes repaint themselves. (Their switcher still
    repaints: Textual finds it by its exact type, so it cannot be a subclass.)"""

    active: Reactive[str] = Reactive("", init=False, repaint=False)


class ViewPane(TabPane):
    """A view's pane, shown by its key or its tab only, and without drawing its own
    lines again.

    A focus landing in it does not show it: Textual's `TabPane.Focused`, handled late,
    showed the pane of a focus set before a second key or press had shown another view.
    Textual repaints a widget whose display changes, although a pane draws only its
    background, which its size (a change of it redraws them) and its styles decide."""

    _displaying = False

    def __init__(self, title: str, *children: Widget, id: str | None = None) -> None:
        super().__init__(title, *children, id=id)
        self.disable_messages(TabPane.Focused)

    @property
    def display(self) -> bool:
        return super().display

    @display.setter
    def display(self, shown: bool | str) -> None:
        self._displaying = True
        try:
            DOMNode.display.fset(self, shown)  # type: ignore[attr-defined]
        finally:
            self._displaying = False

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if self._displaying and not regions:
            repaint = False
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
