"""The key bar at the bottom of the screen: the keys that act now, drawn as one line.

Textual's Footer remounts one widget per key whenever the focus moves; under a flood
that remount held the UI loop for up to 200 ms and made view switches the slowest
keys (bench/workbench.py). This bar keeps the Footer's look and click-to-press, but a
change of keys only repaints its single line."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget


class Kind(Enum):
    """Where an item stands on the bar, and what is left out first when it is short."""

    VIEW = "view"  # the keys of what has the focus: left, kept while they fit
    SWITCH = "switch"  # a key that shows a view: one group, titled or keys only
    APP = "app"  # help and quit: always drawn
    PALETTE = "palette"  # the command palette's key: always drawn, at the right end


@dataclass(frozen=True, slots=True)
class KeyItem:
    key: str  # what a click simulates
    display: str  # how the key is shown (e.g. "^p")
    description: str
    enabled: bool
    kind: Kind = Kind.VIEW


SWITCH_LABEL = "views"  # after the view keys when they are drawn without their titles


def is_switch(action: str) -> bool:
    return action.startswith("show(")


class KeyBar(Widget):
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
    }
    KeyBar > .key-bar--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeyBar > .key-bar--description {
        color: $footer-description-foreground;
        background: $footer-description-background;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: tuple[KeyItem, ...] = ()
        self._spans: list[tuple[int, int, KeyItem]] = []  # columns of each drawn item

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.call_after_refresh(self._bindings_changed, self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        # While the terminal has lost the focus nothing is focused: keep the last keys.
        if not self.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        items = self.collect(screen)
        if items != self.items:
            self.items = items
            self.refresh()

    def collect(self, screen: Screen[object]) -> tuple[KeyItem, ...]:
        """The shown bindings of `screen`, one per action (as Textual's Footer), plus
        every key that shows a view, shown or not in Textual's footer (the letters of
        the views past the tenth have no digit, and a user needs to see them)."""
        app = self.app
        items: list[KeyItem] = []
        actions: set[str] = set()
        palette_key = app.COMMAND_PALETTE_BINDING if app.ENABLE_COMMAND_PALETTE else None
        palette: KeyItem | None = None
        for key, (node, binding, enabled, _tooltip) in screen.active_bindings.items():
            display = app.get_key_display(binding)
            if key == palette_key:
                palette = KeyItem(binding.key, display, binding.description, enabled, Kind.PALETTE)
                continue
            switch = is_switch(binding.action)
            if not (binding.show or switch) or binding.action in actions:
                continue
            actions.add(binding.action)
            kind = Kind.SWITCH if switch else Kind.APP if node is app else Kind.VIEW
            items.append(KeyItem(binding.key, display, binding.description, enabled, kind))
        if palette is not None:
            items.append(palette)
        return tuple(items)

    def render(self) -> Text:
        styles = (
            self.get_component_rich_style("key-bar--key"),
            self.get_component_rich_style("key-bar--description"),
        )
        by_kind = {kind: [i for i in self.items if i.kind is kind] for kind in Kind}
        palette = Drawn(styles).keys(by_kind[Kind.PALETTE])
        app = Drawn(styles).keys(by_kind[Kind.APP])
        room = self.size.width - palette.width - app.width - 1
        # The keys that show a view are how a user leaves this one: the shortest way of
        # drawing them is always kept; with their titles if there is room, else as keys.
        switches = by_kind[Kind.SWITCH]
        forms = [
            Drawn(styles).keys(switches),
            Drawn(styles).bare_keys(switches),
            Drawn(styles).compact_keys(switches),
        ]
        kept = forms[-1].width
        # The focused widget's keys first, while each fits whole beside those.
        line = Drawn(styles)
        for item in by_kind[Kind.VIEW]:
            if line.width + Drawn(styles).keys([item]).width > room - kept:
                break
            line.keys([item])
        for switch in forms:
            if line.width + switch.width <= room:
                line.append(switch)
                break
        line.append(app)
        if palette.width:
            line.gap(max(1, self.size.width - line.width - palette.width))
            line.append(palette)
        self._spans = line.spans
        return line.text

    def item_at(self, x: int) -> KeyItem | None:
        for start, end, item in self._spans:
            if start <= x < end:
                return item
        return None

    def on_click(self, event: events.Click) -> None:
        item = self.item_at(event.x)
        if item is None:
            return
        event.stop()
        if item.enabled:
            self.app.simulate_key(item.key)
        else:
            self.app.bell()


class Drawn:
    """Part of the bar's line: its text and the columns each key item covers."""

    def __init__(self, styles: tuple[Style, Style]) -> None:
        self.key_style, self.description_style = styles
        self.text = Text(no_wrap=True, overflow="crop", end="")
        self.spans: list[tuple[int, int, KeyItem]] = []

    @property
    def width(self) -> int:
        return self.text.cell_len

    @staticmethod
    def _style(style: Style, item: KeyItem) -> Style:
        return style if item.enabled else style + Style(dim=True)

    def keys(self, items: list[KeyItem]) -> Drawn:
        """Each item as its key and its description, as Textual's footer draws them."""
        for item in items:
            start = self.width
            self.text.append(f" {item.display} ", self._style(self.key_style, item))
            if item.description:
                self.text.append(f"{item.description} ", self._style(self.description_style, item))
            self.spans.append((start, self.width, item))
        return self

    def bare_keys(self, items: list[KeyItem]) -> Drawn:
        """The items' keys side by side, then one label for them all."""
        if not items:
            return self
        for item in items:
            start = self.width
            self.text.append(f" {item.display}", self._style(self.key_style, item))
            self.spans.append((start, self.width, item))
        self.text.append(" ", self.key_style)
        self.text.append(f"{SWITCH_LABEL} ", self.description_style)
        return self

    def compact_keys(self, items: list[KeyItem]) -> Drawn:
        """As bare_keys, with the digits as one range ("0-9"): the narrowest form."""
        digits = [item for item in items if item.display.isdigit()]
        if len(digits) < 2:
            return self.bare_keys(items)
        shown = sorted(item.display for item in digits)
        self.text.append(f" {shown[0]}-{shown[-1]}", self.key_style)  # not one key: no span
        for item in items:
            if item not in digits:
                start = self.width
                self.text.append(f" {item.display}", self._style(self.key_style, item))
                self.spans.append((start, self.width, item))
        self.text.append(" ", self.key_style)
        self.text.append(f"{SWITCH_LABEL} ", self.description_style)
        return self

    def gap(self, columns: int) -> None:
        self.text.append(" " * columns)

    def append(self, other: Drawn) -> None:
        offset = self.width
        self.text.append_text(other.text)
        self.spans += [(start + offset, end + offset, item) for start, end, item in other.spans]
