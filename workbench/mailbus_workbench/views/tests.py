"""Tests: run a folder of tests against the system the workbench is attached to, as
Postman runs a collection, and show each test and each check passing or failing, with
its duration, each expectation's observed latency and, for a failure, its report (the
near-miss diff and the timeline).

The run is `mailbus test` in a child process, waited for on a worker thread: the screen
never blocks, and the stop key ends the child and what it started (its process group).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Input, Label, Static

from mailbus_workbench.model.junit import CaseResult, JunitError, JunitReport, parse_junit
from mailbus_workbench.model.tests_run import (
    Target,
    exit_meaning,
    folder_problem,
    run_command,
    target_for,
)
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.views.base import View

STOP_GRACE_S = 5.0  # after SIGTERM, the run's processes get this long before SIGKILL
OUTPUT_TAIL_LINES = 30
NAME_CHARS = 48  # a longer test or check is cut in the table (whole beside it)
MARKS = {"passed": ("✔", "green"), "failed": ("✘", "red"), "error": ("✘", "red")}


def _mark(outcome: str) -> tuple[str, str]:
    return MARKS.get(outcome, ("○", "yellow"))


def _cut(text: str, limit: int = NAME_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


@dataclass(frozen=True, slots=True)
class RunResult:
    status: int
    report: JunitReport | None
    problem: str  # why there is no report, or ""
    output: str  # the tail of the run's output
    stopped: bool


class TestsView(View):
    __test__ = False  # a view, not a pytest test class (its name starts with Test)
    DEFAULT_FOCUS = "#tests-table"
    HOME_FOCUS = "#tests-table"
    REFRESH_EVERY_S = 0.25
    HELP = """\
## Tests
Runs a folder of pytest tests (`mailbus test`, docs/testing-your-system.md) against the
system this workbench is attached to (`--config` with its options file), as Postman runs
a collection; on the embedded demo each test runs on an in-process bus of its own and a
test saved here starts the demo's participants itself. Each test is listed with its
duration, each check under it with its observed latency; select a failed test to read
its report: what was expected, the nearest misses with a field-by-field diff, and a
timeline of what arrived. Save tests into the folder with **t** on a message in Topics,
a call in Services or Call, or **F4** on an open session in Sessions.

- **r** run every test in the folder; **f** run the failed ones again
- **o** open the selected test: its source, with its file and line
- **s** stop the run (its processes are ended)
- **e** edit the folder (Enter runs it); the default is `tests-folder` in the
  `[workbench]` table of the options file (`tests`)
