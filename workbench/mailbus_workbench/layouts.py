"""Layouts on disk and on screen: the layout each config last had (restored at start,
saved at quit), named layouts (`mailbus --layout NAME`, the palette), TOML files shared
by export and import, and reading or applying a layout to the views.

Files live under the workbench's config directory: `layouts/NAME.toml` for named ones,
`layouts/last/<config>.toml` for each config's last one (`demo` for the built-in demo).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from textual import on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.css.scalar import Unit
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Label

from mailbus_workbench.model.layout import (
    FILTERED_VIEWS,
    PANES,
    Layout,
    LayoutError,
    check_layout_name,
    layout_from_toml,
    layout_to_toml,
    remember_query,
)
from mailbus_workbench.model.settings import config_dir
from mailbus_workbench.views.base import View
from mailbus_workbench.views.plot import PlotView
from mailbus_workbench.views.topics import TopicsView

MAX_LAYOUT_BYTES = 256 * 1024
_FILTER_BOX = {"topics": "#topic-filter", "services": "#services-filter"}


def config_key(config: str | None) -> str:
    """Which config a remembered layout belongs to: `demo`, or the config file's stem and
    a hash of its absolute path (two `mailbus.toml` in two projects stay apart)."""
    if config is None:
        return "demo"
    path = Path(config).expanduser().absolute()
    stem = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)[:40] or "config"
    return f"{stem}-{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class LayoutStore:
    """The layout files of one config."""

    directory: Path
    config: str  # config_key(...)
    views: tuple[str, ...]

    @classmethod
    def for_config(cls, config: str | None, views: Iterable[str]) -> LayoutStore:
        return cls(config_dir() / "layouts", config_key(config), tuple(views))

    @property
    def last_file(self) -> Path:
        return self.directory / "last" / f"{self.config}.toml"

    def named_file(self, name: str) -> Path:
        return self.directory / f"{check_layout_name(name)}.toml"

    def names(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.toml") if p.is_file())

    def read(self, path: Path) -> Layout:
        """A layout file; LayoutError if it is missing, too big or not a layout."""
        try:
            if path.stat().st_size > MAX_LAYOUT_BYTES:
                raise LayoutError(str(path), f"larger than {MAX_LAYOUT_BYTES} bytes")
            text = path.read_text("utf-8")
        except FileNotFoundError:
            raise LayoutError(str(path), "no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise LayoutError(str(path), f"cannot read it: {exc}") from None
        return layout_from_toml(text, source=str(path), views=self.views)

    def load_last(self) -> Layout | None:
        """This config's last layout; None if there is none yet."""
        if not self.last_file.exists():
            return None
        return self.read(self.last_file)

    def load_named(self, name: str) -> Layout:
        path = self.named_file(name)
        if not path.exists():
            saved = ", ".join(self.names()) or "none yet"
            raise LayoutError("layout", f"no layout named {name!r} (saved: {saved})")
        return self.read(path)

    def write(self, path: Path, layout: Layout) -> None:
        """Atomically (a temporary file renamed over it)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(layout_to_toml(layout), "utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            raise LayoutError(str(path), f"cannot write it: {exc}") from None

    def save_last(self, layout: Layout) -> None:
        self.write(self.last_file, layout)

    def save_named(self, name: str, layout: Layout) -> Path:
        path = self.named_file(name)
        self.write(path, layout)
        return path

    def import_file(self, path: Path) -> str:
        """Copy a shared layout file in under its file's name (checked first)."""
        name = check_layout_name(path.stem)
        self.save_named(name, self.read(path))
        return name


# -- the screen's side --------------------------------------------------------------------
class LayoutHost(Protocol):
    """What reading and applying a layout ask of the app."""

    find_query: str  # what Find opens with

    @property
    def active_view_id(self) -> str: ...
    def view(self, view_id: str) -> View: ...
    def show_view(self, view_id: str, *, fill_now: bool = True) -> None: ...
    def notify(
        self,
        message: str,
        *,
        severity: SeverityLevel = ...,
        timeout: float | None = ...,
        markup: bool = ...,
    ) -> None: ...
    def push_screen(self, screen: Screen[str | None]) -> object: ...


