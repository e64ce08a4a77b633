"""The message inspector: body (pretty JSON), headers, raw RFC 5322 source (the bytes that
arrived, or a rebuild when none were kept), diff."""

from __future__ import annotations

import json

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Static, TabbedContent, TabPane, Tree

from mailbus_workbench.model.inspect import (
    body_diff,
    header_rows,
    pretty_body,
    raw_note,
    raw_source,
)
from mailbus_workbench.model.plot_paths import Step, decode, format_path, numeric_paths, value_at
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.field_prompt import FieldPrompt
from mailbus_workbench.widgets.text_update import update_text

# JSON bodies longer than this many pretty lines are shown as a foldable tree (top level
# open, enter or a click opens a branch) instead of one long listing.
FOLD_LINES = 60


class Inspector(Vertical):
    DEFAULT_CSS = """
    Inspector { height: 1fr; }
    Inspector TabbedContent { height: 1fr; }
    Inspector TabPane { height: 1fr; padding: 0 1; }
    Inspector VerticalScroll { height: 1fr; }
    Inspector #inspector-body-tree { height: 1fr; display: none; }
    """

    class PlotRequested(Message):
        """Plot this series (the app shows it in the Plot view)."""

        def __init__(self, series: str) -> None:
            super().__init__()
            self.series = series

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.record: MessageRecord | None = None
        self.texts: dict[str, str] = {}  # what each tab shows, as plain text

    def compose(self) -> ComposeResult:
        with TabbedContent(id="inspector-tabs"):
            for tab, title in (
                ("body", "Body"),
                ("headers", "Headers"),
                ("raw", "Raw"),
                ("diff", "Diff"),
            ):
                with TabPane(title, id=f"inspector-{tab}"):
                    with VerticalScroll(id=f"inspector-{tab}-scroll"):
                        yield Static("Select a message.", id=f"inspector-{tab}-text", markup=False)
                    if tab == "body":
                        yield Tree[object]("body", id="inspector-body-tree")

    @property
    def folded(self) -> bool:
        """Whether the body shows as a foldable tree (a large JSON document)."""
        return bool(self.query_one("#inspector-body-tree", Tree).display)

    def _fold(self, json_text: str | None) -> None:
        tree: Tree[object] = self.query_one("#inspector-body-tree", Tree)
        tree.clear()
        if json_text is not None:
            tree.add_json(json.loads(json_text))
            tree.root.expand()
        tree.display = json_text is not None
        self.query_one("#inspector-body-scroll").display = json_text is None

    def show_tab(self, tab: str) -> None:
        self.query_one("#inspector-tabs", TabbedContent).active = f"inspector-{tab}"

    def show(
        self, record: MessageRecord | None, previous: MessageRecord | None, date: str | None = None
    ) -> None:
        self.record = record
        if record is None:
            self._fold(None)
            self.texts = {}
            for tab in ("body", "headers", "raw", "diff"):
                self._put(tab, "Select a message.")
            return
        event = record.event
        is_json, body = pretty_body(record.body)
        self._fold(record.body if is_json and body.count("\n") >= FOLD_LINES else None)
        self._put(
            "body",
            fmt.json_syntax(body, dark=self.app.current_theme.dark, word_wrap=True)
            if is_json
            else Text(fmt.printable(body, lines=True)),
        )
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for name, value in header_rows(event):
            table.add_row(Text(name), Text(fmt.printable(value)))  # no markup
        self._put("headers", table)
        raw = raw_source(event, date)
        # The bytes may hold anything: printable pictures, never markup.
        note = raw_note(event)
        shown = Text()
        shown.append(note + "\n\n", style="dim italic")
        shown.append(fmt.printable(raw, lines=True))
        self._put("raw", shown)
        diff = body_diff(previous.body if previous else None, record.body)
        self.texts = {
            "body": body,
            "headers": "\n".join(f"{name}: {value}" for name, value in header_rows(event)),
            "raw": raw,
            "raw_note": note,
            "diff": diff,
        }
        self._put(
            "diff",
            Syntax(fmt.printable(diff, lines=True), "diff", background_color="default")
            if diff.startswith("---")
            else Text(fmt.printable(diff, lines=True)),
        )

    def _put(self, tab: str, content: RenderableType | str) -> None:
        """Show `content` on a tab (laid out only if its height changes on the tab shown)."""
        shown = self.query_one("#inspector-tabs", TabbedContent).active == f"inspector-{tab}"
        update_text(self.query_one(f"#inspector-{tab}-text", Static), content, shown=shown)

    # -- plotting a field ---------------------------------------------------------------
    def plot_field(self) -> None:
        """Plot the body's numeric field under the folded tree's cursor, else pick one of
        the body's numeric fields in a prompt with completion."""
        record = self.record
        document = decode(record.body) if record is not None else None
        if record is None or document is None:
            self.notify("Select a message with a JSON body to plot a field.", severity="warning")
            return
        topic = record.event.name
        fields = [topic + format_path(path) for path in numeric_paths(document)]
        if not fields:
            self.notify("This body has no numeric field to plot.", severity="warning")
            return
        path = self._tree_path(document) if self.folded else None
        if path is not None and value_at(document, path) is not None:
            self.post_message(self.PlotRequested(topic + format_path(path)))
            return

        def picked(field: str | None) -> None:
            if field:
                self.post_message(self.PlotRequested(field))

        self.app.push_screen(FieldPrompt(fields), picked)

    def _tree_path(self, document: object) -> tuple[Step, ...] | None:
        """The path of the folded tree's cursor node in `document` (the tree is built
        from it with Tree.add_json: children in the document's order)."""
        node = self.query_one("#inspector-body-tree", Tree).cursor_node
        indices = []
        while node is not None and node.parent is not None:
            indices.append(node.parent.children.index(node))
            node = node.parent
        path: list[Step] = []
        value = document
        for index in reversed(indices):
            if isinstance(value, dict):
                key = list(value)[index]
                path.append(key)
                value = value[key]
            elif isinstance(value, list):
                path.append(index)
                value = value[index]
            else:
                return None
        return tuple(path)
