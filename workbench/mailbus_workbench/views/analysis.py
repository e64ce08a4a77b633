"""The analysis screen: the sessions pipeline's tables for one session on polars, a local
Spark or a Spark Connect remote, with per-table progress, Spark's task progress, and a
cancel. The run is a thread worker: the screen never freezes."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import (
    Button,
    DataTable,
    Input,
    Label,
    ProgressBar,
    Select,
    Static,
    TabbedContent,
    TabPane,
)

from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.key_bar import KeyBar

TABLE_ROWS = 500  # rows shown per analysis table
SPARK_POLL_S = 0.5  # how often Spark's status tracker is read while a run lasts


class Cancelled(Exception):
    """The user cancelled the run."""


class AnalysisScreen(Screen[None]):
    """The pipeline's tables for one session, on the engine the user picks."""

    BINDINGS = [
        Binding("escape", "close", "Back"),
        Binding("f5", "run", "Run"),
        Binding("f8", "cancel", "Cancel"),
    ]
    DEFAULT_CSS = """
    AnalysisScreen Horizontal { height: auto; }
    AnalysisScreen Label { padding: 1 1 0 1; }
    #analysis-engine { width: 16; }
    #analysis-remote { width: 30; }
    #analysis-status { height: auto; padding: 0 1; }
    #analysis-spark { height: auto; padding: 0 1; }
    #analysis-tables { height: 1fr; }
    """

    class Done(Message):
        """The run ended: its tables, or why it did not finish (`error`, "cancelled")."""

        def __init__(self, tables: dict[str, Any], error: str) -> None:
            super().__init__()
            self.tables: Final = tables
            self.error: Final = error

    class Progress(Message):
        """A table is being computed (`table` empty: all done)."""

        def __init__(self, table: str, done: int, total: int) -> None:
            super().__init__()
            self.table: Final = table
            self.done: Final = done
            self.total: Final = total

    class SparkProgress(Message):
        """Spark's tasks of the running analysis: `done` of `total` finished."""

        def __init__(self, done: int, total: int) -> None:
            super().__init__()
            self.done: Final = done
            self.total: Final = total

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.tables: dict[str, Any] = {}
        self.error = ""  # why the last run failed
        self.running = False
        self._cancel = threading.Event()
        self._finished = threading.Event()
        self._spark: Any = None  # the running analysis' Spark session, if any

    def compose(self) -> ComposeResult:
        from mailbus.sessions.analysis import TABLES

        with Horizontal():
            yield Label(f"analysis of {self.path}   engine")
            yield Select(
                [("polars", "polars"), ("spark", "spark")],
                value="polars",
                allow_blank=False,
                id="analysis-engine",
            )
            yield Input(placeholder="sc://HOST:15002 (Spark Connect)", id="analysis-remote")
            yield Button("Run (F5)", id="analysis-run", variant="primary")
            yield Button("Cancel (F8)", id="analysis-cancel", disabled=True)
        yield ProgressBar(total=len(TABLES), id="analysis-progress", show_eta=False)
        yield Static("Pick the engine and run.", id="analysis-status", markup=False)
        yield Static("", id="analysis-spark", markup=False)
        with TabbedContent(id="analysis-tables"):
            for name in TABLES:
                with TabPane(name, id=f"analysis-{name}"):
                    yield MeasuredTable(id=f"analysis-table-{name}", zebra_stripes=True)
        yield KeyBar()

    @on(Button.Pressed, "#analysis-run")
    def action_run(self) -> None:
        if self.running:
            return
        engine = str(self.query_one("#analysis-engine", Select).value)
        remote = self.query_one("#analysis-remote", Input).value.strip() or None
        if remote is not None:
            engine = "spark"  # a Connect remote is Spark
        where = f"spark at {remote}" if remote else engine
        self.query_one("#analysis-status", Static).update(f"running on {where} …")
        self.query_one("#analysis-spark", Static).update("")
        self.query_one("#analysis-progress", ProgressBar).update(progress=0)
        self.query_one("#analysis-run", Button).disabled = True
        self.query_one("#analysis-cancel", Button).disabled = False
        self.running = True
        self._cancel.clear()
        self._finished.clear()
        self._run(engine, remote)

    @on(Button.Pressed, "#analysis-cancel")
    def action_cancel(self) -> None:
        if not self.running or self._cancel.is_set():
            return
        self._cancel.set()
        self.query_one("#analysis-status", Static).update("cancelling …")
        if self._spark is not None:
            self._cancel_spark(self._spark)

    @work(thread=True, group="analysis-cancel")
    def _cancel_spark(self, spark: Any) -> None:
        from mailbus.sessions.spark import cancel

        # The run may have ended meanwhile: it reports itself either way.
        with contextlib.suppress(Exception):
            cancel(spark)

    @work(thread=True, exclusive=True, group="analysis")
    def _run(self, engine: str, remote: str | None) -> None:
        from mailbus.sessions import analysis

        def progress(table: str, done: int, total: int) -> None:
            if self._cancel.is_set():  # polars stops between tables
                raise Cancelled
            self.post_message(self.Progress(table, done, total))

        stop_watching = None
        try:
            dataset = analysis.load([self.path], engine=engine, remote=remote)  # type: ignore[arg-type]
            self._spark = dataset.spark
            if self._spark is not None:
                stop_watching = self._watch_spark(self._spark)
            tables = analysis.analyze(dataset, progress=progress)
            error = ""
        except Exception as exc:  # a session or engine error is shown, never raised
            tables, error = {}, str(exc)
        finally:
            self._finished.set()
            if stop_watching is not None:
                stop_watching()
            self._spark = None
        if self._cancel.is_set():
            tables, error = {}, "cancelled"
        # A closed screen takes no messages: nothing left to show the result on.
        if not (self.is_attached and self.post_message(self.Done(tables, error))):
            self.tables, self.error, self.running = tables, error, False

    def _watch_spark(self, spark: Any) -> Any:
        """Show Spark's task progress: Connect streams it; a classic session is polled."""
        from mailbus.sessions.spark import is_connect, on_connect_progress

        def show(done: int, total: int) -> None:
            self.post_message(self.SparkProgress(done, total))

        if is_connect(spark):
            return on_connect_progress(spark, show)
        self._poll_spark(spark)
        return None

    @work(thread=True, group="analysis-poll")
    def _poll_spark(self, spark: Any) -> None:
        from mailbus.sessions.spark import task_progress

        while not self._finished.wait(SPARK_POLL_S):
            try:
                counts = task_progress(spark)
            except Exception:  # the session is stopping; the run reports why
                return
            if counts is not None and counts[1]:
                self.post_message(self.SparkProgress(*counts))

    @on(SparkProgress)
    def _spark_progress(self, progress: SparkProgress) -> None:
        if self.running and self.is_attached:
            self.query_one("#analysis-spark", Static).update(
                f"Spark tasks {progress.done}/{progress.total}"
            )

    @on(Progress)
    def _progress(self, progress: Progress) -> None:
        if not self.is_attached:  # closed while the run went on
            return
        done, total = progress.done, progress.total
        self.query_one("#analysis-progress", ProgressBar).update(total=total, progress=done)
        if done < total and not self._cancel.is_set():
            self.query_one("#analysis-status", Static).update(f"computing {progress.table} …")

    @on(Done)
    def _done(self, result: Done) -> None:
        tables, error = result.tables, result.error
        self.running = False
        if not self.is_attached:  # closed while the run went on
            return
        self.tables = tables
        self.error = error
        self.query_one("#analysis-run", Button).disabled = False
        self.query_one("#analysis-cancel", Button).disabled = True
        self.query_one("#analysis-spark", Static).update("")
        status = self.query_one("#analysis-status", Static)
        if error == "cancelled":
            status.update(Text("analysis cancelled", style="yellow"))
        elif error:
            status.update(Text(f"analysis failed: {error}", style="red"))
        else:
            status.update(", ".join(f"{n}: {len(t)} rows" for n, t in tables.items()))
        for shown in self.query(DataTable):
            shown.clear(columns=True)
        for name, frame in tables.items():
            table = self.query_one(f"#analysis-table-{name}", DataTable)
            for column in frame.columns:
                table.add_column(column, key=column)
            for row in frame.head(TABLE_ROWS).iter_rows():
                table.add_row(*(_cell(v) for v in row))

    def action_close(self) -> None:
        self.action_cancel()
        self.dismiss(None)


def _cell(value: object) -> Text:
    if value is None:
        return fmt.plain("-")
    if isinstance(value, float):
        return fmt.plain(f"{value:.3f}")
    if isinstance(value, bytes):
        return fmt.plain(value[:40].decode("utf-8", "replace"))
    return fmt.plain(str(value)[:60])
