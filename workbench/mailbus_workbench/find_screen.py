"""Find (ctrl+f): search every topic's kept messages; enter on a result jumps to it in the
Topics view; s (on the results) saves them to a file."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static

from mailbus_workbench.model import export
from mailbus_workbench.model.find import FindResult, Query, QueryError, kept, parse_query, search
from mailbus_workbench.model.state import WorkbenchModel
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.screens import HelpScreen
from mailbus_workbench.share_screens import ExportScreen
from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.widgets import format as fmt

PLACEHOLDER = 'celsius>25   Subject~robot   /ERROR|WARN/   "some text"'
MAX_SHOWN = 1_000  # rows listed (the newest); s saves every match
HINT = (
    "enter: search, then go to the message   s: save the results   escape: close   "
    "F1: the query language"
)


FIND_HELP = """\
## Find
Searches every topic's kept messages; a message matches when every word does.

- `text`, `"two words"`, `'say "hi"'`: the body contains it, any case
- `/regex/`, `/regex/i`: the body matches the regular expression (`i`: any case)
- `Name=value`, `Name~part`, `Name!=value`: exactly, containing, not
- `Name>n`, `Name<n`, `Name>=n`, `Name<=n`: numbers as numbers, other values as text

`Name` is a header when the message has one (`Client-GID`, `Publisher-GID`, `Subject`,
`Message-ID`, `In-Reply-To`, `signature`), else a field of the JSON body: `celsius`,
`pose.x`, `items.0.id`; `robot/pose.x<=0.5` reads it on that topic only.

Examples: `celsius>25`, `Subject~robot /ERROR|WARN/`, `sensor=t1 celsius<=21`.

- **enter** in the query: search; on a result: show it in Topics
- **s** on the results: save them as CSV, JSON Lines or Parquet
- **escape** close
"""


class FindScreen(ModalScreen[MessageRecord | None]):
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("escape", "close", "Close"),
        # Not ctrl+s: that is zellij's scroll mode. In the query field `s` is typed.
        Binding("s", "export", "Save results"),
    ]
    DEFAULT_CSS = """
    FindScreen { align: center middle; }
    FindScreen > Vertical { width: 95%; height: 90%; border: thick $accent;
                            background: $surface; padding: 0 1; }
    FindScreen #find-status { height: auto; }
    FindScreen #find-status.-error { color: $error; }
    FindScreen #find-results { height: 1fr; }
    FindScreen #find-hint { color: $text-muted; height: 1; }
    """

    class Searched(Message):
        """A query was run: its text and how many messages it found (or its error)."""

        def __init__(self, query: str, found: int, error: str = "") -> None:
            super().__init__()
            self.query: Final = query
            self.found: Final = found
            self.error: Final = error

    class Matched(Message):
        """The search worker's result: what `query` matched. Shown unless a newer search
        began meanwhile (then `Searched` is posted for the newer one only)."""

        def __init__(self, query: str, result: FindResult) -> None:
            super().__init__()
            self.query: Final = query
            self.result: Final = result

    def __init__(self, model: WorkbenchModel, query: str = "") -> None:
        super().__init__()
        self.model = model
        self.query_text = query
        self.result: FindResult | None = None
        self.shown: list[MessageRecord] = []  # the rows of the results table

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(self.query_text, placeholder=PLACEHOLDER, id="find-query")
            yield Static(
                "Search every topic's kept messages: text, /regex/, Header=value, field>number.",
                id="find-status",
                markup=False,
            )
            yield MeasuredTable[str | Text](
                id="find-results", cursor_type="row", zebra_stripes=True
            )
            yield Static(HINT, id="find-hint", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#find-results", DataTable)
        table.add_columns("topic", "#", "time (UTC)", "body")
        self.query_one("#find-query", Input).focus()

    @property
    def status(self) -> str:
        return str(self.query_one("#find-status", Static).content)

    @on(Input.Submitted, "#find-query")
    def _submit(self, event: Input.Submitted) -> None:
        self.search(event.value)

    def search(self, text: str) -> None:
        self.query_text = text
        status = self.query_one("#find-status", Static)
        table: DataTable[str | Text] = self.query_one("#find-results", DataTable)
        table.clear()
        self.result = None
        self.shown = []
        try:
            query = parse_query(text)
        except QueryError as exc:
            status.update(f"Cannot search: {exc}")
            status.add_class("-error")
            self.post_message(self.Searched(text, 0, str(exc)))
            return
        status.remove_class("-error")
        if query.empty:
            status.update("Type what to find, then enter.")
            return
        records = kept(self.model.topics)  # here, on the thread that feeds the model
        status.update(f"Searching {len(records)} kept messages…")
        self._search(text, query, records)

    @work(thread=True, exclusive=True, group="find", exit_on_error=False)
    def _search(self, text: str, query: Query, records: list[MessageRecord]) -> None:
        """Matching reads bodies (JSON parsing): off the UI thread, so keys stay quick."""
        result = search(records, query)
        self.post_message(self.Matched(text, result))

    @on(Matched)
    def _show(self, found: Matched) -> None:
        text, result = found.query, found.result
        if text != self.query_text or not self.is_attached:  # newer search, or closed
            return
        status = self.query_one("#find-status", Static)
        table: DataTable[str | Text] = self.query_one("#find-results", DataTable)
        self.result = result
        shown_records = result.records[-MAX_SHOWN:]
        self.shown = shown_records
        for record in shown_records:
            table.add_row(
                Text(record.event.name),
                str(record.number),
                fmt.clock_time(record.time_s),
                Text(fmt.preview(record.body, 200)),
            )
        shown, matched = len(shown_records), len(result.records)
        more = " or more (narrow the query)" if result.truncated else ""
        listed = f"; the newest {shown} listed, s saves all" if shown < matched else ""
        status.update(
            f"{matched}{more} of {result.searched} kept messages match{listed}."
            + (" Enter on one to see it in Topics." if shown else "")
        )
        if shown:
            table.move_cursor(row=shown - 1)
            table.focus()
        self.post_message(self.Searched(text, matched))

    @on(DataTable.RowSelected, "#find-results")
    def _chosen(self, event: DataTable.RowSelected) -> None:
        if 0 <= event.cursor_row < len(self.shown):
            self.dismiss(self.shown[event.cursor_row])

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(FIND_HELP))

    def action_close(self) -> None:
        self.dismiss(None)

    def action_export(self) -> None:
        result = self.result
        if result is None or not result.records:
            self.notify("Nothing to export: search first.", severity="warning", timeout=3)
            return
        rows = export.message_rows(result.records)

        def write(path: Path, overwrite: bool) -> str:
            count = export.write_table(rows, export.MESSAGE_SCHEMA, path, overwrite=overwrite)
            return f"{count} messages"

        self.app.push_screen(
            ExportScreen(
                f"Export {len(rows)} search results",
                export.suggest_path("find", self.model.clock(), ".csv"),
                write,
                "The format follows the suffix: .csv, .jsonl or .parquet.",
            )
        )
