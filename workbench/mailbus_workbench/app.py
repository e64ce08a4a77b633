"""The workbench application: tabs of views over one model fed by the engine."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mailbus.broker import Broker
from mailbus.errors import ConfigError, MailbusError
from textual import events, on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header, Input, Static, TabbedContent, Tabs, TextArea

from mailbus_workbench.commands import workbench_commands
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.find_screen import FindScreen
from mailbus_workbench.folding import Folder
from mailbus_workbench.layouts import LayoutKeeper, LayoutStore, layout_commands
from mailbus_workbench.model import queues, session_control
from mailbus_workbench.model.settings import Settings, load_keymap
from mailbus_workbench.model.state import Clock, WorkbenchModel
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.screens import HelpScreen
from mailbus_workbench.speed import SpeedTricks, heap
from mailbus_workbench.speed.key_frames import KeyScreen
from mailbus_workbench.speed.key_turn import KeyTurn
from mailbus_workbench.textual_internals import ViewPane, ViewTabs
from mailbus_workbench.view_table import APP_BINDINGS, GLOBAL_HELP, VIEWS
from mailbus_workbench.views.base import View
from mailbus_workbench.views.plot import PlotView
from mailbus_workbench.views.sessions import SessionsView
from mailbus_workbench.views.tab_press import TabPressFocus
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.key_bar import KeyBar
from mailbus_workbench.widgets.status_line import status_text

if TYPE_CHECKING:
    from mailbus.foxglove.server import FoxgloveServer


class WorkbenchApp(TabPressFocus):
    TITLE = "Mailbus workbench"
    CSS = """
    #views { height: 1fr; }
    #views > ContentSwitcher { height: 1fr; }
    TabPane { padding: 0; height: 1fr; }
    #status { height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    WorkbenchApp.-narrow #topics-left { width: 24; }
    WorkbenchApp.-narrow #services-top { layout: vertical; }
    WorkbenchApp.-narrow #services-left { width: 1fr; height: 1fr; }
    WorkbenchApp.-narrow #services-right { width: 1fr; height: auto; }
    WorkbenchApp.-narrow #waterfall { display: none; }
    WorkbenchApp.-narrow #latency-histogram { display: none; }
    WorkbenchApp.-narrow #services-filter { height: 1; border: none; padding: 0 1; }
    WorkbenchApp.-narrow #service-stats { max-height: 3; }
    WorkbenchApp.-narrow #services-top Divider { display: none; }
    WorkbenchApp.-narrow #views Tab { padding: 0 0 0 1; }
    WorkbenchApp.-narrow #plot-left { width: 28; }
    """
    BINDINGS = list[Binding | tuple[str, str] | tuple[str, str, str]](APP_BINDINGS)

    class ScreenshotSaved(Message):
        def __init__(self, path: str) -> None:
            super().__init__()
            self.path = path

    class EngineFailed(Message):
        """The engine could not start (the starting worker's result); it is not retried."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error: Final = error

    # Below this width the layout narrows (an 80x24 terminal is first-class): shorter tab
    # titles so that every tab shows, narrower side panes, the waterfall left out.
    NARROW_BELOW = 100
    SHORT_TITLES = {
        "waitsets": "Waits",
        "publish": "Pub",
        "mailboxes": "Boxes",
        "sessions": "Sess",
        "participants": "Procs",
    }

    VIEWS = VIEWS

    def __init__(
        self,
        *,
        engine: EngineHost | None = None,
        model: WorkbenchModel | None = None,
        settings: Settings | None = None,
        clock: Clock | None = None,
        live: bool = True,
        raw_date: str | None = None,
        screenshot_dir: Path | None = None,
        outbox_dir: Path | None = None,
        brokers: dict[str, Broker] | None = None,
        session: str | None = None,
        layouts: LayoutStore | None = None,
        layout: str | None = None,
        owns_process: bool = False,
    ) -> None:
        super().__init__()
        settings = settings or Settings()
        # `owns_process`: the `mailbus` command's own process (process-wide tricks allowed).
        self.speed = SpeedTricks(settings.speed_tricks, owns_process)
        self._animation_level_asked = self.animation_level  # TEXTUAL_ANIMATIONS
        self._stilled = self.speed.still
        if self._stilled:
            self.animation_level = "none"
        model = model or WorkbenchModel(
            clock=clock or time.time,
            wait_sets=engine.wait_sets if engine is not None else lambda: (),
            history_cap=settings.history_cap,
            service_timeout_s=settings.service_timeout_s,
        )
        # One copy of what the views are handed; the app reads it through the same parts.
        self.parts = WorkbenchParts(
            model=model,
            settings=settings,
            engine=engine,
            raw_date=raw_date,
            outbox_dir=outbox_dir
            or (queues.outbox_dir(engine.options.sections) if engine is not None else None),
            given_brokers=brokers or {},
        )
        self.live = live  # False: no timer; tests and snapshots call refresh_now()
        self.screenshot_dir = (screenshot_dir or Path.cwd()).absolute()
        self.initial_session = session  # `mailbus open SESSION`
        if session is not None and session_control.sessions_available():
            self.parts.early_open = session_control.EarlyOpen(session)
        self.engine_error = ""
        # The palette's "Serve to Foxglove" (imported then: websockets loads on first use).
        self.foxglove: FoxgloveServer | None = None
        self.status_text = ""
        self._last_refresh: dict[str, float] = {}
        self._rate_mark = (0.0, 0)
        self.folder = Folder(model)  # events folded in slices of about 10 ms
        self._showing = False  # a view key's view is on its way to the screen
        self.key_turn = KeyTurn(self.call_after_refresh)
        self.events_per_s = 0.0
        self.find_query = ""  # the last Find query, offered again
        # None: nothing remembered (tests, snapshots); `layout`: `--layout NAME`.
        self.layouts = LayoutKeeper(layouts, layout) if layouts is not None else None
        if engine is not None:
            engine.add_listener(self.model.feed.listener)
            self.model.participants.own_gid = engine.context.participant_gid

    # -- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with ViewTabs(id="views", initial="topics"):
            for view_id, title, cls in self.VIEWS:
                with ViewPane(f"{title}", id=view_id):
                    yield cls(self.parts, id=f"{view_id}-view")
        yield Static("", id="status", markup=False)
        yield KeyBar(id="key-bar")

    @property
    def model(self) -> WorkbenchModel:
        return self.parts.model

    @property
    def engine(self) -> EngineHost | None:
        return self.parts.engine

    @property
    def settings(self) -> Settings:
        return self.parts.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.parts.settings = settings  # the views hold the same parts: they see it too

    @property
    def raw_date(self) -> str | None:
        return self.parts.raw_date

    @property
    def outbox_dir(self) -> Path | None:
        return self.parts.outbox_dir

    @property
    def brokers(self) -> dict[str, Broker]:
        return self.parts.brokers

    def view_titles(self) -> list[tuple[str, str]]:
        return [(view_id, title) for view_id, title, _ in self.VIEWS]

    @property
    def main_screen(self) -> Screen[object]:
        # The views live on the first screen; queries must not look at a modal on top.
        return self.screen_stack[0]

    def view(self, view_id: str) -> View:
        return self.main_screen.query_one(f"#{view_id}-view", View)

    @property
    def active_view_id(self) -> str:
        return self.main_screen.query_one("#views", TabbedContent).active

    def on_resize(self, event: events.Resize) -> None:
        narrow = event.size.width < self.NARROW_BELOW
        if narrow == self.has_class("-narrow"):
            return
        self.set_class(narrow, "-narrow")
        tabs = self.main_screen.query_one("#views", TabbedContent)
        for view_id, title, _ in self.VIEWS:
            label = self.SHORT_TITLES.get(view_id, title) if narrow else title
            tabs.get_tab(view_id).label = label

    def on_mount(self) -> None:
        self.sub_title = self.engine.description if self.engine else "recorded data"
        if self.settings.theme in self.available_themes:
            self.theme = self.settings.theme
        self.load_keymap()
        # Keys go to the view under the tabs: the tab bar itself never holds the focus
        # (it is still clickable, and 1-9, 0 switch views).
        self.query_one("#views", TabbedContent).query_one(Tabs).can_focus = False
        if self.initial_session is not None:
            self.call_after_refresh(self._open_initial_session, self.initial_session)
        else:
            self.call_after_refresh(self.view("topics").focus_default)
            if self.layouts is not None:
                self.call_after_refresh(self.layouts.restore, self)
        if self.engine is not None:
            self._start_engine()
        if self.live:
            self.set_interval(1.0 / self.settings.refresh_hz, self.refresh_now)
        else:
            self.call_after_refresh(self.refresh_now)

    async def action_quit(self) -> None:
        if self.layouts is not None:
            self.layouts.save(self)  # remembered for this config's next start
        await super().action_quit()

    def _open_initial_session(self, path: str) -> None:
        self.action_show("sessions")
        view = self.view("sessions")
        assert isinstance(view, SessionsView)
        view.open_path(path)

    @work(thread=True, group="engine", exit_on_error=False)
    def _start_engine(self) -> None:
        assert self.engine is not None
        try:
            self.engine.start(retry=True)
        except (MailbusError, OSError) as exc:
            self.post_message(self.EngineFailed(str(exc)))

    @on(EngineFailed)
    def _engine_failed(self, failed: EngineFailed) -> None:
        self.engine_error = failed.error
        self.notify(
            f"Cannot start the engine: {failed.error}", severity="error", timeout=30, markup=False
        )

    def action_serve_foxglove(self) -> None:
        """Serve the engine's system over the Foxglove WebSocket protocol (loopback)."""
        if self.engine is None:
            self.notify("Recorded data only: no live system to serve", severity="warning")
            return
        if self.foxglove is None:
            try:
                from mailbus.foxglove.served import serve_context

                self.foxglove = serve_context(self.engine.context)
            except (MailbusError, ModuleNotFoundError) as exc:
                self.notify(f"Cannot serve to Foxglove: {exc}", severity="error", markup=False)
                return
        self.notify(
            f"Foxglove / Lichtblick: Open connection → Foxglove WebSocket → {self.foxglove.url}",
            timeout=15,
            markup=False,
        )

    def on_unmount(self) -> None:
        if self.foxglove is not None:
            self.foxglove.stop()
        if self.engine is not None:
            self.engine.stop()
        self.folder.stop()
        if self.speed.owns_process:
            heap.thaw()
        self.key_turn.release()  # the GIL's switch interval as it was

    # -- refresh ----------------------------------------------------------------------
    def refresh_now(self) -> None:
        """Fold queued events into the model and repaint the visible view."""
        # A timer tick can land after the screens are popped at exit (nothing to paint),
        # or between a view key and the frame that shows the view (the fill follows it).
        if not self.screen_stack or self._showing:
            return
        with contextlib.suppress(NoMatches):  # views gone: the app is shutting down
            self._refresh()

    def _refresh(self) -> None:
        model = self.model
        self.folder.fold()
        now = model.clock()
        view_id = self.active_view_id
        view = self.view(view_id)
        wall = time.monotonic()
        if wall - self._last_refresh.get(view_id, 0.0) >= view.REFRESH_EVERY_S:
            first_fill = view_id not in self._last_refresh
            self._last_refresh[view_id] = wall
            view.refresh_view(now)
            if first_fill and self.speed.freeze_heap:
                # What exists once start-up is over or a view is first filled lives as
                # long as the app: a full collection need not walk it (heap.py).
                heap.freeze()
        if self.speed.freeze_heap and not heap.freeze_if_due():  # after a long full pass
            # ...or once the model has many new names: what came since (heap.py).
            heap.freeze_if_grown(len(model.topics.stats) + len(model.participants.participants))
        self._update_status(wall)

    def get_default_screen(self) -> Screen[object]:
        return KeyScreen(id="_default")

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            if not self.screen_stack:
                return  # queued as the app closed: no screen to take it (Textual would raise)
            if self.speed.key_turn:
                self.key_turn.key()
            if self.speed.key_frames and isinstance(self.screen, KeyScreen):
                self.screen.key_pressed()
        await super().on_event(event)

    def _update_connection_badge(self) -> None:
        """The header's subtitle: what is attached, and whether it is connected."""
        engine = self.engine
        if engine is None or engine.options.transport == "inprocess":
            return
        badge = engine.connection.describe(time.time())
        subtitle = f"{engine.description} · {badge}"
        if subtitle != self.sub_title:
            self.sub_title = subtitle

    def _update_status(self, wall: float) -> None:
        model = self.model
        last_wall, last_seen = self._rate_mark
        if wall - last_wall >= 1.0:
            if last_wall:
                self.events_per_s = (model.events_seen - last_seen) / (wall - last_wall)
            self._rate_mark = (wall, model.events_seen)
        self._update_connection_badge()
        text = status_text(model, self.events_per_s, self.engine_error)
        if text != self.status_text:
            self.status_text = text
            # One fixed line: no layout pass (a layout reflows the whole screen).
            self.main_screen.query_one("#status", Static).update(text, layout=False)

    # -- actions ----------------------------------------------------------------------
    def action_show(self, view_id: str) -> None:
        """A view's key: shown as last filled, filled after that frame (a speed trick)."""
        self.show_view(view_id, fill_now=not self.speed.fill_after_frame)

    def show_view(self, view_id: str, *, fill_now: bool = True) -> None:
        """Show a view filled now (as actions on it expect), or after the next frame."""
        if self.speed.still:
            self.animation_level = "none"
            self._stilled = True
        elif self._stilled:  # the tricks switched off since: slides as asked again
            self.animation_level = self._animation_level_asked
            self._stilled = False
        self.main_screen.query_one("#views", TabbedContent).active = view_id
        self.view(view_id).focus_default()
        self._showing = not fill_now
        if fill_now:
            self.refresh_now()
        else:
            self.call_after_refresh(self._fill_shown)

    def _fill_shown(self) -> None:
        self._showing = False
        self.refresh_now()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """A tab shown by a click: the keys go to its view from now on.

        Without this the focus stays on the hidden view's widget, and Textual, when it
        hides that widget, moves the focus to a visible sibling in the hidden view (the
        topic filter beside the tree), which shows the old tab again and takes the keys."""
        pane = event.pane
        if pane is None or pane.id is None or event.tabbed_content.id != "views":
            return
        if not self.screen_stack:  # activated while the app shuts down: no screen left
            return
        focused = self.main_screen.focused
        if focused is None or pane not in focused.ancestors:
            view = self.view(pane.id)
            if view.DEFAULT_FOCUS:
                view.focus_default()
            else:
                self.main_screen.set_focus(None)

    def on_inspector_plot_requested(self, event: Inspector.PlotRequested) -> None:
        """`g` in the inspector: the Plot view, with the field added."""
        self.show_view("plot")
        view = self.view("plot")
        assert isinstance(view, PlotView)
        view.add_series(event.series)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_field":  # listed on the key bar, and acting, from a field only
            return isinstance(self.focused, Input | TextArea)
        return True

    def action_leave_field(self) -> None:
        """From a text field to the view's main non-text widget, so keys act again."""
        if isinstance(self.focused, Input | TextArea):
            self.view(self.active_view_id).focus_home()

    def run_view_action(self, view_id: str, action: str) -> None:
        self.show_view(view_id)
        getattr(self.view(view_id), f"action_{action}")()

    def action_find(self) -> None:
        if len(self.screen_stack) > 1:  # over a dialog (or Find itself): not now
            return
        screen = FindScreen(self.model, self.find_query)

        def found(record: MessageRecord | None) -> None:
            self.find_query = screen.query_text
            if self.layouts is not None:
                self.layouts.found(self.find_query)
            if record is not None:
                self.show_view("topics")
                view = self.view("topics")
                assert isinstance(view, TopicsView)
                view.jump_to(record)

        self.push_screen(screen, found)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        view = self.view(self.active_view_id)
        text = GLOBAL_HELP.format(
            views=", ".join(title for _, title in self.view_titles()),
            keymap=self.settings.keymap_file,
            ids=", ".join(f"`{i}`" for i in sorted(self.binding_ids())),
        )
        self.push_screen(HelpScreen(view.HELP + "\n" + text))

    def action_save_svg(self) -> None:
        try:
            self.screenshot_dir.mkdir(parents=True, exist_ok=True)
            path = self.save_screenshot(path=str(self.screenshot_dir))
        except OSError as exc:
            self.notify(f"Cannot save the screenshot: {exc}", severity="error", markup=False)
            return
        self.notify(f"Screenshot saved to {path}", timeout=4, markup=False)
        self.post_message(self.ScreenshotSaved(path))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from workbench_commands(self)
        if self.layouts is not None:
            yield from layout_commands(self, self.layouts)

    # -- keymap -----------------------------------------------------------------------
    def binding_ids(self) -> set[str]:
        ids = {b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id}
        for _, _, cls in self.VIEWS:
            ids |= {b.id for b in cls.BINDINGS if isinstance(b, Binding) and b.id}
        return ids

    def load_keymap(self) -> None:
        try:
            keymap = load_keymap(self.settings.keymap_file, self.binding_ids())
        except ConfigError as exc:
            self.notify(f"Keymap not loaded: {exc}", severity="error", timeout=10, markup=False)
            return
        self.set_keymap(keymap)
