"""A press on a view's tab hands that view the keys before the next key is read.

Textual switches tabs through a chain of messages (the tab's click, the tab bar's
activation, the tabbed content's), each handled on its widget's own queue, and a view
then focuses its field with `focus()`, which waits its turn on the app's queue. Keys
typed right after the click are read by the app meanwhile and went to the widget that
still had the focus: "robot/pose.x" typed at once on the Plot tab arrived as
"bot/pose.x", its first letters taken by the Topics view. Here the app, as it reads the
mouse press, shows the tab's view and focuses its widget at once, so every key read
after the press goes to it. The press and release on a view's tab go no further:
Textual's own click, handled later, could switch back to a tab pressed before."""

from __future__ import annotations

from textual import events
from textual.app import App
from textual.css.query import NoMatches
from textual.errors import NoWidget
from textual.widgets import TabbedContent, TabPane
from textual.widgets.tabbed_content import ContentTab

from mailbus_workbench.views.base import View

VIEWS_ID = "views"  # the TabbedContent whose panes are the views


class TabPressFocus(App[int]):
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.MouseDown | events.MouseUp) and not event.is_forwarded:
            pane = self.view_pane_at(event.x, event.y)
            if pane is not None:
                if isinstance(event, events.MouseDown):
                    self.app_focus = True  # as Textual does on a press
                    self.show_pane(pane)
                # Textual's own click on the tab would switch again, late: a press on
                # Plot and then on Topics could end on Plot, its click coming last.
                return
        await super().on_event(event)

    def view_pane_at(self, x: int, y: int) -> TabPane | None:
        """The pane of the view whose tab is at (x, y), if any."""
        try:
            widget, _ = self.get_widget_at(x, y)
        except NoWidget:
            return None
        if not isinstance(widget, ContentTab):
            return None
        tabbed = next((a for a in widget.ancestors if isinstance(a, TabbedContent)), None)
        if tabbed is None or tabbed.id != VIEWS_ID:
            return None
        try:
            pane = tabbed.get_pane(widget)
        except (ValueError, NoMatches):
            return None
        return pane if pane.id and self._view_of(pane) is not None else None

    @staticmethod
    def _view_of(pane: TabPane) -> View | None:
        # By class, not by a CSS type query: a view's CSS type names need not say View.
        return next(iter(pane.walk_children(View)), None)

    def show_pane(self, pane: TabPane) -> None:
        """Show the view of `pane` and focus its widget now, before the next key."""
        tabbed = next(a for a in pane.ancestors if isinstance(a, TabbedContent))
        # The focus is set here: an activation handled later would set it once more, and
        # after a second press it would take the keys from the tab pressed last.
        with tabbed.prevent(TabbedContent.TabActivated):
            tabbed.active = pane.id or ""  # shows the pane now: its widgets can be focused
        view = self._view_of(pane)
        self.screen.set_focus(view.default_focus_widget() if view is not None else None)
