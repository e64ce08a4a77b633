"""Share from the Topics view: copy the inspected message's body, one header or its raw
source to the clipboard (Textual's copy_to_clipboard: OSC 52, so over SSH and in the
browser too); export it as JSON, or the topic's kept messages as a table."""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from mailbus_workbench.model import export
from mailbus_workbench.model.inspect import header_rows
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.share_screens import ExportScreen, HeaderPicker
from mailbus_workbench.widgets.inspector import Inspector

SHARE_BINDINGS = [
    Binding("c", "copy_body", "Copy body", show=False, id="topics.copy_body"),
    Binding("C", "copy_header", "Copy header", show=False, id="topics.copy_header"),
    Binding("R", "copy_raw", "Copy raw", show=False, id="topics.copy_raw"),
    Binding("j", "export_message", "Export JSON", show=False, id="topics.export_message"),
    Binding("s", "export_topic", "Save topic", show=False, id="topics.export_topic"),
]

TABLE_HINT = "The format follows the suffix: .csv, .jsonl or .parquet."


class Copied(Message):
    """Something was put on the clipboard: what (body, a header's name, raw) and the text."""

    def __init__(self, what: str, text: str) -> None:
        super().__init__()
        self.what = what
        self.text = text


class TopicShare(Widget):
    """The share actions of the Topics view (a mixin: the view provides these)."""

    parts: WorkbenchParts
    topic: str | None

    def exportable(self) -> list[MessageRecord]:
        """The topic's kept messages the filter lets through."""
        raise NotImplementedError

    def _inspected(self) -> MessageRecord | None:
        record = self.query_one(Inspector).record
        if record is None:
            self.notify("Select a message first.", severity="warning", timeout=3)
        return record

    def _copy(self, what: str, text: str, record: MessageRecord) -> None:
        self.app.copy_to_clipboard(text)
        self.notify(
            f"Copied {what} of {record.event.name} #{record.number} ({len(text)} characters)",
            timeout=3,
            markup=False,
        )
        self.post_message(Copied(what, text))

    def action_copy_body(self) -> None:
        record = self._inspected()
        if record is not None:
            self._copy("the body", record.body, record)

    def action_copy_raw(self) -> None:
        record = self._inspected()
        if record is not None:
            self._copy("the raw source", self.query_one(Inspector).texts.get("raw", ""), record)

    def action_copy_header(self) -> None:
        record = self._inspected()
        if record is None:
            return
        rows = header_rows(record.event)

        def picked(index: int | None) -> None:
            if index is not None and record is not None:
                name, value = rows[index]
                self._copy(f"header {name}", value, record)

        self.app.push_screen(HeaderPicker(rows), picked)

    def action_export_message(self) -> None:
        record = self._inspected()
        if record is None:
            return
        text = export.message_json(record)

        def write(path: Path, overwrite: bool) -> str:
            export.write_json(text, path, overwrite=overwrite)
            return f"message #{record.number}" if record else "the message"

        name = f"{record.event.name}-{record.number}"
        self.app.push_screen(
            ExportScreen(
                f"Export {record.event.name} #{record.number} as JSON",
                export.suggest_path(name, record.time_s, ".json"),
                write,
                export.MESSAGE_JSON_HOLDS,
            )
        )

    def action_export_topic(self) -> None:
        if self.topic is None:
            self.notify("Select a topic first.", severity="warning", timeout=3)
            return
        rows = export.message_rows(self.exportable())

        def write(path: Path, overwrite: bool) -> str:
            count = export.write_table(rows, export.MESSAGE_SCHEMA, path, overwrite=overwrite)
            return f"{count} messages"

        self.app.push_screen(
            ExportScreen(
                f"Export the {len(rows)} kept messages of {self.topic}",
                export.suggest_path(self.topic, self.parts.model.clock(), ".csv"),
                write,
                TABLE_HINT,
            )
        )
