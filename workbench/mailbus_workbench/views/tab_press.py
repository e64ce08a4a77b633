"""A press on a view's tab hands that view the keys before the next key is read.

Textual switches tabs through a chain of messages (the tab's click, the tab bar's
activation, the tabbed content's), each handled on its widget's own queue, and a view
then focuses its field with `focus()`, which waits its turn on the app's queue. Keys
typed right after the click are read by the app meanwhile and went to the widget that
still had the focus: "robot/pose.x" typed at once on the Plot tab arrived as
"bot/pose.x", its first letters taken by the Topics view. Here the app, as it reads the
mouse press, shows the tab's view and focuses its widget at once, so every key read
after the press goes to it. Textual's own handling of the click still runs and finds
the tab shown already."""

from __future__ import annotations

from textual import events
from textual.app import App
from textual.css.query import NoMatches
from textual.errors import NoWidget
from textual.widgets import TabbedContent
from textual.widgets.tabbed_content import ContentTab

from mailbus_workbench.views.base import View

VIEWS_ID = "views"  # the TabbedContent whose panes are the views


class TabPressFocus(App[int]):
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.MouseDown) and not event.is_forwarded:
            self.show_pressed_tab(event.x, event.y)
        await super().on_event(event)

    def show_pressed_tab(self, x: int, y: int) -> None:
        """Show the view whose tab is at (x, y) and focus its widget now; else nothing."""
        try:
            widget, _ = self.get_widget_at(x, y)
        except NoWidget:
            return
        if not isinstance(widget, ContentTab):
            return
        tabbed = next((a for a in widget.ancestors if isinstance(a, TabbedContent)), None)
        if tabbed is None or tabbed.id != VIEWS_ID:
            return
        try:
            pane = tabbed.get_pane(widget)
        except (ValueError, NoMatches):
            return
        views = pane.query(View)
        if not pane.id or not views:
            return
        tabbed.active = pane.id  # shows the pane now: its widgets can take the focus
        self.screen.set_focus(views.first().default_focus_widget())