"""
    BINDINGS = [
        Binding("r", "run_all", "Run all", id="tests.run"),
        Binding("f", "rerun_failed", "Rerun failed", id="tests.failed"),
        Binding("o", "open_test", "Open test", id="tests.open"),
        Binding("s", "stop", "Stop", id="tests.stop"),
        Binding("e", "edit_folder", "Folder", id="tests.folder"),
    ]
    DEFAULT_CSS = """
    #tests-top { height: auto; }
    #tests-top Label { padding: 1 1 0 1; }
    #tests-folder { width: 1fr; }
    #tests-status { height: auto; padding: 0 1; }
    #tests-body { height: 1fr; }
    #tests-table { width: auto; max-width: 70%; }
    #tests-detail-box { width: 1fr; border-left: solid $panel; }
    """

    class Finished(Message):
        """A run ended (the running worker's result)."""

        def __init__(self, result: RunResult) -> None:
            super().__init__()
            self.result: Final = result

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.report: JunitReport | None = None
        self.result: RunResult | None = None
        self.running_since: float | None = None
        self.status_line = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop_asked: float | None = None
        self._output: Path | None = None

    # -- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="tests-top"):
            yield Label("Folder")
            yield Input(str(self.folder), id="tests-folder")
        yield Static("", id="tests-status", markup=False)
        with Horizontal(id="tests-body"):
            yield MeasuredTable(id="tests-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="tests-detail-box"):
                yield Static("", id="tests-detail", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#tests-table", DataTable)
        # The numbers first: a long name never pushes them out of sight.
        table.add_columns("time", "latency", "test / check")
        self._say(self._idle_text())

    @property
    def folder(self) -> Path:
        return self.parts.tests_folder or self.parts.settings.tests_folder

    def _target(self) -> Target:
        engine = self.parts.engine
        return target_for(
            engine.config_file if engine is not None else None,
            engine is not None and engine.demo is not None,
        )

    def _idle_text(self) -> str:
        problem = folder_problem(self.folder)
        return problem or f"r runs the tests in {self.folder}: {self._target().note}"

    def _say(self, text: str) -> None:
        self.status_line = text
        self.query_one("#tests-status", Static).update(text)

    def _detail(self, text: str | Text) -> None:
        self.query_one("#tests-detail", Static).update(text)

    def refresh_view(self, now: float) -> None:
        if self.running_since is None:
            return
        elapsed = time.monotonic() - self.running_since
        last = self._last_output_line()
        self._say(f"Running ({elapsed:.1f} s)… s stops it" + (f"  · {last}" if last else ""))

    def _last_output_line(self) -> str:
        if self._output is None:
            return ""
        try:
            with self._output.open("rb") as out:
                out.seek(max(0, out.seek(0, os.SEEK_END) - 2000))
                lines = out.read().decode("utf-8", "replace").splitlines()
        except OSError:  # not written yet, or removed as the run ends
            return ""
        return next((line.strip() for line in reversed(lines) if line.strip()), "")

    # -- running ----------------------------------------------------------------------
    def action_run_all(self) -> None:
        self.run_tests()

    def action_rerun_failed(self) -> None:
        failed = [c.node_id for c in self.report.cases if c.failed] if self.report else []
        if not failed:
            self.notify("No failed tests to run again.", timeout=3)
            return
        self.run_tests(failed)

    def run_tests(self, node_ids: list[str] | None = None) -> None:
        if self.running_since is not None:
            self.notify("A run is under way (s stops it).", severity="warning", timeout=3)
            return
        folder = self.folder
        problem = folder_problem(folder)
        if problem:
            self._say(problem)
            self._detail(Text(problem, style="bold red"))
            return
        target = self._target()
        work_dir = Path(tempfile.mkdtemp(prefix="mailbus-tests-"))
        report, self._output = work_dir / "report.xml", work_dir / "output.txt"
        argv = run_command(target, report, node_ids or ())
        try:
            with self._output.open("wb") as out:
                # A session (process group) of its own: stop ends what the tests started.
                self._proc = subprocess.Popen(
                    argv,
                    cwd=folder,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
        except OSError as exc:
            shutil.rmtree(work_dir, ignore_errors=True)
            self._say(f"Cannot start the run: {exc}")
            return
        self.running_since = time.monotonic()
        self._stop_asked = None
        what = f"{len(node_ids)} failed test(s)" if node_ids else f"the tests in {folder}"
        self._say(f"Running {what}…")
        self._detail(Text(target.note, style="dim"))
        self._wait(self._proc, report, self._output)

    @work(thread=True, group="tests", exit_on_error=False)
    def _wait(self, proc: subprocess.Popen[bytes], report: Path, output: Path) -> None:
        while True:
            try:
                status = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                asked = self._stop_asked
                if asked is not None and time.monotonic() - asked > STOP_GRACE_S:
                    self._signal(proc, signal.SIGKILL)
        parsed: JunitReport | None = None
        problem = ""
        if report.exists() and self._stop_asked is None:
            try:
                parsed = parse_junit(report.read_bytes())
            except (JunitError, OSError) as exc:
                problem = str(exc)
        lines = output.read_bytes().decode("utf-8", "replace").splitlines()
        tail = "\n".join(lines[-OUTPUT_TAIL_LINES:])
        shutil.rmtree(report.parent, ignore_errors=True)  # the run's own temporary folder
        self.post_message(
            self.Finished(RunResult(status, parsed, problem, tail, self._stop_asked is not None))
        )

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # ended already
            os.killpg(proc.pid, sig)

    def action_stop(self) -> None:
        proc = self._proc
        if self.running_since is None or proc is None:
            self.notify("No run to stop.", timeout=2)
            return
        self._stop_asked = time.monotonic()
        self._signal(proc, signal.SIGTERM)
        self._say("Stopping the run…")

    def on_unmount(self) -> None:
        if self.running_since is not None and self._proc is not None:
            self._stop_asked = time.monotonic()
            self._signal(self._proc, signal.SIGKILL)

    @on(Finished)
    def _finished(self, finished: Finished) -> None:
        result = finished.result
        self.running_since = None
        self._proc = None
        self.result = result
        if result.stopped:
            self._say("Run stopped: its processes were ended; nothing was reported.")
            self._detail(Text(result.output))
            return
        if result.report is not None:
            self.report = result.report
            self._fill(result.report)
        meaning = exit_meaning(result.status)
        if result.status in (0, 1) and result.report is not None:
            self._say(f"{result.report.summary()}: {meaning}")
            self._show_row()
        else:
            self._say(f"mailbus test ended with status {result.status}: {meaning}")
            self._detail(
                Text.assemble(
                    (f"{meaning}\n", "bold red"),
                    (f"{result.problem}\n" if result.problem else "", "red"),
                    ("\n--- the run's output (last lines) ---\n", "dim"),
                    result.output,
                )
            )

    # -- the table --------------------------------------------------------------------
    def _fill(self, report: JunitReport) -> None:
        table = self.query_one("#tests-table", DataTable)
        table.clear()
        for i, case in enumerate(report.cases):
            mark, style = _mark(case.outcome.value)
            table.add_row(
                Text(_ms(case.duration_s), justify="right"),
                "",
                Text.assemble((f"{mark} ", style), (_cut(case.name), "bold")),
                key=f"case:{i}",
            )
            for j, check in enumerate(case.checks):
                mark, style = _mark("passed" if check.passed else "failed")
                latency = _ms(check.latency_s) if check.latency_s is not None else ""
                table.add_row(
                    "",
                    Text(latency, justify="right"),
                    Text.assemble("   ", (f"{mark} ", style), _cut(check.what, NAME_CHARS - 3)),
                    key=f"check:{i}:{j}",
                )
        first_failed = next((i for i, c in enumerate(report.cases) if c.failed), None)
        if first_failed is not None:
            table.move_cursor(row=table.get_row_index(f"case:{first_failed}"))

    def selected_case(self) -> CaseResult | None:
        if self.report is None:
            return None
        table = self.query_one("#tests-table", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value or ""
        index = key.split(":")[1] if ":" in key else ""
        return self.report.cases[int(index)] if index.isdigit() else None

    @on(DataTable.RowHighlighted, "#tests-table")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        self._show_row()

    def _show_row(self) -> None:
        case = self.selected_case()
        if case is None:
            return
        where = f"{case.file}:{case.line}" if case.line else case.file
        head = Text.assemble(
            (f"{case.name}", "bold"),
            f"  {case.outcome.value} in {_ms(case.duration_s)}  ({where})\n",
        )
        checks = [
            f"{'✔' if c.passed else '✘'} {c.what}"
            + (f"  observed {_ms(c.latency_s)}" if c.latency_s is not None else "")
            for c in case.checks
        ]
        body = "\n".join(checks) + "\n" if checks else ""
        if case.failed or case.message:
            body += f"\n{case.text or case.message}"
        self._detail(Text.assemble(head, body))

    def action_open_test(self) -> None:
        case = self.selected_case()
        if case is None:
            self.notify("Run the tests, then select one to open.", timeout=3)
            return
        path = self.folder / case.file
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            self._detail(Text(f"Cannot open {path}: {exc}", style="red"))
            return
        start = (case.line or 1) - 1
        end = start + 1
        while end < len(lines) and not lines[end][:1].strip():
            end += 1  # the function's body: up to the next line at the margin
        source = "\n".join(lines[start:end]).rstrip()
        self._detail(Text.assemble((f"{path}:{start + 1}\n\n", "bold"), source))

    # -- the folder -------------------------------------------------------------------
    def action_edit_folder(self) -> None:
        self.query_one("#tests-folder", Input).focus()

    @on(Input.Changed, "#tests-folder")
    def _folder_changed(self, event: Input.Changed) -> None:
        text = event.value.strip()
        self.parts.tests_folder = Path(text).expanduser() if text else None
        if self.running_since is None:
            self._say(self._idle_text())

    @on(Input.Submitted, "#tests-folder")
    def _folder_submitted(self) -> None:
        self.query_one("#tests-table", DataTable).focus()
        self.run_tests()
