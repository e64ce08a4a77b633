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
from textual.widgets import Input, TabbedContent, TabPane, TextArea
from textual.widgets.tabbed_content import ContentTab

from mailbus_workbench.views.base import View

VIEWS_ID = "views"  # the TabbedContent whose panes are the views


# Tab and shift+tab as Textual binds them on every screen.
FOCUS_MOVES = {"app.focus_next": "focus_next", "app.focus_previous": "focus_previous"}


class TabPressFocus(App[int]):
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and (
            self._move_focus_now(event.key) or self._edit_field_now(event.key)
        ):
            return
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

    def _move_focus_now(self, key: str) -> bool:
        """Tab (shift+tab) moves the focus as the app reads it, before the keys behind it.

        Textual hands the key to the focused widget's queue, and the screen's binding
        moves the focus only when the key has bubbled back up to it: keys that arrived
        with it (a browser's burst, fast typing) were meanwhile handed to the widget that
        still had the focus: a body typed right after Tab landed in the topic field. A
        widget that takes Tab itself (a binding of its own, a TextArea that indents) keeps
        it."""
        if key not in ("tab", "shift+tab"):  # every other key: no binding chain walked
            return False
        active = self.screen.active_bindings.get(key)
        move = FOCUS_MOVES.get(active.binding.action) if active is not None else None
        focused = self.screen.focused
        if move is None or not active.enabled or active.node is not self.screen:  # type: ignore[union-attr]
            return False
        if isinstance(focused, TextArea) and focused.tab_behavior == "indent":
            return False
        getattr(self.screen, move)()
        return True

    def _edit_field_now(self, key: str) -> bool:
        """A text field's own key (backspace, delete, the arrows...) acts as the app reads
        it, in its place among the letters.

        The focused Input inserts a letter as soon as its queue reaches it, but Textual runs
        a (non-priority) binding only once the key has bubbled from the field up to the app:
        a backspace typed between letters, arriving with them, deleted after the letters
        behind it ("robot/posx", backspace, ".x" became "robot/posx."). That order is
        Textual's (reproduced in tests/workbench/test_app_keys_burst.py); here the field's
        binding is queued on the field itself instead, behind the letters before it and
        ahead of those after it (run here at once it would act before the field had
        taken the letters queued to it)."""
        focused = self.screen.focused
        if not isinstance(focused, Input):
            return False
        active = self.screen.active_bindings.get(key)
        if active is None or active.node is not focused or not active.enabled:
            return False
        if active.binding.priority:
            return False  # Textual ran it already, before handing the key on
        focused.call_later(focused.run_action, active.binding.action)
        return True

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