class LayoutKeeper:
    """The app's side: restores at start, saves at quit, switches, keeps Find's queries."""

    def __init__(self, store: LayoutStore, name: str | None = None) -> None:
        self.store = store
        self.name = name or ""  # `--layout NAME`: shown instead of the last one
        self.find_queries: tuple[str, ...] = ()  # newest first

    def found(self, query: str) -> None:
        self.find_queries = remember_query(self.find_queries, query)

    def restore(self, app: LayoutHost) -> None:
        """The named layout, else this config's last one. A bad file is said, and the
        workbench goes on as if there were none."""
        try:
            layout = self.store.load_named(self.name) if self.name else self.store.load_last()
        except LayoutError as exc:
            app.notify(f"Layout not restored: {exc}", severity="error", timeout=15, markup=False)
            return
        if layout is not None:
            self.apply(app, layout)

    def switch(self, app: LayoutHost, name: str) -> None:
        try:
            layout = self.store.load_named(name)
        except LayoutError as exc:
            app.notify(f"Layout not shown: {exc}", severity="error", timeout=10, markup=False)
            return
        self.name = name
        self.apply(app, layout)

    def save(self, app: LayoutHost) -> bool:
        """Remember the layout on screen as this config's last one."""
        try:
            self.store.save_last(self.capture(app))
        except (LayoutError, NoMatches):
            return False  # quitting: nothing to tell the user on a screen going away
        return True

    def capture(self, app: LayoutHost) -> Layout:
        """The layout on screen now."""
        plot, topics = app.view("plot"), app.view("topics")
        assert isinstance(plot, PlotView) and isinstance(topics, TopicsView)
        filters = {
            view_id: app.view(view_id).query_one(_FILTER_BOX[view_id], Input).value
            for view_id in FILTERED_VIEWS
        }
        widths: dict[str, int] = {}
        for view_id in ("topics", "services", "plot"):
            for pane_id in PANES:
                for pane in app.view(view_id).query(f"#{pane_id}"):
                    width = pane.styles.inline.width  # set by the user: [ ], the divider
                    if width is not None and width.unit == Unit.CELLS:
                        widths[pane_id] = int(width.value)
        return Layout(
            view=app.active_view_id,
            plot_series=tuple(s.name for s in plot.parts.model.plots),
            plot_window_s=plot.window_s,
            plot_axes=str(getattr(plot, "axes", "shared")),
            filters={k: v for k, v in filters.items() if v},
            find_queries=self.find_queries,
            widths=widths,
            pinned=topics.pinned,
        )

    def apply(self, app: LayoutHost, layout: Layout) -> None:
        """Put `layout` on screen; what cannot be restored (a series no longer valid) is
        said with its reason, and the rest is restored."""
        problems: list[str] = []
        plot = app.view("plot")
        assert isinstance(plot, PlotView)
        for view_id in FILTERED_VIEWS:
            box = app.view(view_id).query_one(_FILTER_BOX[view_id], Input)
            box.value = layout.filters.get(view_id, "")
        for view_id in ("topics", "services", "plot"):
            for pane_id, width in layout.widths.items():
                for pane in app.view(view_id).query(f"#{pane_id}"):
                    pane.styles.width = width
        plot.window_s = layout.plot_window_s
        if hasattr(plot, "axes"):
            plot.axes = layout.plot_axes
        plots = plot.parts.model.plots
        for name in [s.name for s in plots]:
            plots.remove(name)
        for series in layout.plot_series:
            if not plot.add_series(series):
                problems.append(f"series {series}: {plot.error}")
        plot.redraw()
        self.find_queries = layout.find_queries
        app.find_query = layout.find_queries[0] if layout.find_queries else ""
        topics = app.view("topics")
        assert isinstance(topics, TopicsView)
        topics.set_pinned(layout.pinned)
        app.show_view(layout.view)
        if problems:
            app.notify(
                "Layout partly restored: " + "; ".join(problems),
                severity="warning",
                timeout=10,
                markup=False,
            )


class LayoutPrompt(ModalScreen[str | None]):
    """One line asked for (a name, a path); `act` does it and returns what to say, or
    raises LayoutError, shown under the line with the dialog left open."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    LayoutPrompt { align: center middle; }
    LayoutPrompt > Vertical { width: 80; height: auto; border: thick $accent; padding: 1 2;
                              background: $surface; }
    LayoutPrompt #layout-hint { color: $text-muted; }
    LayoutPrompt #layout-error { color: $error; height: auto; }
    """

    def __init__(self, title: str, value: str, hint: str, act: Callable[[str], str]) -> None:
        super().__init__()
        self.title_text, self.value, self.hint, self.act = title, value, hint, act

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, markup=False)
            yield Input(self.value, id="layout-input")
            yield Label(self.hint, id="layout-hint", markup=False)
            yield Label("", id="layout-error", markup=False)

    @on(Input.Submitted, "#layout-input")
    def _submit(self, event: Input.Submitted) -> None:
        try:
            said = self.act(event.value.strip())
        except LayoutError as exc:
            self.query_one("#layout-error", Label).update(str(exc))
            return
        self.notify(said, timeout=4, markup=False)
        self.dismiss(said)

    def action_cancel(self) -> None:
        self.dismiss(None)


def layout_commands(app: LayoutHost, keeper: LayoutKeeper) -> Iterable[SystemCommand]:
    store = keeper.store

    def save_as(name: str) -> str:
        path = store.save_named(name, keeper.capture(app))
        keeper.name = name
        return f"Layout {name!r} saved to {path}"

    def export(text: str) -> str:
        if not text:
            raise LayoutError("file", "enter a file name")
        path = Path(text).expanduser()
        store.write(path, keeper.capture(app))
        return f"Layout exported to {path}"

    def import_(text: str) -> str:
        if not text:
            raise LayoutError("file", "enter a file name")
        name = store.import_file(Path(text).expanduser())
        keeper.switch(app, name)
        return f"Layout {name!r} imported and shown"

    yield SystemCommand(
        "Save layout as…",
        "Name the current view, plot, filters, Find queries and widths (mailbus --layout NAME)",
        lambda: app.push_screen(
            LayoutPrompt(
                "Save the layout as", keeper.name, "A name: letters, digits, _ . -", save_as
            )
        ),
    )
    for name in store.names():
        yield SystemCommand(
            f"Layout: {name}",
            f"Switch to the saved layout {name!r}",
            lambda n=name: keeper.switch(app, n),
        )
    yield SystemCommand(
        "Export layout",
        "Write the current layout to a TOML file to share",
        lambda: app.push_screen(
            LayoutPrompt("Export the layout to", "layout.toml", "A TOML file path", export)
        ),
    )
    yield SystemCommand(
        "Import layout",
        "Read a shared layout TOML file, save it under its file's name and show it",
        lambda: app.push_screen(
            LayoutPrompt("Import a layout from", "", "A layout TOML file path", import_)
        ),
    )
