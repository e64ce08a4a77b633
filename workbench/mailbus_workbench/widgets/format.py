"""Short human formats shared by the widgets (times are UTC so screens are reproducible)."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.syntax import Syntax
from rich.text import Text


def clock_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]


def rate(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:.0f}k/s"
    if value >= 1000:
        return f"{value / 1000:.1f}k/s"
    return f"{value:.1f}/s" if value < 100 else f"{value:.0f}/s"


def size(value: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def age(seconds: float) -> str:
    if seconds < 0:
        seconds = 0
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms ago"
    if seconds < 60:
        return f"{seconds:.1f} s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def latency(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


# Control characters from the wire are drawn as their Unicode pictures (␛ for ESC): sent
# raw, an escape sequence in a body would drive the user's terminal.
_PICTURES = (
    {c: 0x2400 + c for c in range(0x20)} | {0x7F: 0x2421} | {c: 0xFFFD for c in range(0x80, 0xA0)}
)
_KEEP_LINES = {k: v for k, v in _PICTURES.items() if k not in (0x09, 0x0A)}


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with every control character shown as a picture (tabs and newlines kept
    when `lines`)."""
    return text.translate(_KEEP_LINES if lines else _PICTURES)


def preview(text: str, width: int = 60) -> str:
    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def plain(value: object) -> Text:
    """A table cell or label shown literally: a string given to a DataTable or a Tree
    is parsed as Rich markup, and a body like "[/x]" from the wire would crash it."""
    return Text(str(value), no_wrap=True, end="")


def json_syntax(text: str, *, dark: bool, word_wrap: bool = False) -> Syntax:
    """JSON coloured for the theme's background: monokai's braces, colons and commas are
    near white, invisible on a light theme, where Pygments' default style is used."""
    return Syntax(
        text,
        "json",
        theme="monokai" if dark else "default",
        background_color="default",
        word_wrap=word_wrap,
    )


def elide_middle(text: str, width: int) -> str:
    """`text` in at most `width` characters, its middle replaced by "…" if too long (the
    start and the end of a name say most: `robot/…/pose`)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def pack_items(items: list[Text], width: int, gap: str = "  ") -> Text:
    """`items` on lines of at most `width` cells, broken between items only (a count
    never lands on the line below its label)."""
    packed = Text()
    used = 0
    for item in items:
        size = item.cell_len
        if used and width and used + len(gap) + size > width:
            packed.append("\n")
            used = 0
        elif used:
            packed.append(gap)
            used += len(gap)
        packed.append_text(item)
        used += size
    return packed
