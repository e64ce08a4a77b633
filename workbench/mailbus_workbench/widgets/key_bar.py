"""The key bar at the bottom of the screen: the keys that act now, drawn as one line.

Textual's Footer remounts one widget per key whenever the focus moves; under a flood
that remount held the UI loop for up to 200 ms and made view switches the slowest
keys (bench/workbench.py). This bar keeps the Footer's look and click-to-press, but a
change of keys only repaints its single line."""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget


@dataclass(frozen=True, slots=True)
class KeyItem:
    key: str  # what a click simulates
    display: str  # how the key is shown (e.g. "^p")
    description: str
    enabled: bool
    palette: bool = False  # the command palette's key, drawn at the right end


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
        """The shown bindings of `screen`, one per action (as Textual's Footer)."""
        app = self.app
        items: list[KeyItem] = []
        actions: set[str] = set()
        palette_key = app.COMMAND_PALETTE_BINDING if app.ENABLE_COMMAND_PALETTE else None
        palette: KeyItem | None = None
        for key, (_node, binding, enabled, _tooltip) in screen.active_bindings.items():
            if key == palette_key:
                palette = KeyItem(
                    binding.key, app.get_key_display(binding), binding.description, enabled, True
                )
                continue
            if not binding.show or binding.action in actions:
                continue
            actions.add(binding.action)
            items.append(
                KeyItem(binding.key, app.get_key_display(binding), binding.description, enabled)
            )
        if palette is not None:
            items.append(palette)
        return tuple(items)

    def render(self) -> Text:
        key_style = self.get_component_rich_style("key-bar--key")
        description_style = self.get_component_rich_style("key-bar--description")
        dim = Style(dim=True)
        text = Text(no_wrap=True, overflow="crop", end="")
        spans: list[tuple[int, int, KeyItem]] = []
        right = [item for item in self.items if item.palette]
        for item in self.items:
            if item.palette:
                continue
            start = text.cell_len
            self._append(text, item, key_style, description_style, dim)
            spans.append((start, text.cell_len, item))
        for item in right:
            label = Text(end="")
            self._append(label, item, key_style, description_style, dim)
            gap = self.size.width - text.cell_len - label.cell_len
            if gap < 1:
                break
            text.append(" " * gap)
            start = text.cell_len
            text.append_text(label)
            spans.append((start, text.cell_len, item))
        self._spans = spans
        return text

    @staticmethod
    def _append(
        text: Text, item: KeyItem, key_style: Style, description_style: Style, dim: Style
    ) -> None:
        extra = Style() if item.enabled else dim
        text.append(f" {item.display} ", key_style + extra)
        if item.description:
            text.append(f"{item.description} ", description_style + extra)

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
